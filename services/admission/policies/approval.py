"""Approval: an op waits for `opsched approve` when it says ``isApproved: false`` (Polyaxon), or when
its queue's policy finds it too expensive or too large (estimated cost, accelerators of all pods). Its cost is
its highest estimate over the flavors its queue could give it (``flavor_cost.highest``): approved once, it may
be admitted to any of them."""
from __future__ import annotations

from opsched.proto.reasons import Hold
from opsched.services.admission.model.queues import Book
from opsched.services.admission.model.records import OpRecord
from opsched.services.admission.policies import flavor_cost


def hold_reason(op: OpRecord, book: Book) -> tuple[str, str] | None:
    if op.approved:
        return None
    if op.spec.is_approved is False:
        return Hold.IS_APPROVED_FALSE, f"isApproved: false — waiting for `opsched approve {op.op_id}`"
    queue = book.queues.get(op.queue)
    if queue is None:
        return None
    policy = queue.approval
    if policy.cost_above is not None:
        estimate, flavor = flavor_cost.highest(op, book)  # the worst place it may land
        if estimate > policy.cost_above:
            return Hold.COST_ABOVE_THRESHOLD, (
                f"estimated cost {estimate:.2f}{flavor} is above queue {op.queue}'s approval threshold "
                f"{policy.cost_above:.2f} — waiting for `opsched approve {op.op_id}`")
    gpus = op.gpus  # whole devices: shared GPU memory is GiB, not GPUs
    if policy.gpus_above is not None and gpus > policy.gpus_above:
        return Hold.GPUS_ABOVE_THRESHOLD, (f"{gpus:g} accelerators is above queue {op.queue}'s approval threshold "
                                        f"{policy.gpus_above:g} — waiting for `opsched approve {op.op_id}`")
    return None
