"""Calendar UTC windows of budgets: a day starts at 00:00, a week on Monday 00:00, a month on the 1st.

Shared by admission (enforcing budgets) and cost (reporting spend), so both agree on the windows."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

WINDOWS = ("day", "week", "month")


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)


def window_start(at: datetime, window: str) -> datetime:
    """The start of the ``window`` ("day", "week" or "month") that holds ``at``."""
    day = _utc(at).replace(hour=0, minute=0, second=0, microsecond=0)
    if window == "day":
        return day
    if window == "week":
        return day - timedelta(days=day.weekday())
    if window == "month":
        return day.replace(day=1)
    raise ValueError(f"unknown budget window {window!r}")


def window_end(at: datetime, window: str) -> datetime:
    """When the window holding ``at`` resets (the start of the next one)."""
    start = window_start(at, window)
    if window == "day":
        return start + timedelta(days=1)
    if window == "week":
        return start + timedelta(days=7)
    return (start + timedelta(days=32)).replace(day=1)
