"""An op's history, the rule: which event gives which ``HistoryEntry`` (``entry_of``), and the bounded
``Timeline`` admission keeps per op (``why`` answers it, the op's summary keeps it).

``entry_of`` is one table by event type: each event that says what happened to the op (submitted, held,
approved, rejected, admitted where, running where, preempted by whom and why, evicted, failed, retried, ended,
resumed, charged) gives one entry; the events in ``NOT_SHOWN`` (gates' answers, bookkeeping, other scopes'
facts) and any type this module does not know give none. A ``Timeline`` keeps the first entry and the latest
``MAX_HISTORY_ENTRIES - 1`` ones, counting those it drops, and skips an entry equal to the one before it but
for its time (an event published again). Pure: it reads only the event."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from opsched.proto.events import (
    BudgetExceeded,
    CacheHit,
    CacheMissed,
    CostEstimated,
    CostRecorded,
    DispatchDelayed,
    ErrorRaised,
    Event,
    FailureFinal,
    HandlerFailed,
    NodeCostRecorded,
    NotificationAttempted,
    NotificationDue,
    NotificationFailed,
    OperationAdmitted,
    OperationApproved,
    OperationDispatched,
    OperationEvicted,
    OperationFailed,
    OperationOnHold,
    OperationPreempted,
    OperationRejected,
    OperationResumed,
    OperationRunning,
    OperationSkipped,
    OperationStopped,
    OperationSubmitted,
    OperationSucceeded,
    OperationTimedOut,
    OperationTouched,
    PreemptRequested,
    RetryScheduled,
    SpendRolled,
    StopRequested,
    event_type,
)
from opsched.proto.history import HistoryEntry
from opsched.proto.limits import MAX_HISTORY_ENTRIES, MAX_HISTORY_MESSAGE
from opsched.proto.reasons import Ending
from opsched.proto.schedules import SCHEDULE_EVENTS

BORROWING = "borrowing"  # an ``admitted`` entry's reason: admitted on quota borrowed from its cohort


def cut(message: str) -> str:
    """``message`` within ``MAX_HISTORY_MESSAGE`` characters ("…" marks a cut)."""
    return message if len(message) <= MAX_HISTORY_MESSAGE else message[:MAX_HISTORY_MESSAGE - 1] + "…"


def _failed(e: OperationFailed) -> dict[str, Any]:
    code = f"exit code {e.exit_code}" if e.exit_code is not None else ""
    return {"node": e.node or "", "reason": e.reason, "message": "; ".join(p for p in (e.message, code) if p)}


def _succeeded(e: OperationSucceeded) -> dict[str, Any]:
    return {"node": e.node or "", "reason": "" if e.reason == Ending.COMPLETED else e.reason,
            "message": e.outputs_warning}


def notification_outcome(e: NotificationAttempted) -> str:
    """``succeeded #1: 200`` / ``failed #2: 503, retry in 8 s`` / ``...: connection refused, given up``."""
    answer = str(e.status) if e.status is not None else (e.error or "no answer")
    if e.status is not None and e.error and not e.delivered:
        answer += f" {e.error}"
    tail = "" if e.delivered else (f", retry in {e.retry_in_s:g} s" if e.retry_in_s is not None else ", given up")
    return f"{e.trigger} #{e.delivery_attempt}: {answer}{tail}"


# event type -> the fields of its entry (besides ``at``, ``attempt`` and ``event``)
ENTRIES: dict[type[Event], Callable[[Any], dict[str, Any]]] = {
    OperationSubmitted: lambda e: {"queue": e.queue, "by": e.requested_by or ""},
    OperationOnHold: lambda e: {"reason": e.reason, "message": e.message},
    OperationApproved: lambda e: {"by": e.approved_by, "message": e.comment},
    OperationRejected: lambda e: {"reason": e.reason, "message": e.message, "queue": e.queue},
    CacheHit: lambda e: {"by": e.original_op_id},
    OperationAdmitted: lambda e: {"queue": e.queue, "flavors": dict(e.flavors), "node": e.agent,
                                  "reason": BORROWING if e.borrowing else "", "amount": e.estimate,
                                  "pool": e.pool},
    OperationRunning: lambda e: {"node": e.node or ""},
    PreemptRequested: lambda e: {"by": e.preemptor, "reason": e.reason, "message": e.message},
    OperationPreempted: lambda e: {"by": e.preemptor, "reason": e.reason, "message": e.message},
    OperationEvicted: lambda e: {"reason": e.reason, "message": e.message, "retry_after_s": e.retry_after_s},
    OperationFailed: _failed,
    RetryScheduled: lambda e: {"reason": e.reason, "retry_after_s": e.retry_after_s},
    FailureFinal: lambda e: {"reason": e.reason, "message": e.message},
    OperationTimedOut: lambda e: {"node": e.node or "", "message": e.message},
    StopRequested: lambda e: {"reason": e.reason},
    OperationStopped: lambda e: {"reason": e.reason, "message": e.message},
    OperationSucceeded: _succeeded,
    OperationSkipped: lambda e: {"reason": e.reason, "message": e.message},
    OperationResumed: lambda e: {"by": e.resumed_by},
    HandlerFailed: lambda e: {"by": e.service, "reason": e.failed_type, "message": e.error},
    CostRecorded: lambda e: {"amount": e.amount, "pool": e.pool, "queue": e.queue},
    NotificationAttempted: lambda e: {"by": e.connection, "reason": "delivered" if e.delivered else "failed",
                                      "message": notification_outcome(e)},
    NotificationFailed: lambda e: {"by": e.connection, "reason": "given_up", "message": e.error},
}

# events that say nothing of what happened to the op (a gate's answer, bookkeeping, a budget's or a schedule's news)
NOT_SHOWN: frozenset[type[Event]] = frozenset({
    CostEstimated, CacheMissed, OperationDispatched, OperationTouched, DispatchDelayed, BudgetExceeded,
    ErrorRaised, SpendRolled, NodeCostRecorded, *SCHEDULE_EVENTS,
    NotificationDue,  # its attempts are shown
})


def entry_of(event: Event) -> HistoryEntry | None:
    """The history entry ``event`` gives its op, or None (a type in ``NOT_SHOWN``, or one not known here)."""
    fields = ENTRIES.get(type(event))
    if fields is None:
        return None
    values = fields(event)
    values["message"] = cut(values.get("message", ""))
    return HistoryEntry(at=event.at, attempt=event.attempt, event=event_type(type(event)), **values)


def same_but_time(a: HistoryEntry, b: HistoryEntry) -> bool:
    """The same fact (an event published again): equal but for ``at``."""
    return msgspec.structs.replace(a, at=b.at) == b


@dataclass
class Timeline:
    """An op's entries, oldest first: the first one and the latest ``limit - 1``; ``dropped`` those between."""

    entries: list[HistoryEntry] = field(default_factory=list)
    dropped: int = 0
    limit: int = MAX_HISTORY_ENTRIES

    def add(self, entry: HistoryEntry | None) -> None:
        if entry is None or (self.entries and same_but_time(self.entries[-1], entry)):
            return
        self.entries.append(entry)
        if len(self.entries) > self.limit:
            del self.entries[1]
            self.dropped += 1
