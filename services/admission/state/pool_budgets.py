"""Node pools whose budget is spent (``Budget.scope`` "pool"): the cost service announces it (``budget_exceeded``
with scope "pool", on the op stream admission folds), and the pool adds no new node until the window resets
(``rules.node_pools.reach``). Rebuilt from the stream on replay; admission never sums node spend itself."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from opsched.proto.events import BudgetExceeded

SCOPE = "pool"


@dataclass
class PoolBudgets:
    blocked: dict[str, BudgetExceeded] = field(default_factory=dict)  # pool -> its spent window resetting last

    def fold(self, e: BudgetExceeded) -> bool:
        """Take a pool's announcement. True when it blocks the pool longer than known."""
        known = self.blocked.get(e.name)
        if e.scope != SCOPE or (known is not None and e.resets_at <= known.resets_at):
            return False
        self.blocked[e.name] = e
        return True

    def spent(self, pool: str, now: datetime | None) -> BudgetExceeded | None:
        """The announcement that stops the pool adding nodes at ``now`` (its ``resets_at`` not reached); None when
        it may add them."""
        e = self.blocked.get(pool)
        return e if e is not None and now is not None and now < e.resets_at else None
