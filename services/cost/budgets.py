"""When a recorded cost brings a budget window's spend to or past a limit (money or GPU-hours), say
so once: ``budget_exceeded``, per budget, limit and window start. What was announced is folded from
the op stream (replayed on start), so a restart does not announce it again. Pure: spend comes from
the caller."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from opsched.proto.events import BudgetExceeded, CostRecorded
from opsched.proto.queues import Budget
from opsched.rules.windows import window_end, window_start

EPSILON = 1e-9
GPU_HOURS = "gpu_hours"
Announced = tuple[str, str, str, str, datetime]  # scope, name, window, unit, window start
Spent = Callable[[str, str, str, datetime], tuple[float, float]]  # (scope, name, window, at) -> (money, GPU-hours)


def key_of(e: BudgetExceeded) -> Announced:
    return e.scope, e.name, e.window, e.unit, e.window_start


@dataclass
class Announcements:
    seen: set[Announced] = field(default_factory=set)

    def fold(self, e: BudgetExceeded) -> None:
        self.seen.add(key_of(e))

    def crossed(self, budgets: list[Budget], record: CostRecorded, spent: Spent) -> list[BudgetExceeded]:
        """The limits of the budgets covering ``record`` that its window's spend (``record`` included)
        has reached and that were not announced yet."""
        out: list[BudgetExceeded] = []
        for b in budgets:
            if b.name != {"queue": record.queue, "project": record.project}.get(b.scope):  # a pool's: its nodes
                continue
            start = window_start(record.at, b.window)
            money, gpu_hours = spent(b.scope, b.name, b.window, record.at)
            for limit, used, unit in ((b.money, money, record.currency), (b.gpu_hours, gpu_hours, GPU_HOURS)):
                if limit is None or used + EPSILON < limit or (b.scope, b.name, b.window, unit, start) in self.seen:
                    continue
                out.append(BudgetExceeded(
                    op_id=record.op_id, at=record.at, attempt=record.attempt, scope=b.scope, name=b.name,
                    window=b.window, limit=limit, spent=round(used, 6), unit=unit, window_start=start,
                    resets_at=window_end(record.at, b.window)))
        return out
