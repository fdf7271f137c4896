"""Total order inside a queue: higher priority first, then earlier submission, then op id."""
from __future__ import annotations

from datetime import datetime


def sort_key(priority: int, submitted_at: datetime, op_id: str) -> tuple:
    return (-priority, submitted_at, op_id)
