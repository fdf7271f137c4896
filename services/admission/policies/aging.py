"""Aging against starvation: a waiting op's effective priority is
``priority + min(cap, per_minute * minutes waited)`` (base priority when aging is off). The queue that keeps
its waiting ops in this order is ``model.pending_queue.PendingQueue``."""
from __future__ import annotations

import math
from datetime import datetime


def effective(priority: int, submitted_at: datetime, now: datetime, per_minute: float,
              cap: float | None) -> float:
    cap = math.inf if cap is None else cap
    if per_minute <= 0:
        return float(priority)
    waited_min = max(0.0, (now - submitted_at).total_seconds() / 60.0)
    return priority + min(cap, per_minute * waited_min)
