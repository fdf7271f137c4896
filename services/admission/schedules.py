"""Schedules: fold schedule events, and decide from the injected clock which runs are due.

Rules (each decision is a pure function of the folded events, ``now`` and ``status_of``):
  * Slots. ``cron``: every matching minute (UTC) at or after ``startAt`` (default: when the schedule
    was created). ``interval``: ``startAt + k * frequencyS`` for k = 0, 1, ... (default start: the
    creation time, so the first run fires at once). ``datetime``: ``startAt`` only.
  * A run fires when a slot after the last fired slot has come. If several have come (the service
    was down, or ``dependsOnPast`` held the schedule), it fires ONCE, for the latest of them
    (``scheduled_for``); the older ones are skipped, never fired in a burst.
  * ``maxRuns`` counts fired runs. ``endAt`` is inclusive; once ``now`` is past it nothing fires,
    even a slot missed before it.
  * ``dependsOnPast``: run n+1 fires only when run n succeeded (``status_of`` says "succeeded").
    While run n is unknown or still going (None, "running"), the schedule waits. If run n failed
    ("failed"), the schedule is held: no later run fires until run n succeeds after all (e.g.
    ``opsched resume`` of the failed op) or the schedule is deleted. Nothing is fired to catch up
    then either: one run, for the latest slot. A held schedule is not finished (``waiting``).
  * ``ScheduleFinished`` is due once no run can ever fire again: ``maxRuns`` reached, ``endAt``
    passed or before the next slot, a ``datetime`` schedule that ran, or a cron with no slot left.
  * Run n is the op ``<schedule_id>-<n>``. The runner submits it BEFORE it publishes
    ``ScheduleFired``: if it dies between the two, the replayed state fires run n again, which is
    the same op id (admission ignores the duplicate submit), so no run is lost and none doubles.

``Schedules.apply`` is idempotent and monotonic (replay rebuilds the same state); ``due``,
``finished``, ``next_fire`` and ``waiting`` only read. ``on_create``/``on_delete`` are the command
handlers; ``run_schedules`` is the loop that fires runs on the bus.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import msgspec

from proto import codec, cron, subjects
from proto.commands import SubmitOperation
from proto.events import Event
from proto.schedules import (
    MAX_SCHEDULE_ID,
    SCHEDULE_KINDS,
    CreateSchedule,
    DeleteSchedule,
    ScheduleCreated,
    ScheduleDeleted,
    ScheduleEvent,
    ScheduleFinished,
    ScheduleFired,
    ScheduleSpec,
    run_op_id,
)
from proto.spec import OpSpec
from services.admission.records import Status
from services.runtime.errors import InvalidInput

StatusOf = Callable[[str], "str | None"]  # op id -> "succeeded" | "failed" | "running" | None
Submit = Callable[[str, OpSpec], Awaitable[Any]]
MAX_STEP_S = 1.0


@dataclass
class Record:
    schedule_id: str
    spec: ScheduleSpec
    op: OpSpec
    created_at: datetime
    cron: cron.Cron | None
    runs: int = 0
    last_slot: datetime | None = None
    last_op_id: str | None = None
    deleted: bool = False
    finished: str | None = None  # the reason, once finished
    _next: tuple[int, datetime | None] | None = field(default=None, repr=False, compare=False)

    @property
    def active(self) -> bool:
        return not self.deleted and self.finished is None

    @property
    def start(self) -> datetime:
        return self.spec.start_at or self.created_at

    def candidate(self) -> datetime | None:
        """The first slot after the last fired one (None: no slot left); computed once per run."""
        if self._next is None or self._next[0] != self.runs:
            self._next = (self.runs, self._candidate())
        return self._next[1]

    def _candidate(self) -> datetime | None:
        if self.runs == 0:
            if self.cron is not None:
                return self.cron.first_at_or_after(self.start)
            return self.start
        assert self.last_slot is not None
        if self.spec.kind == "interval":
            return self.last_slot + timedelta(seconds=self.spec.frequency_s or 0)
        if self.cron is not None:
            return self.cron.next_after(self.last_slot)
        return None  # datetime: one slot only

    def latest_slot(self, now: datetime) -> datetime:
        """The latest slot at or before ``now`` (call only when ``candidate() <= now``)."""
        if self.spec.kind == "interval":
            step = timedelta(seconds=self.spec.frequency_s or 1)
            return self.start + ((now - self.start) // step) * step
        if self.cron is not None:
            return self.cron.at_or_before(now) or self.start
        return self.start


class Schedules:
    """Every schedule, folded from its events; decisions from ``now`` and the runs' outcomes."""

    def __init__(self, status_of: StatusOf = lambda op_id: None) -> None:
        self.status_of = status_of
        self.records: dict[str, Record] = {}

    def __contains__(self, schedule_id: str) -> bool:
        return schedule_id in self.records

    def get(self, schedule_id: str) -> Record | None:
        return self.records.get(schedule_id)

    def apply(self, event: Event) -> bool:
        """Fold one event (any event: those that are not about schedules are ignored)."""
        if isinstance(event, ScheduleCreated):
            return self._created(event)
        record = self.records.get(event.op_id) if isinstance(event, ScheduleEvent) else None
        if record is None:
            return False
        if isinstance(event, ScheduleFired):
            if event.run <= record.runs:
                return False
            record.runs, record.last_slot, record.last_op_id = event.run, cron.utc(event.scheduled_for), event.run_op_id
            return True
        if isinstance(event, ScheduleDeleted):
            changed, record.deleted = not record.deleted, True
            return changed
        if isinstance(event, ScheduleFinished):
            changed = record.finished is None
            record.finished = record.finished or event.reason
            return changed
        return False

    def _created(self, event: ScheduleCreated) -> bool:
        if event.op_id in self.records:
            return False  # the first creation wins; ids are single-use
        spec, problems = event.spec, spec_problems(event.spec)
        parsed = cron.parse(spec.cron) if spec.kind == "cron" and spec.cron and not problems else None
        record = Record(event.op_id, spec, event.op, cron.utc(event.at), parsed)
        record.finished = "invalid_spec" if problems else None  # not from on_create: never fires
        self.records[event.op_id] = record
        return True

    # --- decisions ------------------------------------------------------------------------------

    def due(self, now: datetime) -> list[ScheduleFired]:
        """The runs to fire now: at most one per schedule, in (slot, schedule id) order."""
        now = cron.utc(now)
        fired = []
        for record in self.records.values():
            slot = self._slot_due(record, now)
            if slot is not None:
                run = record.runs + 1
                fired.append(ScheduleFired(op_id=record.schedule_id, at=now, run=run,
                                           run_op_id=run_op_id(record.schedule_id, run), scheduled_for=slot))
        return sorted(fired, key=lambda e: (e.scheduled_for, e.op_id))

    def _slot_due(self, record: Record, now: datetime) -> datetime | None:
        candidate = self._open_candidate(record, now)
        if candidate is None or candidate > now or self._held(record) is not None:
            return None
        return record.latest_slot(now)

    def _open_candidate(self, record: Record, now: datetime) -> datetime | None:
        """The next slot, if the schedule may still fire (active, runs and time left)."""
        if not record.active or _finish_reason(record, now) is not None:
            return None
        return record.candidate()

    def _held(self, record: Record) -> str | None:
        """Why ``dependsOnPast`` holds the next run (the previous run's status), else None."""
        if not record.spec.depends_on_past or record.last_op_id is None:
            return None
        status = self.status_of(record.last_op_id)
        return None if status == "succeeded" else (status or "unknown")

    def finished(self, now: datetime) -> list[ScheduleFinished]:
        """Schedules that will never fire again and are not yet marked finished."""
        now = cron.utc(now)
        out = []
        for record in self.records.values():
            reason = _finish_reason(record, now) if record.active else None
            if reason is not None:
                out.append(ScheduleFinished(op_id=record.schedule_id, at=now, reason=reason,
                                            message=_finish_message(record, reason), runs=record.runs))
        return sorted(out, key=lambda e: e.op_id)

    def next_fire(self, now: datetime) -> datetime | None:
        """When ``due`` next returns something, as far as the clock alone decides (schedules held by
        ``dependsOnPast`` wait for an op, not for a time, and are left out). May be <= ``now``."""
        now = cron.utc(now)
        times = [c for r in self.records.values()
                 if (c := self._open_candidate(r, now)) is not None and self._held(r) is None]
        return min(times, default=None)

    def waiting(self, now: datetime) -> dict[str, tuple[str, str]]:
        """Schedules with a slot due that ``dependsOnPast`` holds: id -> (previous op id, its status)."""
        now = cron.utc(now)
        out = {}
        for record in self.records.values():
            candidate = self._open_candidate(record, now)
            held = self._held(record) if candidate is not None and candidate <= now else None
            if held is not None:
                out[record.schedule_id] = (record.last_op_id or "", held)
        return out


