"""Actual spend per budget window (``rules.spend_totals``: folded from ``cost_recorded``, ``node_cost_recorded``
and ``spend_rolled``),
and what is held against budgets until it is charged.

An attempt that ran and ended is charged a moment later, by the cost service. Until its ``cost_recorded``
is folded, what it was expected to spend stays held against its budgets (``pending``: ``expect`` at its
end, settled by its charge, or dropped when its op leaves memory), so no cycle in between admits past a
budget on money that is spent but not yet recorded."""
from __future__ import annotations

from dataclasses import dataclass, field

from opsched.rules.spend_totals import Charge, SpendTotals

Held = dict[tuple[str, str], tuple[float, float]]  # (scope, name) -> (money, GPU-hours)


@dataclass
class Spend(SpendTotals):
    pending: dict[tuple[str, int], tuple[list[tuple[str, str]], float, float]] = field(default_factory=dict)

    def expect(self, op_id: str, attempt: int, scopes: list[tuple[str, str]], money: float, gpu_hours: float) -> None:
        """An attempt that ran has ended: hold what it was expected to spend until its charge is folded."""
        if (op_id, attempt) not in self.seen:
            self.pending[(op_id, attempt)] = (scopes, money, gpu_hours)

    def settle(self, op_id: str) -> None:
        """The op left memory: a charge of it that never came holds nothing any more."""
        for key in [k for k in self.pending if k[0] == op_id]:
            del self.pending[key]

    def held(self, committed: Held) -> Held:
        """``committed`` (what running ops are expected to spend) plus the charges on their way."""
        if not self.pending:
            return committed
        out = dict(committed)
        for scopes, money, gpu_hours in self.pending.values():
            for key in scopes:
                held_money, held_gpu = out.get(key, (0.0, 0.0))
                out[key] = (held_money + money, held_gpu + gpu_hours)
        return out

    def record(self, e: Charge, seq: int = 0) -> bool:
        recorded = super().record(e, seq)
        if recorded:
            self.pending.pop((e.op_id, e.attempt), None)
        return recorded
