"""Schedules: an operation template submitted again and again (Polyaxon's ``schedule`` section).

Kinds (Polyaxon's names): ``cron`` (a 5-field cron expression, UTC), ``interval`` (every
``frequencyS`` seconds from ``startAt``) and ``datetime`` (once, at ``startAt``). Every kind takes
``startAt``, ``endAt``, ``maxRuns`` and ``dependsOnPast``.

Commands go to ``proto.subjects.CMD_SCHEDULE_CREATE`` / ``CMD_SCHEDULE_DELETE`` (stream
``OPSCHED_CMD``). Schedule events are ``Event`` subclasses whose ``op_id`` is the *schedule's* id,
so the ordinary routing puts them on ``ops.schedule_<type>.<schedule_id>`` (stream ``OPSCHED_OPS``)
and ``proto.subjects.events_for(schedule_id)`` is a schedule's whole history. They are not part of
``proto.events.EVENTS`` (op views ignore them); decode them with ``proto.codec.decode_ops_stream``
(op events and schedule events).

Run number ``n`` (1, 2, ...) of schedule ``s`` is the operation ``run_op_id(s, n)`` = ``s-n``:
deterministic, so a run fired twice (a restart, two replicas) is one operation.
"""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from proto.events import Event
from proto.spec import OpSpec, Wire

ScheduleKind = Literal["cron", "interval", "datetime"]
SCHEDULE_KINDS: tuple[str, ...] = ("cron", "interval", "datetime")
MAX_SCHEDULE_ID = 40  # leaves room for "-<run>" within a 63-character subject token / DNS label


class ScheduleSpec(Wire, kw_only=True):
    """When to submit the template: Polyaxon's V1CronSchedule / V1IntervalSchedule / V1DateTimeSchedule.

    Times are UTC (naive times are taken as UTC). ``endAt`` is inclusive; after it no new run starts.
    ``dependsOnPast``: a run fires only once the previous run succeeded (see
    ``services.admission.schedules`` for the whole rule).
    """

    kind: ScheduleKind
    cron: str | None = None  # kind cron: "minute hour day-of-month month day-of-week", or @daily ...
    frequency_s: int | None = None  # kind interval: seconds between runs (> 0)
    start_at: datetime | None = None  # first run (interval, datetime); earliest run (cron)
    end_at: datetime | None = None
    max_runs: int | None = None
    depends_on_past: bool = False


def run_op_id(schedule_id: str, run: int) -> str:
    """The operation id of run ``run`` (1-based) of a schedule."""
    return f"{schedule_id}-{run}"


# --- commands -------------------------------------------------------------------------------------

class ScheduleCommand(Wire, tag_field="type", kw_only=True):
    schedule_id: str
    requested_at: datetime | None = None
    requested_by: str = ""


class CreateSchedule(ScheduleCommand, tag="create_schedule", kw_only=True):
    spec: ScheduleSpec
    op: OpSpec  # the template each run submits


class DeleteSchedule(ScheduleCommand, tag="delete_schedule", kw_only=True):
    """No new runs; runs already submitted go on (stop them one by one)."""


SCHEDULE_COMMANDS: tuple[type[ScheduleCommand], ...] = (CreateSchedule, DeleteSchedule)


# --- events ---------------------------------------------------------------------------------------

class ScheduleEvent(Event, kw_only=True):
    """A fact about a schedule. ``op_id`` holds the schedule id (it names the subject token)."""

    @property
    def schedule_id(self) -> str:
        return self.op_id


class ScheduleCreated(ScheduleEvent, tag="schedule_created", kw_only=True):
    spec: ScheduleSpec  # validated; times in UTC
    op: OpSpec
    requested_by: str = ""


class ScheduleFired(ScheduleEvent, tag="schedule_fired", kw_only=True):
    """Run ``run`` was submitted as operation ``run_op_id``, for the slot ``scheduled_for``."""

    run: int
    run_op_id: str
    scheduled_for: datetime


class ScheduleDeleted(ScheduleEvent, tag="schedule_deleted", kw_only=True):
    requested_by: str = ""


class ScheduleFinished(ScheduleEvent, tag="schedule_finished", kw_only=True):
    """No run will ever fire again."""

    reason: str  # "max_runs", "end_at", "completed" (a datetime schedule ran), "no_more_slots"
    message: str = ""
    runs: int = 0


SCHEDULE_EVENTS: tuple[type[ScheduleEvent], ...] = (
    ScheduleCreated, ScheduleFired, ScheduleDeleted, ScheduleFinished,
)
