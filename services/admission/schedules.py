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
  * One schedule never stops the others. If computing its runs raises (a bug: the contract's bounds
    keep every time it computes representable), it is disabled: ``ScheduleFinished`` with reason
    ``failed`` and the error. A stored ``schedule_created`` that the contract refuses now (it predates
    a bound) is disabled as ``invalid_spec`` with the refusal (``refuse_stored``); so is one whose spec
    admission would refuse. Disabled schedules fire nothing; the others go on.

``Schedules.apply`` is idempotent and monotonic (replay rebuilds the same state); ``due``,
``finished``, ``next_fire``, ``waiting`` and ``statuses`` (the `opsched schedules` query) only read. ``on_create``/``on_delete`` are the command
handlers; ``services.admission.schedule_runner`` fires the runs on the bus.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

import msgspec

from opsched.bus.errors import InvalidInput
from opsched.proto import subjects
from opsched.proto.events import Event
from opsched.proto.queries import ScheduleRun, SchedulesAnswer, ScheduleStatus
from opsched.proto.reasons import Refusal, ScheduleEnd
from opsched.proto.schedules import (
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
from opsched.proto.spec import OpSpec
from opsched.rules import cron
from opsched.services.admission.model.records import Status

StatusOf = Callable[[str], "str | None"]  # op id -> "succeeded" | "failed" | "running" | None
FAILED = ScheduleEnd.FAILED  # ScheduleFinished.reason of a schedule disabled because computing its runs raised
INVALID_SPEC = Refusal.INVALID_SPEC  # ... of one whose stored spec is refused (the contract's bounds, admission's rules)
T = TypeVar("T")
RECENT_RUNS = 5  # runs fired each schedule keeps for `opsched schedules` (bounded)


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
    disabled: tuple[str, str] | None = None  # (reason, message): fires nothing more, to be published finished
    recent: list[ScheduleFired] = field(default_factory=list)  # its last RECENT_RUNS runs fired, oldest first
    _next: tuple[int, datetime | None] | None = field(default=None, repr=False, compare=False)

    @property
    def active(self) -> bool:
        return not self.deleted and self.finished is None and self.disabled is None

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
        self.refused: dict[str, str | None] = {}  # stored creations the contract refuses: id -> why (None: published)

    def __contains__(self, schedule_id: str) -> bool:
        """Whether the id is taken (a refused stored creation takes it too)."""
        return schedule_id in self.records or schedule_id in self.refused

    def get(self, schedule_id: str) -> Record | None:
        return self.records.get(schedule_id)

    def apply(self, event: Event) -> bool:
        """Fold one event (any event: those that are not about schedules are ignored)."""
        if isinstance(event, ScheduleCreated):
            return self._created(event)
        if isinstance(event, ScheduleFinished) and self.refused.get(event.op_id) is not None:
            self.refused[event.op_id] = None
            return True
        record = self.records.get(event.op_id) if isinstance(event, ScheduleEvent) else None
        if record is None:
            return False
        if isinstance(event, ScheduleFired):
            if event.run <= record.runs:
                return False
            record.runs, record.last_slot, record.last_op_id = event.run, cron.utc(event.scheduled_for), event.run_op_id
            record.recent = [*record.recent, event][-RECENT_RUNS:]
            return True
        if isinstance(event, ScheduleDeleted):
            changed, record.deleted = not record.deleted, True
            return changed
        if isinstance(event, ScheduleFinished):
            changed = record.finished is None
            record.finished = record.finished or event.reason
            return changed
        return False

    def refuse_stored(self, schedule_id: str, why: str) -> bool:
        """Fold a stored ``schedule_created`` that no longer decodes (``proto.schedules.refused_creation``):
        the schedule is disabled (``invalid_spec``, ``why``) unless the id already has a schedule."""
        if schedule_id in self:
            return False
        self.refused[schedule_id] = f"the stored schedule is refused by the contract: {why}"
        return True

    def _created(self, event: ScheduleCreated) -> bool:
        if event.op_id in self:
            return False  # the first creation wins; ids are single-use
        try:
            spec = normalized(event.spec)
            problems = spec_problems(spec)
            parsed = cron.parse(spec.cron) if spec.kind == "cron" and spec.cron and not problems else None
        except Exception as exc:  # noqa: BLE001 - a fold never raises: the schedule is disabled instead
            spec, problems, parsed = event.spec, [f"{type(exc).__name__}: {exc}"], None
        record = Record(event.op_id, spec, event.op, cron.utc(event.at), parsed)
        if problems:  # not from on_create, which refuses them: never fires
            record.disabled = (INVALID_SPEC, "; ".join(problems))
        self.records[event.op_id] = record
        return True

    def _guarded(self, record: Record, decide: Callable[[Record, datetime], T], now: datetime) -> T | None:
        """``decide(record, now)``; if it raises, the record is disabled (reason ``failed``) and this is
        None: one schedule's failure never stops the others. Deterministic: a replay fails the same way."""
        if not record.active:
            return None
        try:
            return decide(record, now)
        except Exception as exc:  # noqa: BLE001 - a bug, or a stored spec whose times cannot be computed
            record.disabled = (FAILED, f"its next run could not be computed ({type(exc).__name__}: {exc}); "
                                       "it is disabled")
            return None

    # --- decisions ------------------------------------------------------------------------------

    def due(self, now: datetime) -> list[ScheduleFired]:
        """The runs to fire now: at most one per schedule, in (slot, schedule id) order."""
        now = cron.utc(now)
        fired = []
        for record in self.records.values():
            slot = self._guarded(record, self._slot_due, now)
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
        """Schedules that will never fire again and are not yet marked finished (disabled ones too)."""
        now = cron.utc(now)
        out = [ScheduleFinished(op_id=sid, at=now, reason=INVALID_SPEC, message=why)
               for sid, why in self.refused.items() if why is not None]
        for record in self.records.values():
            reason = self._guarded(record, _finish_reason, now)
            if record.disabled is not None and not record.deleted and record.finished is None:
                reason, message = record.disabled
                out.append(ScheduleFinished(op_id=record.schedule_id, at=now, reason=reason, message=message,
                                            runs=record.runs))
            elif reason is not None:
                out.append(ScheduleFinished(op_id=record.schedule_id, at=now, reason=reason,
                                            message=_finish_message(record, reason), runs=record.runs))
        return sorted(out, key=lambda e: e.op_id)

    def next_fire(self, now: datetime) -> datetime | None:
        """When ``due`` next returns something, as far as the clock alone decides (schedules held by
        ``dependsOnPast`` wait for an op, not for a time, and are left out). May be <= ``now``."""
        now = cron.utc(now)
        times = [c for r in self.records.values() if (c := self._guarded(r, self._unheld_candidate, now)) is not None]
        return min(times, default=None)

    def _unheld_candidate(self, record: Record, now: datetime) -> datetime | None:
        candidate = self._open_candidate(record, now)
        return candidate if candidate is not None and self._held(record) is None else None

    def waiting(self, now: datetime) -> dict[str, tuple[str, str]]:
        """Schedules with a slot due that ``dependsOnPast`` holds: id -> (previous op id, its status)."""
        now = cron.utc(now)
        out = {}
        for record in self.records.values():
            held = self._guarded(record, self._held_now, now)
            if held is not None:
                out[record.schedule_id] = (record.last_op_id or "", held)
        return out

    def _held_now(self, record: Record, now: datetime) -> str | None:
        candidate = self._open_candidate(record, now)
        return self._held(record) if candidate is not None and candidate <= now else None


    def statuses(self, now: datetime, status_label: Callable[[str], str], ids: list[str] | None = None,
                 ) -> SchedulesAnswer:
        """Each schedule (``ids``: only those) as `opsched schedules` shows it: its state (active, waiting,
        finished, deleted, disabled), next and last runs; ``status_label`` gives a run op's status ("": unknown)."""
        now = cron.utc(now)
        out = [self._status(r, now, status_label) for sid, r in sorted(self.records.items()) if not ids or sid in ids]
        out += [ScheduleStatus(schedule_id=sid, state="disabled", reason=INVALID_SPEC, message=why or "")
                for sid, why in sorted(self.refused.items()) if not ids or sid in ids]
        return SchedulesAnswer(schedules=out)

    def _status(self, record: Record, now: datetime, status_label: Callable[[str], str]) -> ScheduleStatus:
        spec = record.spec
        state, reason, message, waiting_for = "active", "", "", ""
        finish = self._guarded(record, _finish_reason, now)
        if record.deleted:
            state = "deleted"
        elif record.disabled is not None:
            state, reason, message = "disabled", record.disabled[0], record.disabled[1]
        elif record.finished is not None or finish is not None:
            state, reason = "finished", record.finished or finish or ""
            message = _finish_message(record, reason)
        elif self._guarded(record, self._held_now, now) is not None:
            state, waiting_for = "waiting", record.last_op_id or ""
            message = f"dependsOnPast: waits for {waiting_for} to succeed ({self._held(record)})"
        next_at = self._guarded(record, self._unheld_candidate, now) if state == "active" else None
        return ScheduleStatus(
            schedule_id=record.schedule_id, state=state, name=record.op.name or "", kind=spec.kind, cron=spec.cron,
            frequency_s=spec.frequency_s, start_at=spec.start_at, end_at=spec.end_at, max_runs=spec.max_runs,
            depends_on_past=spec.depends_on_past, reason=reason, message=message, runs=record.runs,
            created_at=record.created_at, next_run_at=next_at,
            last_run_at=record.recent[-1].at if record.recent else None,
            last_runs=[ScheduleRun(run=f.run, run_op_id=f.run_op_id, scheduled_for=f.scheduled_for, fired_at=f.at,
                                   status=status_label(f.run_op_id)) for f in record.recent],
            waiting_for=waiting_for)


def _finish_reason(record: Record, now: datetime) -> str | None:
    spec = record.spec
    if spec.max_runs is not None and record.runs >= spec.max_runs:
        return ScheduleEnd.MAX_RUNS
    if spec.kind == "datetime" and record.runs >= 1:
        return ScheduleEnd.COMPLETED
    candidate = record.candidate()
    if candidate is None:
        return ScheduleEnd.NO_MORE_SLOTS
    if spec.end_at is not None and (now > spec.end_at or candidate > spec.end_at):
        return ScheduleEnd.END_AT
    return None


def _finish_message(record: Record, reason: str) -> str:
    spec = record.spec
    messages: dict[str, str] = {
        ScheduleEnd.MAX_RUNS: f"{record.runs} runs fired (maxRuns {spec.max_runs})",
        ScheduleEnd.COMPLETED: f"the run at {spec.start_at} fired",
        ScheduleEnd.NO_MORE_SLOTS: f"cron {spec.cron!r} has no slot left",
        ScheduleEnd.END_AT: f"no slot left before endAt {spec.end_at} ({record.runs} runs fired)",
    }
    return messages.get(reason, reason)


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
        raise InvalidInput(Refusal.INVALID_SCHEDULE, f"schedule {sid}: " + "; ".join(problems), op_id=sid)
    if not cmd.op.name:
        raise InvalidInput(Refusal.INVALID_SCHEDULE, f"schedule {sid}: the operation template has no name", op_id=sid)
    spec = normalized(cmd.spec)
    if schedules is not None and sid in schedules:
        known = schedules.get(sid)
        if known is not None and known.spec == spec and known.op == cmd.op and known.active:
            return None
        raise InvalidInput(Refusal.SCHEDULE_EXISTS, f"schedule id {sid!r} is taken (a schedule id is used once, "
                                              "even after it is deleted); choose another id", op_id=sid)
    return ScheduleCreated(op_id=sid, at=now, spec=spec, op=cmd.op, requested_by=cmd.requested_by)


def on_delete(cmd: DeleteSchedule, now: datetime, schedules: Schedules) -> ScheduleDeleted | None:
    record = schedules.get(cmd.schedule_id)
    if record is None:
        raise InvalidInput(Refusal.UNKNOWN_SCHEDULE, f"no such schedule {cmd.schedule_id!r}",
                           op_id=cmd.schedule_id if subjects.valid_token(cmd.schedule_id) else None)
    if record.deleted:
        return None
    return ScheduleDeleted(op_id=record.schedule_id, at=now, requested_by=cmd.requested_by)


def _check_id(sid: str) -> None:
    if not subjects.valid_token(sid) or len(sid) > MAX_SCHEDULE_ID:
        raise InvalidInput(Refusal.INVALID_SCHEDULE_ID, f"schedule id {sid!r} must be lowercase letters, digits and "
                                                  f"dashes, at most {MAX_SCHEDULE_ID} characters")


def spec_problems(spec: ScheduleSpec) -> list[str]:
    """Everything wrong with a schedule spec beyond the contract's bounds (which every ``ScheduleSpec``
    meets: ``proto.schedules.bound_problems``), in its wire field names (empty: valid)."""
    if spec.kind not in SCHEDULE_KINDS:
        return [f"kind {spec.kind!r} is not one of {', '.join(SCHEDULE_KINDS)}"]
    problems = []
    if spec.kind == "cron":
        try:
            cron.parse(spec.cron or "")
        except cron.CronError as exc:
            problems.append(f"cron: {exc}")
    elif spec.cron is not None:
        problems.append(f"cron: only a cron schedule takes a cron expression, not kind {spec.kind}")
    if spec.kind == "interval" and spec.frequency_s is None:
        problems.append("frequencyS: an interval schedule needs the seconds between runs")
    elif spec.kind != "interval" and spec.frequency_s is not None:
        problems.append(f"frequencyS: only an interval schedule takes a frequency, not kind {spec.kind}")
    if spec.kind == "datetime" and spec.start_at is None:
        problems.append("startAt: a datetime schedule needs the time to run at")
    if spec.start_at and spec.end_at and cron.utc(spec.end_at) < cron.utc(spec.start_at):
        problems.append(f"endAt: {spec.end_at} is before startAt {spec.start_at}")
    return problems


def normalized(spec: ScheduleSpec) -> ScheduleSpec:
    """Times in UTC (naive ones are taken as UTC)."""
    return msgspec.structs.replace(spec, start_at=spec.start_at and cron.utc(spec.start_at),
                                   end_at=spec.end_at and cron.utc(spec.end_at))
