"""When a recorded cost brings a budget window's spend to or past a limit (money or GPU-hours), say
so once: ``budget_exceeded``, per budget, limit and window start. What was announced is folded from
the op stream (replayed on start), so a restart does not announce it again. A pool's budget (``scope:
pool``: what its nodes cost) is also looked at on a tick (``crossed_pool``), its spend counting the nodes still
open: no new node should be started once the money is gone. Pure: spend and time come from the caller."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from opsched.proto.events import BudgetExceeded, CostRecorded, NodeCostRecorded
from opsched.proto.queues import Budget
from opsched.rules.spend_totals import scopes_of, token_of
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

    def crossed(self, budgets: list[Budget], record: CostRecorded | NodeCostRecorded, spent: Spent
                ) -> list[BudgetExceeded]:
        """The limits of the budgets covering ``record`` (an attempt's: its queue and project; a node's: its pool)
        that its window's spend (``record`` included) has reached and that were not announced yet."""
        covering = scopes_of(record)
        return [e for b in budgets if (b.scope, b.name) in covering
                for e in self._reached(b, record.op_id, record.attempt, record.at, record.currency, spent)]

    def crossed_pool(self, budgets: list[Budget], now: datetime, currency: str, spent: Spent
                     ) -> list[BudgetExceeded]:
        """The limits of the pool budgets that their window's spend at ``now`` (charged nodes and the open ones so
        far: ``spent``) has reached and that were not announced yet; ``op_id`` is the pool's token."""
        return [e for b in budgets if b.scope == "pool"
                for e in self._reached(b, token_of((b.scope, b.name)), 0, now, currency, spent)]

    def _reached(self, b: Budget, op_id: str, attempt: int, at: datetime, currency: str, spent: Spent
                 ) -> list[BudgetExceeded]:
        out: list[BudgetExceeded] = []
        start = window_start(at, b.window)
        money, gpu_hours = spent(b.scope, b.name, b.window, at)
        for limit, used, unit in ((b.money, money, currency), (b.gpu_hours, gpu_hours, GPU_HOURS)):
            if limit is None or used + EPSILON < limit or (b.scope, b.name, b.window, unit, start) in self.seen:
                continue
            out.append(BudgetExceeded(
                op_id=op_id, at=at, attempt=attempt, scope=b.scope, name=b.name, window=b.window, limit=limit,
                spent=round(used, 6), unit=unit, window_start=start, resets_at=window_end(at, b.window)))
        return out
