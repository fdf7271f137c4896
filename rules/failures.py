"""Which failures are the op's own (they use a retry) and which are the infrastructure's (they do not), and
whether a failed attempt is retried: admission's rule, applied by admission alone when it folds the failure.
It publishes the decision (``retry_scheduled`` or ``failure_final``); the cache and the views read that, never
this rule (they could not apply it as admission does: a handler's giving up, counted here, has no ``failed``)."""
from __future__ import annotations

from opsched.proto.reasons import Failure

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


def why_final(reason: str, max_retries: int | None, retries_used: int) -> str:
    """Why a failure ``will_retry`` refused is final, for people (``failure_final.message``)."""
    if reason in FINAL_REASONS:
        return f"{reason} is never retried: retrying cannot help"
    if is_infrastructure(reason):
        return f"infrastructure failures are retried {MAX_INFRASTRUCTURE_RETRIES} times, no more"
    return f"no retry left: {retries_used} of maxRetries {max_retries or 0} used"


# The messages an op waits on a service to handle (its gates, its dispatch, its stop or preemption): a
# handler that gives up on one of them (``handler_failed``) would leave the op stuck, so admission ends the
# op, or retries the attempt. A handler giving up on bookkeeping (a cost ledger's ``running``, a cache's
# ``succeeded``) or on a command does not hold the op: it is dead-lettered and shown, the op goes on.
BLOCKING_MESSAGES = frozenset({"submitted", "admitted", "stop_requested", "preempt_requested"})
