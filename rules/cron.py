"""Five-field cron expressions (``minute hour day-of-month month day-of-week``), evaluated in UTC.

Each field is a comma list of ``*``, ``N``, ``A-B``, ``*/S``, ``A-B/S`` or ``A/S`` (``A`` to the
field's maximum, every ``S``). Months and weekdays may be named (``jan``..``dec``, ``sun``..``sat``,
any case); weekday 0 and 7 are Sunday. Macros: ``@yearly`` (``@annually``), ``@monthly``,
``@weekly``, ``@daily`` (``@midnight``), ``@hourly``.

Day-of-month and day-of-week combine as in Vixie cron: when both fields are restricted (neither
starts with ``*``), a day matches if EITHER matches (``0 0 1 * mon``: the 1st and every Monday);
otherwise both must match. No seconds field, no ``L``/``W``/``#``/``?``.

Pure and deterministic: ``next_after`` and ``at_or_before`` search at most ``HORIZON_YEARS``.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta

from opsched.proto.schedules import utc  # naive times are UTC: how the contract reads a schedule's times

HORIZON_YEARS = 10  # long enough for Feb 29 across a century year (2096 -> 2104)
MINUTE = timedelta(minutes=1)

_MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}
_MONTHS = {n: i for i, n in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_WEEKDAYS = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# name, low, high, names
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day-of-month", 1, 31, {}),
           ("month", 1, 12, _MONTHS), ("day-of-week", 0, 7, _WEEKDAYS))


class CronError(ValueError):
    """An invalid cron expression; the message names the field and the problem."""


@dataclass(frozen=True)
class Cron:
    expr: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    dom_star: bool
    dow_star: bool

    def matches(self, t: datetime) -> bool:
        t = utc(t)
        return (t.second == 0 and t.microsecond == 0 and t.minute in self.minutes and t.hour in self.hours
                and self._day_ok(t))

    def _day_ok(self, t: datetime) -> bool:
        if t.month not in self.months:
            return False
        dom = t.day in self.days
        dow = (t.weekday() + 1) % 7 in self.weekdays
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def next_after(self, t: datetime) -> datetime | None:
        """The first matching minute strictly after ``t``; None if none within the horizon."""
        t = _floor(utc(t)) + MINUTE
        limit = t.year + HORIZON_YEARS
        while t.year <= limit:
            if not self._day_ok(t):
                t = _next_day(t) if t.month in self.months else _next_month(t)
                continue
            i = bisect.bisect_left(self.hours, t.hour)
            if i == len(self.hours):
                t = _next_day(t)
                continue
            if self.hours[i] != t.hour:
                t = t.replace(hour=self.hours[i], minute=0)
            j = bisect.bisect_left(self.minutes, t.minute)
            if j == len(self.minutes):
                t = t.replace(minute=0) + timedelta(hours=1)
                continue
            return t.replace(minute=self.minutes[j])
        return None

    def at_or_before(self, t: datetime) -> datetime | None:
        """The last matching minute at or before ``t``; None if none within the horizon."""
        t = _floor(utc(t))
        limit = t.year - HORIZON_YEARS
        while t.year >= limit:
            if not self._day_ok(t):
                t = _day_start(t) - MINUTE if t.month in self.months else t.replace(day=1, hour=0, minute=0) - MINUTE
                continue
            i = bisect.bisect_right(self.hours, t.hour) - 1
            if i < 0:
                t = _day_start(t) - MINUTE
                continue
            if self.hours[i] != t.hour:
                t = t.replace(hour=self.hours[i], minute=59)
            j = bisect.bisect_right(self.minutes, t.minute) - 1
            if j < 0:
                t = t.replace(minute=0) - MINUTE
                continue
            return t.replace(minute=self.minutes[j])
        return None

    def first_at_or_after(self, t: datetime) -> datetime | None:
        t = utc(t)
        return t if self.matches(t) else self.next_after(t)


def parse(expr: str) -> Cron:
    """Parse a cron expression; raise ``CronError`` saying which field is wrong and why."""
    if not isinstance(expr, str) or not expr.strip():
        raise CronError("empty cron expression; expected 5 fields: minute hour day-of-month month day-of-week")
    text = expr.strip()
    if text.startswith("@"):
        if text.lower() not in _MACROS:
            raise CronError(f"unknown cron macro {text!r}; known: {', '.join(sorted(_MACROS))}")
        text = _MACROS[text.lower()]
    parts = text.split()
    if len(parts) == 6:
        raise CronError(f"cron expression {expr!r} has 6 fields: a seconds field is not supported (a schedule "
                        "fires at most once a minute); expected 5: minute hour day-of-month month day-of-week")
    if len(parts) != 5:
        raise CronError(f"cron expression {expr!r} has {len(parts)} fields; expected 5: "
                        "minute hour day-of-month month day-of-week")
    values = [_field(part, *spec) for part, spec in zip(parts, _FIELDS)]
    weekdays = frozenset(0 if d == 7 else d for d in values[4])
    cron = Cron(expr.strip(), tuple(sorted(values[0])), tuple(sorted(values[1])), frozenset(values[2]),
                frozenset(values[3]), weekdays, parts[2].startswith("*"), parts[4].startswith("*"))
    if cron.dow_star and not _some_month_has_a_day(cron):
        raise CronError(f"cron expression {expr!r} never fires: no month in it has those days")
    return cron


def _field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        if not item:
            raise CronError(f"{name} field {text!r}: empty list item")
        out |= _item(item, text, name, low, high, names)
    return out


def _item(item: str, text: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    where = f"{name} field {text!r}"
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not step_text.isdigit() or int(step_text) == 0:
            raise CronError(f"{where}: step {step_text!r} must be a whole number of at least 1")
        step = int(step_text)
    if base == "*":
        first, last = low, high
    elif "-" in base:
        a, _, b = base.partition("-")
        first, last = _value(a, where, low, high, names), _value(b, where, low, high, names)
        if first > last:
            raise CronError(f"{where}: range {base!r} runs backwards ({first} > {last})")
    else:
        first = _value(base, where, low, high, names)
        last = high if slash else first
    return set(range(first, last + 1, step))


def _value(text: str, where: str, low: int, high: int, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        hint = f" or a name ({', '.join(names)})" if names else ""
        raise CronError(f"{where}: {text!r} is not a number{hint}")
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"{where}: {value} is out of range {low}-{high}")
    return value


_DAYS_IN_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


def _some_month_has_a_day(cron: Cron) -> bool:
    return any(day <= _DAYS_IN_MONTH[month] for month in cron.months for day in cron.days)


def _floor(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0)


def _day_start(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def _next_day(t: datetime) -> datetime:
    return _day_start(t) + timedelta(days=1)


def _next_month(t: datetime) -> datetime:
    year, month = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    return t.replace(year=year, month=month, day=1, hour=0, minute=0, second=0, microsecond=0)