def _finish_reason(record: Record, now: datetime) -> str | None:
    spec = record.spec
    if spec.max_runs is not None and record.runs >= spec.max_runs:
        return "max_runs"
    if spec.kind == "datetime" and record.runs >= 1:
        return "completed"
    candidate = record.candidate()
    if candidate is None:
        return "no_more_slots"
    if spec.end_at is not None and (now > spec.end_at or candidate > spec.end_at):
        return "end_at"
    return None


def _finish_message(record: Record, reason: str) -> str:
    spec = record.spec
    return {
        "max_runs": f"{record.runs} runs fired (maxRuns {spec.max_runs})",
        "completed": f"the run at {spec.start_at} fired",
        "no_more_slots": f"cron {spec.cron!r} has no slot left",
        "end_at": f"no slot left before endAt {spec.end_at} ({record.runs} runs fired)",
    }.get(reason, reason)


def run_status(status: Status | None) -> str | None:
    """What ``dependsOnPast`` needs to know of admission's status of a run's op.

    Succeeded (a cache hit too) and skipped (its conditions were false) let the next run fire;
    failed, timed out, rejected and stopped hold the schedule; anything else is still going."""
    if status is None:
        return None
    if status in (Status.SUCCEEDED, Status.SKIPPED):
        return "succeeded"
    if status.terminal:
        return "failed"
    return "running"


