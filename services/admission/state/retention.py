"""Retention, the rule: when a finished op leaves admission's memory, and what remains of it.

A finished (terminal) op leaves memory ``ttl`` after its end: its own ``termination.ttl`` if the spec
sets one, else the retention setting (``OPSCHED_RETENTION_TTL_S``, 24 h). What views need of it goes to
the op summaries bucket first (``summary_of``); its final status stays in a bounded set of
``Tombstones`` (for schedules' ``dependsOnPast``, duplicate submits, commands about it); its events
then leave the op stream (``purge``). Events about ops admission does not hold (a submit rejected
before it was an op, an error naming no op, news arriving after the op left) are ``Strays``: removed
from the stream the same ttl after they happened. Pure: time and sequences come from the caller."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta

from opsched.proto import subjects
from opsched.proto.events import Event, OperationRejected, event_type
from opsched.proto.history import HistoryEntry
from opsched.proto.lifecycle import STATUS_OF, Status
from opsched.proto.pod_resources import accelerators_of, gpus_of
from opsched.proto.summaries import AttemptEnd, OpSummary
from opsched.rules.op_history import entry_of
from opsched.services.admission.model.records import OpRecord


def ttl_of(op: OpRecord, default_s: float) -> float:
    """Seconds a finished op is kept: its ``termination.ttl``, else the retention setting."""
    own = op.spec.termination.ttl
    return float(own) if own is not None and own >= 0 else default_s


def expired(op: OpRecord, now: datetime, default_s: float, consumed_seq: int) -> bool:
    """A finished op whose ttl has passed, every event of which the services have consumed."""
    return (op.status.terminal and op.history.ended_at is not None and op.history.last_seq <= consumed_seq
            and not op.failure_undecided  # the stream's followers wait for its ``failure_final``
            and now >= op.history.ended_at + timedelta(seconds=ttl_of(op, default_s)))


def summary_of(op: OpRecord) -> OpSummary:
    """What ``opsched ops``, ``why`` and ``status`` show of the op once it has left memory."""
    return OpSummary(
        op_id=op.op_id, status=op.status.label, name=op.spec.name or "", queue=op.queue,
        project=op.spec.project or "", attempt=op.attempt, reason=op.reason,
        message=op.handler_failure or op.reason_message, node=op.node or "",
        gpus=gpus_of(op.spec), accelerators=accelerators_of(op.spec),
        submitted_at=op.submitted_at, admitted_at=op.admitted_at, running_since=op.running_since,
        ended_at=op.history.ended_at, estimate=op.estimate, currency=op.history.currency, cost=round(op.history.cost, 6),
        attempts=[AttemptEnd(attempt=a, ended=how, reason=why) for a, how, why in op.history.attempts],
        requested_by=op.requested_by or "", original_op_id=op.history.original_op_id, relation=op.history.relation,
        outputs=dict(op.history.outputs), history=list(op.history.timeline.entries),
        history_dropped=op.history.timeline.dropped, batch=op.spec.batch or "", iteration=op.spec.iteration,
        tags=list(op.spec.tags), params=dict(op.spec.params))


class Tombstones:
    """The final status of the ``bound`` ops that left memory last (the oldest forgotten first)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.status: OrderedDict[str, Status] = OrderedDict()

    def add(self, op_id: str, status: Status) -> None:
        self.status[op_id] = status
        self.status.move_to_end(op_id)
        while len(self.status) > self.bound:
            self.status.popitem(last=False)

    def get(self, op_id: str) -> Status | None:
        return self.status.get(op_id)

    def __contains__(self, op_id: str) -> bool:
        return op_id in self.status


@dataclass(frozen=True)
class Stray:
    """An event about an op admission does not hold: removed from the stream ``ttl`` after ``at``."""

    subject: str
    seq: int
    at: datetime
    op_id: str
    status: Status | None  # the op's end, when the event is one (a submit rejected before it was an op) ...
    reason: str = ""  # ... with its reason and message (``why``) ...
    message: str = ""
    name: str = ""  # ... the op's name and the queue it asked for (a rejected submit names them) ...
    queue: str = ""
    entry: HistoryEntry | None = None  # ... and the entry its end gives its history (``rules.op_history``)

    def summary(self) -> OpSummary | None:
        """What views keep of the op it ended once it leaves the stream (None: it ended none)."""
        if self.status is None:
            return None
        return OpSummary(op_id=self.op_id, status=self.status.label, name=self.name, queue=self.queue,
                         reason=self.reason, message=self.message, ended_at=self.at,
                         history=[self.entry] if self.entry is not None else [])


class Strays:
    def __init__(self) -> None:
        self.found: list[Stray] = []  # in stream order

    def add(self, event: Event, seq: int) -> None:
        """Note an event about an op not held (spend excepted: it is kept for its budget windows)."""
        kind = event_type(type(event))
        if seq and kind not in subjects.KEPT_PAST_PURGE:
            status = STATUS_OF.get(type(event))
            end = status if status is not None and status.terminal else None
            named = event if isinstance(event, OperationRejected) and end is not None else None
            self.found.append(Stray(subjects.event(kind, event.op_id), seq, event.at, event.op_id, end,
                                    getattr(event, "reason", "") if end else "",
                                    getattr(event, "message", "") if end else "",
                                    name=named.name if named else "", queue=named.queue if named else "",
                                    entry=entry_of(event) if end else None))

    def due(self, now: datetime, ttl_s: float, consumed_seq: int, limit: int) -> list[Stray]:
        """The strays whose ttl has passed and which every service has consumed, oldest first; forgotten."""
        out: list[Stray] = []
        keep: list[Stray] = []
        for stray in self.found:
            ready = stray.seq <= consumed_seq and now >= stray.at + timedelta(seconds=ttl_s)
            (out if ready and len(out) < limit else keep).append(stray)
        self.found = keep
        return out

    def ended(self, op_id: str) -> Status | None:
        """How an op admission never held ended, if a stray says so (a submit rejected before it was an op)."""
        stray = self.end_of(op_id)
        return stray.status if stray is not None else None

    def end_of(self, op_id: str) -> Stray | None:
        """The stray that ended an op admission never held (its status, reason and message), if any."""
        return next((s for s in reversed(self.found) if s.op_id == op_id and s.status is not None), None)

    def __len__(self) -> int:
        return len(self.found)
