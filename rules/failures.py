"""Which failures are the op's own (they use a retry) and which are the infrastructure's (they do not).

Shared by admission (which schedules retries) and every view of an op's state (so a client knows
whether a ``failed`` attempt is final)."""
from __future__ import annotations

from collections.abc import Sequence

from proto.reasons import Failure

INFRASTRUCTURE_REASONS = frozenset({
    Failure.HANDLER_GAVE_UP, Failure.POD_DELETED, Failure.NODE_LOST, Failure.AGENT_LOST, Failure.NODE_SHUTDOWN,
    Failure.EVICTED, Failure.PREEMPTED, Failure.TERMINATED, Failure.SHUTDOWN, Failure.UNEXPECTED_ADMISSION_ERROR,
    Failure.OUT_OF_CPU, Failure.OUT_OF_MEMORY, Failure.OUT_OF_GPU,
})
# retrying cannot help: the pod is refused, its namespace is not the dispatcher's to use (missing, forbidden:
# an admin's fix), its deadline passed, a pod of its name belongs to another op or attempt (PodConflict), its
# events cannot be published or folded
FINAL_REASONS = frozenset({Failure.POD_REJECTED, Failure.NAMESPACE_REFUSED, Failure.POD_CONFLICT,
                           Failure.DEADLINE_EXCEEDED, Failure.MESSAGE_TOO_LARGE, Failure.FOLD_FAILED})


def is_infrastructure(reason: str) -> bool:
    return reason in INFRASTRUCTURE_REASONS


MAX_INFRASTRUCTURE_RETRIES = 10


def will_retry(reason: str, max_retries: int | None, retries_used: int, infra_failures: int = 0) -> bool:
    """Does a failed attempt lead to another one? Infrastructure failures retry (up to 10 times) without
    using a retry; the op's own failures retry while ``retries_used`` (own failures before this one) is
    below ``maxRetries``."""
    if reason in FINAL_REASONS:
        return False
    if is_infrastructure(reason):
        return infra_failures < MAX_INFRASTRUCTURE_RETRIES
    return retries_used < (max_retries or 0)


def will_retry_after(reason: str, max_retries: int | None, earlier: Sequence[str]) -> bool:
    """``will_retry`` as a follower of the op stream can tell it (the cache, the client's view): the op's own
    and the infrastructure's failures counted from ``earlier``, the reasons of the op's earlier failed attempts.
    Admission decides from its own counts (which also count a handler's giving up, no ``failed`` event); this
    agrees with it as far as the ``failed`` events tell."""
    own = sum(1 for r in earlier if not is_infrastructure(r))
    return will_retry(reason, max_retries, own, len(earlier) - own)


# The messages an op waits on a service to handle (its gates, its dispatch, its stop or preemption): a
# handler that gives up on one of them (``handler_failed``) would leave the op stuck, so admission ends the
# op, or retries the attempt. A handler giving up on bookkeeping (a cost ledger's ``running``, a cache's
# ``succeeded``) or on a command does not hold the op: it is dead-lettered and shown, the op goes on.
BLOCKING_MESSAGES = frozenset({"submitted", "admitted", "stop_requested", "preempt_requested"})
