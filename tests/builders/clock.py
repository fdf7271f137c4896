"""The fixed time tests run at: ``T0``, and ``t(seconds)`` after it; ``FakeClock``, a clock that moves only
when a test says so (the runtime's ``Clock`` interface)."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def t(seconds: float) -> datetime:
    """``seconds`` after ``T0``."""
    return T0 + timedelta(seconds=seconds)


class FakeClock:
    """A clock that moves only when told to. ``sleep`` returns once ``advance`` passes its deadline."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=timezone.utc)
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._now + timedelta(seconds=seconds), future))
        await future

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        due = [(t, f) for t, f in self._sleepers if t <= self._now]
        self._sleepers = [(t, f) for t, f in self._sleepers if t > self._now]
        for _, future in due:
            if not future.done():
                future.set_result(None)
