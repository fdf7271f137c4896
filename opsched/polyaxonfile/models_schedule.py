"""Models of Polyaxon's ``schedule`` section (V1CronSchedule, V1IntervalSchedule, V1DateTimeSchedule).

``schedule`` reads the section with them; what it accepts is documented there.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.polyaxonfile.fields import Int, Model
from proto.cron import CronError
from proto.cron import parse as parse_cron
from proto.schedules import ScheduleSpec


class _ScheduleModel(Model):
    """Polyaxon's V1CronSchedule / V1IntervalSchedule / V1DateTimeSchedule (times without a zone are UTC)."""

    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: Annotated[Int, Field(ge=1)] | None = None
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


def _cron(value: str) -> str:
    try:
        parse_cron(value)
    except CronError as exc:
        raise ValueError(str(exc)) from None
    return value


class CronScheduleModel(_ScheduleModel):
    kind: Literal["cron"]
    cron: Annotated[str, AfterValidator(_cron)]


def _frequency(value: int) -> int:
    if value <= 0:
        raise ValueError(f"frequency must be a number of seconds above 0, got {value}")
    return value


class IntervalScheduleModel(_ScheduleModel):
    kind: Literal["interval"]
    frequency: Annotated[Int, AfterValidator(_frequency)]  # seconds


class DateTimeScheduleModel(_ScheduleModel):
    kind: Literal["datetime"]
    start_at: datetime  # type: ignore[assignment]  # required: the time to run at


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