# --- command handlers ---------------------------------------------------------------------------

def on_create(cmd: CreateSchedule, now: datetime, schedules: Schedules | None = None) -> ScheduleCreated | None:
    """Validate a ``CreateSchedule``; the same command again is a no-op, another one with a used id
    is refused (ids are single-use: the run op ids derive from them)."""
    sid = cmd.schedule_id
    _check_id(sid)
    problems = spec_problems(cmd.spec)
    if problems:
        raise InvalidInput("invalid_schedule", f"schedule {sid}: " + "; ".join(problems), op_id=sid)
    if not cmd.op.name:
        raise InvalidInput("invalid_schedule", f"schedule {sid}: the operation template has no name", op_id=sid)
    spec = normalized(cmd.spec)
    known = schedules.get(sid) if schedules is not None else None
    if known is not None:
        if known.spec == spec and known.op == cmd.op and known.active:
            return None
        raise InvalidInput("schedule_exists", f"schedule id {sid!r} is taken (a schedule id is used once, "
                                              "even after it is deleted); choose another id", op_id=sid)
    return ScheduleCreated(op_id=sid, at=now, spec=spec, op=cmd.op, requested_by=cmd.requested_by)


def on_delete(cmd: DeleteSchedule, now: datetime, schedules: Schedules) -> ScheduleDeleted | None:
    record = schedules.get(cmd.schedule_id)
    if record is None:
        raise InvalidInput("unknown_schedule", f"no such schedule {cmd.schedule_id!r}",
                           op_id=cmd.schedule_id if subjects.valid_token(cmd.schedule_id) else None)
    if record.deleted:
        return None
    return ScheduleDeleted(op_id=record.schedule_id, at=now, requested_by=cmd.requested_by)


def _check_id(sid: str) -> None:
    if not subjects.valid_token(sid) or len(sid) > MAX_SCHEDULE_ID:
        raise InvalidInput("invalid_schedule_id", f"schedule id {sid!r} must be lowercase letters, digits and "
                                                  f"dashes, at most {MAX_SCHEDULE_ID} characters")


