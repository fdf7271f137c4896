"""Polyaxon's date ranges (``daterange`` and ``datetimerange``, the swept params of its backfills), and how a
date reaches a trial's params.

  * ``daterange: [start, stop, step]`` (or ``{start, stop, step}``; no ``"a:b:c"`` string): the dates from
    start, every ``step`` days (a whole number >= 1), up to and excluding stop — numpy's ``arange`` over
    dates, as Polyaxon computes them. start and stop: a date ``YYYY-MM-DD`` (YAML's date or a string; a
    datetime at 00:00 without a UTC offset counts as its date).
  * ``datetimerange``: the same over datetimes, ``step`` a whole number of seconds >= 1. start and stop:
    ISO 8601 ``YYYY-MM-DD[(T| )HH:MM[:SS[.ffffff]][Z|±HH:MM]]`` (YAML's timestamp too), both with a UTC
    offset or both without; with one, they are converted to UTC and passed without it, as Polyaxon does
    (numpy keeps no time zone).
  * start must be before stop, and the range makes at most the caller's bound of values.
  * A value reaches the trial's params as Polyaxon passes it, an ISO string: ``2024-01-31``,
    ``2024-01-31T06:00:00`` (fractions of a second only when there are some). ``iso`` turns a date or
    datetime YAML read elsewhere in a matrix (a mapping's values) into the same strings.
"""
from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})?)?$")
_UNITS = {"daterange": "days", "datetimerange": "seconds"}


def iso(value: Any) -> Any:
    """``value`` with every date and datetime in it (nested in lists and mappings too) as its ISO string."""
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return [iso(v) for v in value]
    if isinstance(value, dict):
        return {k: iso(v) for k, v in value.items()}
    return value


def _datetime(raw: Any, key: str, what: str = "datetime") -> datetime:
    if isinstance(raw, datetime):
        return raw
    if isinstance(raw, date):
        return datetime(raw.year, raw.month, raw.day)
    if isinstance(raw, str) and _DATETIME.match(raw):
        try:
            return datetime.fromisoformat(raw)
        except ValueError as exc:
            raise ValueError(f"{key} {raw!r} is not a valid {what}: {exc}") from None
    raise ValueError(f"{key} must be an ISO 8601 datetime ('2024-01-31 06:00', '2024-01-31T06:00:00+02:00'), "
                     f"got {raw!r}")


def _date(raw: Any, key: str) -> date:
    if isinstance(raw, date) and not isinstance(raw, datetime):
        return raw
    if isinstance(raw, datetime) or (isinstance(raw, str) and _DATETIME.match(raw)):
        at = _datetime(raw, key, "date")
        if at.tzinfo is None and at.time() == time():
            return at.date()
    raise ValueError(f"{key} must be a date 'YYYY-MM-DD', got {raw!r}")


def _step(raw: Any, unit: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw != int(raw) or raw < 1:
        raise ValueError(f"step must be a whole number of {unit} >= 1, got {raw!r}")
    return int(raw)


def _utc(at: datetime) -> datetime:
    return at if at.tzinfo is None else at.astimezone(timezone.utc).replace(tzinfo=None)


def date_range(fields: dict[str, Any], kind: str, most: int) -> list[str]:
    """The values of a ``daterange``/``datetimerange`` given as ``{start, stop, step}`` (as written), ISO
    strings; raises ``ValueError`` saying what is wrong."""
    unit = _UNITS[kind]
    step = timedelta(**{unit: _step(fields["step"], unit)})
    if kind == "daterange":
        start: date = _date(fields["start"], "start")
        stop: date = _date(fields["stop"], "stop")
    else:
        begin, end = _datetime(fields["start"], "start"), _datetime(fields["stop"], "stop")
        if (begin.tzinfo is None) != (end.tzinfo is None):
            raise ValueError("start and stop must both have a UTC offset or neither have one")
        start, stop = _utc(begin), _utc(end)
    if start >= stop:
        raise ValueError(f"stop must be after start, got start={start.isoformat()}, stop={stop.isoformat()}")
    whole, rest = divmod(stop - start, step)
    count = whole + (1 if rest else 0)
    if count > most:
        raise ValueError(f"generates {count} values; at most {most}")
    return [(start + i * step).isoformat() for i in range(count)]
