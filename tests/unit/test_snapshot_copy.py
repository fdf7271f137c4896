"""A snapshot's copy (what a preemption plan simulates on): equal to the original, and nothing done to it shows in
the original — every mutable part is copied, only the fixed parts (the queue book, the spend, the nodes and what
was worked out from them) are shared."""
from __future__ import annotations

import copy
import dataclasses

import msgspec

from opsched.proto.events import OperationAdmitted
from opsched.proto.resources import GPU_MEMORY
from opsched.services.admission import cycle
from opsched.services.admission.state.admission_state import snapshot_of
from opsched.services.admission.state.capacity import Capacity
from opsched.services.admission.state.snapshot import Snapshot, same
from opsched.services.admission.state.spend import Spend
from tests.builders import T0, book, fold, node, op, queue, queued, running, t
from tests.unit.test_parking import shared_node

LAB = book(queue("a", cohort="lab", gpus={"h100": 3}), queue("b", cohort="lab", gpus={"h100": 3}))
SHARED = {Snapshot: {"book", "spend", "now", "stopped"}, Capacity: {"nodes", "_matching", "_ever", "_agents", "pools", "_reported"}}


def a_busy_snapshot() -> Snapshot:
    """Two whole-GPU ops and one on shared GPU memory running, in two queues, on three nodes."""
    state = fold(node("gpu-0", gpus=2, product="H100"), node("gpu-1", gpus=2, product="H100"), shared_node("share-0"),
                 queued(op("x").gpus(2, product="H100").build(), op_id="x", queue="a", at=T0),
                 queued(op("y").gpus(1, product="H100").build(), op_id="y", queue="b", at=t(1)),
                 queued(op("z").limits(**{GPU_MEMORY: "8"}).build(), op_id="z", queue="b", at=t(2)))
    now = t(10)
    for decision in cycle.decide(state, LAB, now, "opsched"):
        fold(running(decision.op_id, at=now, node=None), state=state)
    snap = snapshot_of(state, LAB, now)
    assert set(snap.placed) == {"x", "y", "z"} and snap.capacity.shared
    return snap


def parts(value: object) -> dict[str, object]:
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}  # type: ignore[arg-type]


def test_a_copy_is_equal_and_shares_only_the_fixed_parts():
    snap = a_busy_snapshot()
    twin = snap.copy()
    for original, copied in ((snap, twin), (snap.capacity, twin.capacity)):
        for name, value in parts(original).items():
            if name == "capacity":
                continue
            assert getattr(copied, name) == value, name
            shared = name in SHARED[type(original)] or value is None
            assert (getattr(copied, name) is value) == shared, f"{type(original).__name__}.{name}"
    assert isinstance(twin.spend, Spend) and twin.book is LAB


def test_what_is_done_to_a_copy_does_not_show_in_the_original():
    snap = a_busy_snapshot()
    before = copy.deepcopy(snap, {id(snap.book): snap.book, id(snap.spend): snap.spend})
    twin = snap.copy()
    for op_id in list(snap.placed):  # as a preemption plan does: take ops out, then place others
        twin.placed.pop(op_id)
    twin.running["a"] += 5
    twin.usage["b"][("nvidia.com/gpu", "h100")] += 7
    twin.usage["new"][("nvidia.com/gpu", "h100")] += 1
    twin.capacity.give_back("gpu-0", {"nvidia.com/gpu": 2})
    twin.capacity.take("share-0", {GPU_MEMORY: 4})
    twin.starved.add("a")
    twin.unplaced.add("x")
    twin.committed[("queue", "a")] = (1.0, 1.0)
    assert parts(snap) == parts(before) and parts(snap.capacity) == parts(before.capacity)



def test_a_later_attempt_admitted_while_the_earlier_still_counts_is_counted_where_and_at_what_it_now_is():
    """An ``admitted`` of attempt 1 read while attempt 0 still holds quota (its end not read yet): the op's agent,
    flavors and estimate change; the tracked snapshot lets go of the old ones first, so it stays what a build gives
    (found by the admission fuzzer)."""
    state = fold(node("gpu-0", gpus=2, product="H100"),
                 queued(op("x").gpus(1, product="H100").build(), op_id="x", queue="a", at=T0))
    [admitted] = [d for d in cycle.decide(state, LAB, t(1), "opsched") if isinstance(d, OperationAdmitted)]
    fold(admitted, running("x", at=t(2), node="gpu-0"), state=state)
    fold(msgspec.structs.replace(admitted, attempt=1, at=t(3), estimate=278.0, pool="spot",
                                 agent="agent-b"), state=state)
    tracked = state.usage.current(LAB, t(4))
    assert not same(tracked, snapshot_of(state, LAB, t(4)))
    assert tracked.cost_used["a"] == 278.0
