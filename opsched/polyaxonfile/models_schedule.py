"""Models of Polyaxon's ``schedule`` section (V1CronSchedule, V1IntervalSchedule, V1DateTimeSchedule).

``schedule`` reads the section with them; what it accepts is documented there.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.polyaxonfile.fields import Int, Model
from opsched.proto.schedules import (
    ScheduleSpec,
    cron_length_problem,
    frequency_problem,
    max_runs_problem,
    time_problem,
)
from opsched.rules.cron import CronError
from opsched.rules.cron import parse as parse_cron


def _checked(problem_of: Callable[[Any], str | None]) -> AfterValidator:
    """A validator raising the contract's problem with a value (``proto.schedules``), if any."""
    def check(value: Any) -> Any:
        problem = problem_of(value)
        if problem is not None:
            raise ValueError(problem)
        return value
    return AfterValidator(check)


When = Annotated[datetime, _checked(time_problem)]  # within the contract's bounds


class _ScheduleModel(Model):
    """Polyaxon's V1CronSchedule / V1IntervalSchedule / V1DateTimeSchedule (times without a zone are UTC)."""

    start_at: When | None = None
    end_at: When | None = None
    max_runs: Annotated[Int, _checked(max_runs_problem)] | None = None
    depends_on_past: bool | None = None

    def check(self, loc: Loc) -> list[Problem]:
        if self.start_at and self.end_at and _utc(self.end_at) < _utc(self.start_at):
            return [(loc + ("endAt",), f"endAt {self.end_at.isoformat()} is before startAt "
                                       f"{self.start_at.isoformat()}")]
        return []

    def to_spec(self) -> ScheduleSpec:
        return ScheduleSpec(kind=self.kind, cron=getattr(self, "cron", None),  # type: ignore[attr-defined]
                            frequency_s=getattr(self, "frequency", None),
                            start_at=self.start_at and _utc(self.start_at), end_at=self.end_at and _utc(self.end_at),
                            max_runs=self.max_runs, depends_on_past=bool(self.depends_on_past))


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _cron_problem(value: str) -> str | None:
    try:
        parse_cron(value)
    except CronError as exc:
        return str(exc)
    return None


class CronScheduleModel(_ScheduleModel):
    kind: Literal["cron"]
    cron: Annotated[str, _checked(cron_length_problem), _checked(_cron_problem)]


class IntervalScheduleModel(_ScheduleModel):
    kind: Literal["interval"]
    frequency: Annotated[Int, _checked(frequency_problem)]  # seconds


class DateTimeScheduleModel(_ScheduleModel):
    kind: Literal["datetime"]
    start_at: When  # type: ignore[assignment]  # required: the time to run at


SCHEDULE_MODELS: dict[str, type[_ScheduleModel]] = {
    "cron": CronScheduleModel, "interval": IntervalScheduleModel, "datetime": DateTimeScheduleModel,
}


def schedule_kind_problem(raw: Any, loc: Loc) -> Problem | None:
    """The shape and ``kind`` of a raw ``schedule`` section, checked before its model validates it."""
    if not isinstance(raw, dict):
        return loc, f"expected a mapping, got {type(raw).__name__}"
    kind = raw.get("kind")
    if kind in SCHEDULE_MODELS:
        return None
    what = ("missing 'kind'" if kind is None else f"kind {kind!r} is not supported yet" if kind == "repeatable"
            else f"kind {kind!r} is unknown")
    return loc + ("kind",), f"{what}; expected 'cron', 'interval' or 'datetime'"
