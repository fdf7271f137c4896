"""Which attempts should have pods: the op stream folded into the latest attempt of each op.

The dispatcher replays the op stream on start and then follows it (``Dispatcher.start``); each event
moves its op's latest attempt forward through the stages below, never back:

    admitted -> dispatched -> running -> releasing (stop or preemption asked) -> ended

An attempt is **live** (it should have pods) while admitted, dispatched or running. It is **unwanted**
once a stop or preemption was asked for it, it ended (``proto.lifecycle.ATTEMPT_ENDS``, rejected, or a retry
was scheduled after it: a handler gave up on its ``admitted``), or any event of a later attempt of its op
was folded (a stop of a retry not admitted yet ends the op): the admitted handler then creates nothing (a stop or preemption handled
while an ``admitted`` waited for redelivery wins), and the reconciler deletes its pods still running.
An ended attempt keeps only its key and stage (no spec), so memory is a few dozen bytes per op.

For a service's culling (``culling``) a live attempt also keeps when it started running (its first ``running``) and
when it was last touched (``touched``: ``opsched touch``).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum

from opsched.proto import subjects
from opsched.proto.events import (
    Event,
    OperationAdmitted,
    OperationDispatched,
    OperationRejected,
    OperationRunning,
    OperationTouched,
    PreemptRequested,
    RetryScheduled,
    StopRequested,
    event_type,
)
from opsched.proto.lifecycle import ATTEMPT_ENDS
from opsched.services.dispatcher.gang import AttemptKey


class Stage(IntEnum):
    ADMITTED = 1
    DISPATCHED = 2
    RUNNING = 3
    RELEASING = 4  # a stop or a preemption was asked: its handler releases the pods
    ENDED = 5

    @property
    def live(self) -> bool:
        return self <= Stage.RUNNING

    @property
    def reported(self) -> str | None:
        """The type of the last event the dispatcher published for an attempt at this stage."""
        return {Stage.DISPATCHED: "dispatched", Stage.RUNNING: "running"}.get(self)


STAGE_OF: dict[type[Event], Stage] = {
    OperationAdmitted: Stage.ADMITTED,
    OperationDispatched: Stage.DISPATCHED,
    OperationRunning: Stage.RUNNING,
    StopRequested: Stage.RELEASING,
    PreemptRequested: Stage.RELEASING,
    OperationRejected: Stage.ENDED,
    RetryScheduled: Stage.ENDED,  # the attempt is over (a handler gave up on it, or it failed): the retry is another
    **{end: Stage.ENDED for end in ATTEMPT_ENDS},
}


def folded_subjects(agent: str = "") -> list[str]:
    """What the table folds: the requests routed to its agent's dispatcher, and every op's own events."""
    kinds: list[type[Event]] = [*STAGE_OF, OperationTouched]  # touches: for culling
    own = {subjects.events_of(event_type(kind)) for kind in kinds if event_type(kind) not in subjects.ROUTED_KINDS}
    return sorted(own) + subjects.dispatcher_filters(agent)


@dataclass
class Attempt:
    """The latest attempt of one op."""

    op_id: str
    attempt: int
    stage: Stage
    admitted: OperationAdmitted | None = None  # while live: what its pods are built from
    running_at: datetime | None = None  # its first ``running``
    touched_at: datetime | None = None  # its last ``touched``

    @property
    def key(self) -> AttemptKey:
        return (self.op_id, self.attempt)

    @property
    def admitted_at(self) -> datetime | None:
        return self.admitted.at if self.admitted is not None else None


class Attempts:
    """The table: op id -> its latest attempt. Fed by ``apply`` (replay, then live)."""

    def __init__(self) -> None:
        self.latest: dict[str, Attempt] = {}

    def apply(self, event: Event) -> None:
        if isinstance(event, OperationTouched):
            self._touched(event)
            return
        stage = STAGE_OF.get(type(event))
        if stage is None:
            return
        current = self.latest.get(event.op_id)
        if current is None or event.attempt > current.attempt:
            if not isinstance(event, OperationAdmitted):
                if current is not None:  # a later attempt exists (a stop of a retry not admitted yet, another
                    current.stage, current.admitted = Stage.ENDED, None  # agent's): this one is over
                return  # an attempt not admitted to this dispatcher's agent (another agent's): not its to repair
            current = self.latest[event.op_id] = Attempt(event.op_id, event.attempt, stage)
        elif event.attempt < current.attempt:
            return  # an earlier attempt's late event
        current.stage = max(current.stage, stage)
        if isinstance(event, OperationRunning) and current.running_at is None:
            current.running_at = event.at
        if isinstance(event, OperationAdmitted) and current.stage.live:
            current.admitted = event
        if not current.stage.live:
            current.admitted = None  # nothing will be built from it again

    def _touched(self, event: OperationTouched) -> None:
        current = self.latest.get(event.op_id)
        if current is not None and current.attempt == event.attempt and current.stage.live:
            current.touched_at = max(filter(None, (current.touched_at, event.at)))

    def snapshot(self) -> list[Attempt]:
        """Every op's latest attempt (copies: the table moves on while a reconciler decides)."""
        return [Attempt(a.op_id, a.attempt, a.stage, a.admitted, a.running_at, a.touched_at)
                for a in self.latest.values()]

    def get(self, op_id: str) -> Attempt | None:
        return self.latest.get(op_id)

    def wanted(self, key: AttemptKey) -> bool:
        """False once the attempt was stopped, preempted or ended, or a later one exists."""
        current = self.latest.get(key[0])
        if current is None or current.attempt < key[1]:
            return True  # not folded yet: the event being handled is the news
        return current.attempt == key[1] and current.stage.live
