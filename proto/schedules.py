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

Bounds (``MIN_FREQUENCY_S`` ... below) are part of the contract: checked on decode (``msgspec.Meta``)
and on construction (``ScheduleSpec.__post_init__``), so every computation a schedule needs stays
representable (no year 9999 overflow) and no schedule is a busy loop. ``bound_problems`` says, per
field, what is out of bounds; the polyaxonfile edge uses the same per-field checks.

Run number ``n`` (1, 2, ...) of schedule ``s`` is the operation ``run_op_id(s, n)`` = ``s-n``:
deterministic, so a run fired twice (a restart, two replicas) is one operation.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Literal

import msgspec

from opsched.proto.events import Event
from opsched.proto.spec import OpSpec, Wire
from opsched.proto.subjects import valid_token


def utc(t: datetime) -> datetime:
    """Naive times are UTC; aware ones are converted (how a schedule's times are read, and cron evaluated)."""
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


ScheduleKind = Literal["cron", "interval", "datetime"]
SCHEDULE_KINDS: tuple[str, ...] = ("cron", "interval", "datetime")
MAX_SCHEDULE_ID = 40  # leaves room for "-<run>" within a 63-character subject token / DNS label

# ---- the bounds of a schedule -------------------------------------------------------------------
MIN_FREQUENCY_S = 60  # runs at least a minute apart: a schedule is not a busy loop (cron's grain is a minute too)
MAX_FREQUENCY_S = 10 * 365 * 24 * 3600  # ten years
MAX_RUNS = 1_000_000  # maxRuns (a run a minute for almost two years); without maxRuns a schedule has no limit
MAX_CRON_CHARS = 200
EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=timezone.utc)  # startAt, endAt
LATEST_TIME = datetime(2199, 12, 31, 23, 59, 59, tzinfo=timezone.utc)  # far below year 9999: every slot
# computed from a time in range (+ an interval, + cron's 10-year search) stays representable

Frequency = Annotated[int, msgspec.Meta(ge=MIN_FREQUENCY_S, le=MAX_FREQUENCY_S)]
MaxRuns = Annotated[int, msgspec.Meta(ge=1, le=MAX_RUNS)]
CronText = Annotated[str, msgspec.Meta(max_length=MAX_CRON_CHARS)]


class ScheduleSpec(Wire, kw_only=True):
    """When to submit the template: Polyaxon's V1CronSchedule / V1IntervalSchedule / V1DateTimeSchedule.

    Times are UTC (naive times are taken as UTC). ``endAt`` is inclusive; after it no new run starts.
    ``dependsOnPast``: a run fires only once the previous run succeeded (see
    ``services.admission.schedules`` for the whole rule).
    """

    kind: ScheduleKind
    cron: CronText | None = None  # kind cron: "minute hour day-of-month month day-of-week", or @daily ...
    frequency_s: Frequency | None = None  # kind interval: seconds between runs
    start_at: datetime | None = None  # first run (interval, datetime); earliest run (cron)
    end_at: datetime | None = None
    max_runs: MaxRuns | None = None
    depends_on_past: bool = False

    def __post_init__(self) -> None:
        """The bounds on construction too (decode checks them first; a ValueError here is a
        ``msgspec.ValidationError`` on decode)."""
        problems = bound_problems(self)
        if problems:
            raise ValueError("; ".join(problems))


def frequency_problem(seconds: int) -> str | None:
    if MIN_FREQUENCY_S <= seconds <= MAX_FREQUENCY_S:
        return None
    return (f"{seconds} s is out of bounds: from {MIN_FREQUENCY_S} s (a minute: a schedule is not a busy loop) "
            f"to {MAX_FREQUENCY_S} s (ten years)")


def max_runs_problem(runs: int) -> str | None:
    return None if 1 <= runs <= MAX_RUNS else f"{runs} is out of bounds: from 1 to {MAX_RUNS}"


def time_problem(when: datetime) -> str | None:
    if EARLIEST_TIME <= utc(when) <= LATEST_TIME:
        return None
    return (f"{when.isoformat()} is out of bounds: from {EARLIEST_TIME:%Y-%m-%dT%H:%M:%SZ} "
            f"to {LATEST_TIME:%Y-%m-%dT%H:%M:%SZ}")


def cron_length_problem(expr: str) -> str | None:
    return None if len(expr) <= MAX_CRON_CHARS else f"{len(expr)} characters; at most {MAX_CRON_CHARS}"


def bound_problems(spec: ScheduleSpec) -> list[str]:
    """Every field of ``spec`` out of the contract's bounds, each named as on the wire (empty: within)."""
    found = [("cron", spec.cron is not None and cron_length_problem(spec.cron)),
             ("frequencyS", spec.frequency_s is not None and frequency_problem(spec.frequency_s)),
             ("startAt", spec.start_at is not None and time_problem(spec.start_at)),
             ("endAt", spec.end_at is not None and time_problem(spec.end_at)),
             ("maxRuns", spec.max_runs is not None and max_runs_problem(spec.max_runs))]
    return [f"{name}: {problem}" for name, problem in found if problem]


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

    reason: str  # "max_runs", "end_at", "completed" (a datetime schedule ran), "no_more_slots", or
    # disabled: "invalid_spec" (a stored schedule the contract now refuses) or "failed" (its next run could
    # not be computed); ``message`` then says why
    message: str = ""
    runs: int = 0


SCHEDULE_EVENTS: tuple[type[ScheduleEvent], ...] = (
    ScheduleCreated, ScheduleFired, ScheduleDeleted, ScheduleFinished,
)


class _Head(msgspec.Struct, rename="camel"):
    """The type and id of any message on the op stream (not a wire message: a reader's view)."""

    type: str = ""
    op_id: str = ""


def refused_creation(data: bytes) -> str | None:
    """The schedule id of a stored ``schedule_created`` that no longer decodes (it predates a bound of
    the contract), so its reader can disable the schedule with a reason; None for anything else."""
    try:
        head = msgspec.json.decode(data, type=_Head)
    except Exception:  # noqa: BLE001 - not one, however it fails (too deep, not UTF-8, ...)
        return None
    if head.type != ScheduleCreated.__struct_config__.tag or not valid_token(head.op_id):
        return None
    return head.op_id
