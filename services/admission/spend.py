"""Actual spend per budget window, folded from ``cost_recorded`` (each finished attempt once), keyed
by (scope, name, window, window start) for scope "queue" and "project" and every calendar window.

Spend no window holds any more is forgotten (``forget_before``), and the ``cost_recorded`` events
that carried it may leave the op stream: they outlive their op's purge until then.

An attempt that ran and ended is charged a moment later, by the cost service. Until its ``cost_recorded``
is folded, what it was expected to spend stays held against its budgets (``pending``: ``expect`` at its
end, settled by its charge, or dropped when its op leaves memory), so no cycle in between admits past a
budget on money that is spent but not yet recorded."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from proto.events import CostRecorded
from proto.windows import WINDOWS, window_start

SpendKey = tuple[str, str, str, datetime]  # scope, name, window, start
Held = dict[tuple[str, str], tuple[float, float]]  # (scope, name) -> (money, GPU-hours)


@dataclass
class Spend:
    money: dict[SpendKey, float] = field(default_factory=dict)
    gpu_hours: dict[SpendKey, float] = field(default_factory=dict)
    seen: dict[tuple[str, int], datetime] = field(default_factory=dict)  # (op, attempt) -> charged at
    marks: list[tuple[int, datetime]] = field(default_factory=list)  # (stream sequence, at), in stream order
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

    def record(self, e: CostRecorded, seq: int = 0) -> bool:
        if (e.op_id, e.attempt) in self.seen:
            return False
        self.seen[(e.op_id, e.attempt)] = e.at
        self.pending.pop((e.op_id, e.attempt), None)
        if seq:
            self.marks.append((seq, e.at))
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

    def forget_before(self, now: datetime, consumed_seq: int) -> int | None:
        """Forget what was charged before the oldest window holding ``now`` began. Returns the stream
        sequence before which every ``cost_recorded`` is of such spend (and consumed by every service,
        ``consumed_seq``), so may be removed; None when there is nothing to remove."""
        boundary = min(window_start(now, w) for w in WINDOWS)
        for table in (self.money, self.gpu_hours):
            for key in [k for k in table if k[3] < boundary]:
                del table[key]
        for charged in [k for k, at in self.seen.items() if at < boundary]:
            del self.seen[charged]
        cut = 0
        while cut < len(self.marks) and self.marks[cut][1] < boundary and self.marks[cut][0] <= consumed_seq:
            cut += 1
        if cut == 0:
            return None
        keep_from = self.marks[cut - 1][0] + 1
        del self.marks[:cut]
        return keep_from
