"""Per-queue concurrency: at most ``concurrency`` ops admitted and not yet finished."""
from __future__ import annotations


def free_slots(concurrency: int, active: int) -> int:
    return max(0, concurrency - active)
