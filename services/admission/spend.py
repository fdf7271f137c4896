"""Actual spend per budget window, folded from ``cost_recorded`` (each finished attempt once), keyed
by (scope, name, window, window start) for scope "queue" and "project" and every calendar window."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from proto.events import CostRecorded
from proto.windows import WINDOWS, window_start

SpendKey = tuple[str, str, str, datetime]  # scope, name, window, start


@dataclass
class Spend:
    money: dict[SpendKey, float] = field(default_factory=dict)
    gpu_hours: dict[SpendKey, float] = field(default_factory=dict)
    seen: set[tuple[str, int]] = field(default_factory=set)

    def record(self, e: CostRecorded) -> bool:
        if (e.op_id, e.attempt) in self.seen:
            return False
        self.seen.add((e.op_id, e.attempt))
        scopes = [("queue", e.queue)] + ([("project", e.project)] if e.project else [])
        for scope, name in scopes:
            for window in WINDOWS:
                key = (scope, name, window, window_start(e.at, window))
                self.money[key] = self.money.get(key, 0.0) + e.amount
                self.gpu_hours[key] = self.gpu_hours.get(key, 0.0) + e.gpu_hours
        return True

    def of(self, scope: str, name: str, window: str, at: datetime) -> tuple[float, float]:
        """Money and GPU-hours spent in the window of ``window`` that holds ``at``."""
        key = (scope, name, window, window_start(at, window))
        return self.money.get(key, 0.0), self.gpu_hours.get(key, 0.0)
