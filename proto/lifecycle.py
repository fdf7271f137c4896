"""An operation's lifecycle, defined once: its statuses, which are active and which terminal, the status each
event moves an op to, and which events end an attempt or may end the op. Admission's fold, the client's
view, the cache and the cost recorder all read it from here.

    pending --(cost estimate + cache answer)--> queued --> admitted --> dispatched --> running
       |  \\--(approval needed)--> on_hold --(approve)--> queued        |            |
       |                                                              v            v
       +--> rejected / skipped / stopped        succeeded | failed | timed_out | stopped
    (an attempt preempted, evicted or failed with a retry left goes back to queued as the next attempt)
"""
from __future__ import annotations

from enum import IntEnum

from proto.events import (
    Event,
    OperationAdmitted,
    OperationDispatched,
    OperationEvicted,
    OperationFailed,
    OperationPreempted,
    OperationRejected,
    OperationRunning,
    OperationSkipped,
    OperationStopped,
    OperationSucceeded,
    OperationTimedOut,
)


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


ACTIVE_LABELS = tuple(s.label for s in Status if s.active)
TERMINAL_LABELS = tuple(s.label for s in Status if s.terminal)

# The status an event moves an op to (a failure with a retry left is RETRYING instead: see the fold).
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
}
# What ends an attempt that was admitted (its pods are gone or going; what it ran is billed).
ATTEMPT_ENDS: tuple[type[Event], ...] = (OperationSucceeded, OperationFailed, OperationTimedOut, OperationStopped,
                                         OperationPreempted, OperationEvicted)
# What may end the op itself (a failure ends it only when no retry is left).
OP_ENDS: tuple[type[Event], ...] = (OperationSucceeded, OperationFailed, OperationStopped, OperationTimedOut,
                                    OperationSkipped, OperationRejected)
CACHE_HIT_REASON = "cache_hit"  # an op that succeeded because an identical op's result was reused
