"""The fixed time tests run at: ``T0``, and ``t(seconds)`` after it."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def t(seconds: float) -> datetime:
    """``seconds`` after ``T0``."""
    return T0 + timedelta(seconds=seconds)
