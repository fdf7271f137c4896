"""An operation's lifecycle, defined once: its statuses, which are active and which terminal, the status each
event moves an op to, and which events end an attempt or may end the op. Admission's fold, the client's
view, the cache and the cost ledger all read it from here.

    pending --(cost estimate + cache answer)--> queued --> admitted --> dispatched --> running
       |  \\--(approval needed)--> on_hold --(approve)--> queued        |            |
       |                                                              v            v
       +--> rejected / skipped / stopped        succeeded | failed | timed_out | stopped
    (an attempt preempted, evicted or failed with a retry left goes back to queued as the next attempt)

A ``failed`` attempt is admission's to decide on, once: it publishes ``retry_scheduled`` (the next attempt
follows) or ``failure_final`` (the op has failed). Everyone else reads the decision, never derives it.
"""
from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from opsched.proto.events import (
    CacheHit,
    CacheMissed,
    CostEstimated,
    DispatchDelayed,
    Event,
    FailureFinal,
    OperationAdmitted,
    OperationApproved,
    OperationDispatched,
    OperationEvicted,
    OperationFailed,
    OperationOnHold,
    OperationPreempted,
    OperationRejected,
    OperationRunning,
    OperationSkipped,
    OperationStopped,
    OperationSubmitted,
    OperationSucceeded,
    OperationTimedOut,
    PreemptRequested,
    RetryScheduled,
    StopRequested,
)
from opsched.proto.reasons import Ending


class Status(IntEnum):
    PENDING = 0  # waiting for gates (cost estimate, cache answer)
    ON_HOLD = 1  # waiting for approval
    QUEUED = 2  # gates cleared, waiting for a slot
    ADMITTED = 3
    DISPATCHED = 4
    RUNNING = 5
    RETRYING = 6  # an attempt failed; the next one is scheduled
    SUCCEEDED = 10
    FAILED = 11
    REJECTED = 12
    STOPPED = 13
    SKIPPED = 14
    TIMED_OUT = 15

    @property
    def active(self) -> bool:
        """Admitted and not ended: it holds quota."""
        return Status.ADMITTED <= self <= Status.RUNNING

    @property
    def terminal(self) -> bool:
        return self >= Status.SUCCEEDED

    @property
    def label(self) -> str:
        """How people read it: ``timed_out``."""
        return self.name.lower()


RESUMABLE = frozenset({Status.STOPPED, Status.FAILED, Status.TIMED_OUT})  # `opsched resume` continues these
# A hook's ``trigger`` (Polyaxon's) -> the ends of its op that run it (``done``: any end but a rejection)
HOOK_TRIGGERS: dict[str, frozenset[Status]] = {
    Status.SUCCEEDED.label: frozenset({Status.SUCCEEDED}),
    Status.FAILED.label: frozenset({Status.FAILED, Status.TIMED_OUT}),
    Status.STOPPED.label: frozenset({Status.STOPPED}),
    "done": frozenset({Status.SUCCEEDED, Status.FAILED, Status.TIMED_OUT, Status.STOPPED, Status.SKIPPED}),
}
NEXT_ATTEMPT_FROM = frozenset({s for s in Status if s.active} | {Status.RETRYING} | RESUMABLE)


def allowed(before: Status, after: Status) -> bool:
    """The status machine. Within an attempt a status only moves forward, and never out of an end; an
    attempt taken away (preempted, evicted, failed with a retry left) or a resumed end queues the op for
    its next attempt."""
    if after == Status.QUEUED and before in NEXT_ATTEMPT_FROM:
        return True
    return not before.terminal and after > before


ACTIVE_LABELS = tuple(s.label for s in Status if s.active)
TERMINAL_LABELS = tuple(s.label for s in Status if s.terminal)

# The status an event moves an op to in admission's fold (a failure with a retry left is RETRYING instead: the fold
# decides, and says so with ``retry_scheduled`` or ``failure_final``).
STATUS_OF: dict[type[Event], Status] = {
    OperationAdmitted: Status.ADMITTED,
    OperationDispatched: Status.DISPATCHED,
    OperationRunning: Status.RUNNING,
    OperationSucceeded: Status.SUCCEEDED,
    OperationFailed: Status.FAILED,
    OperationRejected: Status.REJECTED,
    OperationStopped: Status.STOPPED,
    OperationSkipped: Status.SKIPPED,
    OperationTimedOut: Status.TIMED_OUT,
    FailureFinal: Status.FAILED,
}
# What ends an attempt that was admitted (its pods are gone or going; what it ran is billed).
ATTEMPT_ENDS: tuple[type[Event], ...] = (OperationSucceeded, OperationFailed, OperationTimedOut, OperationStopped,
                                         OperationPreempted, OperationEvicted)
# What ends the op itself, as a follower of the op stream reads it: a failure ends it only by admission's
# ``failure_final`` (a ``failed`` alone is an attempt's end, which admission may retry).
OP_ENDS: tuple[type[Event], ...] = (OperationSucceeded, FailureFinal, OperationStopped, OperationTimedOut,
                                    OperationSkipped, OperationRejected)
CACHE_HIT_REASON = Ending.CACHE_HIT  # an op that succeeded because an identical op's result was reused


class Shown(NamedTuple):
    """How an event shows to someone following the op stream (the client's ``opsched ops`` and ``watch``):
    the word, and its rank (a status of the lifecycle above; a later event shows only if it ranks higher
    within an attempt, and nothing changes once an op has ended)."""

    label: str
    rank: float


ATTEMPT_FAILED_SHOWN = Shown("attempt_failed", Status.RUNNING + 0.75)  # admission decides what follows
# Each event as it shows: its lifecycle status; the gates and an approval as pending (which gate is
# admission's to know); a stop or preemption asked of a running op as stopping/preempting until its pods
# are gone; an attempt taken away as itself until the next one starts (as RETRYING ranks); a dispatch waiting
# for the Kubernetes API as still admitted (its reason says what it waits for); a failed attempt as
# ``attempt_failed`` until admission's decision on it: ``retrying`` (``retry_scheduled``) or ``failed``
# (``failure_final``, the op's end).
SHOWN: dict[type[Event], Shown] = {
    OperationSubmitted: Shown("pending", Status.PENDING),
    CostEstimated: Shown("pending", Status.PENDING),
    CacheMissed: Shown("pending", Status.PENDING),
    CacheHit: Shown("pending", Status.PENDING),
    OperationOnHold: Shown(Status.ON_HOLD.label, Status.ON_HOLD),
    OperationApproved: Shown("pending", Status.ON_HOLD),
    **{event: Shown(status.label, status) for event, status in STATUS_OF.items()},
    OperationFailed: ATTEMPT_FAILED_SHOWN,
    DispatchDelayed: Shown(Status.ADMITTED.label, Status.ADMITTED),
    StopRequested: Shown("stopping", Status.RUNNING + 0.5),
    PreemptRequested: Shown("preempting", Status.RUNNING + 0.5),
    OperationPreempted: Shown("preempted", Status.RETRYING),
    OperationEvicted: Shown("evicted", Status.RETRYING),
    RetryScheduled: Shown(Status.RETRYING.label, Status.RETRYING),
}
NEXT_ATTEMPT_SHOWN = Shown("pending", Status.ON_HOLD)  # resumed, or a new attempt: its statuses start again