def spec_problems(spec: ScheduleSpec) -> list[str]:
    """Everything wrong with a schedule spec, in Polyaxon's field names (empty: valid)."""
    if spec.kind not in SCHEDULE_KINDS:
        return [f"kind {spec.kind!r} is not one of {', '.join(SCHEDULE_KINDS)}"]
    problems = []
    if spec.kind == "cron":
        try:
            cron.parse(spec.cron or "")
        except cron.CronError as exc:
            problems.append(f"cron: {exc}")
    if spec.kind == "interval" and (spec.frequency_s is None or spec.frequency_s <= 0):
        problems.append(f"frequency: must be a number of seconds above 0, got {spec.frequency_s}")
    if spec.kind == "datetime" and spec.start_at is None:
        problems.append("startAt: a datetime schedule needs the time to run at")
    if spec.start_at and spec.end_at and cron.utc(spec.end_at) < cron.utc(spec.start_at):
        problems.append(f"endAt: {spec.end_at} is before startAt {spec.start_at}")
    if spec.max_runs is not None and spec.max_runs < 1:
        problems.append(f"maxRuns: must be at least 1, got {spec.max_runs}")
    return problems


def normalized(spec: ScheduleSpec) -> ScheduleSpec:
    """Times in UTC (naive ones are taken as UTC)."""
    return msgspec.structs.replace(spec, start_at=spec.start_at and cron.utc(spec.start_at),
                                   end_at=spec.end_at and cron.utc(spec.end_at))


# --- the runner ---------------------------------------------------------------------------------

def submitter(bus: Any, clock: Any, requested_by: str = "schedule") -> Submit:
    """A ``submit`` for ``run_schedules``: publish ``SubmitOperation`` (msg id ``<op_id>.submit.0``)."""
    async def submit(op_id: str, spec: OpSpec) -> None:
        await bus.publish(SubmitOperation(op_id=op_id, spec=spec, requested_at=clock.now(),
                                          requested_by=requested_by))
    return submit


async def fire_due(bus: Any, clock: Any, schedules: Schedules, submit: Submit) -> list[ScheduleEvent]:
    """One pass: submit and record every due run, then record finished schedules. Returns the events."""
    now = clock.now()
    published: list[ScheduleEvent] = []
    for fired in schedules.due(now):
        record = schedules.records[fired.op_id]
        await submit(fired.run_op_id, record.op)  # first: a run recorded as fired has been submitted
        await bus.publish(fired, msg_id=subjects.schedule_fired_msg_id(fired.op_id, fired.run))
        schedules.apply(fired)
        published.append(fired)
    for done in schedules.finished(now):
        await bus.publish(done)
        schedules.apply(done)
        published.append(done)
    return published


async def run_schedules(bus: Any, clock: Any, schedules: Schedules, submit: Submit, stop: asyncio.Event,
                        log: Any = None) -> None:
    """Fire runs until ``stop`` is set. Sleeps on ``clock`` until the next slot, at most ``MAX_STEP_S``
    at a time, so schedules created (folded into ``schedules`` by the caller) are noticed."""
    held: dict[str, tuple[str, str]] = {}
    while not stop.is_set():
        delay = MAX_STEP_S
        try:
            for event in await fire_due(bus, clock, schedules, submit):
                _log(log, codec.type_of(event), event)
            now = clock.now()
            held = _log_held(log, held, schedules.waiting(now))
            nxt = schedules.next_fire(now)
            if nxt is not None:
                delay = min(MAX_STEP_S, (nxt - now).total_seconds())
        except Exception as exc:
            if log is not None:
                log.warning("schedules_publish_failed", error=repr(exc))
        if delay > 0:
            await _sleep(clock, delay, stop)
        else:
            await asyncio.sleep(0)


async def _sleep(clock: Any, seconds: float, stop: asyncio.Event) -> None:
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, stopper):
            task.cancel()


def _log(log: Any, kind: str, event: ScheduleEvent) -> None:
    if log is None:
        return
    extra = ({"run": event.run, "op_id": event.run_op_id, "scheduled_for": event.scheduled_for.isoformat()}
             if isinstance(event, ScheduleFired) else {"reason": getattr(event, "reason", "")})
    log.info(kind, schedule_id=event.op_id, **extra)


def _log_held(log: Any, before: dict[str, tuple[str, str]], now: dict[str, tuple[str, str]]):
    if log is not None:
        for sid, (op_id, status) in now.items():
            if before.get(sid) != (op_id, status):
                log.info("schedule_waiting_on_previous_run", schedule_id=sid, op_id=op_id, status=status)
    return now
