"""Spend per budget window, the one rule admission's budgets and cost's view share: every ``cost_recorded``
(each finished attempt once) adds its money and GPU-hours to (scope, name, window, window start), for its
queue and its project, in every calendar window; every ``node_cost_recorded`` (each node once) to its pool's.

A ``spend_rolled`` carries one scope's totals through a stream sequence. Admission's retention publishes
them (``rollups``) before the charges they cover leave the op stream with their ops; a fold takes one
(``roll``) as that scope's base and keeps on top only the charges it folded after that sequence, and skips
any charge at or before it. So a replay of a stream whose older charges are gone counts what a fold of the
whole stream counts, and every replica folding the same messages holds the same totals (sums in stream
order). Pure: time and sequences come from the caller."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from opsched.proto.events import CostRecorded, NodeCostRecorded, SpendRolled, WindowSpend
from opsched.rules.windows import WINDOWS, window_start

Scope = tuple[str, str]  # ("queue" | "project" | "pool", name)
Charge = CostRecorded | NodeCostRecorded  # an attempt's charge (its queue, its project), a node's (its pool)
SpendKey = tuple[str, str, str, datetime]  # scope, name, window, start
Amounts = dict[tuple[str, datetime], tuple[float, float]]  # (window, start) -> (money, GPU-hours)


def token_of(scope: Scope) -> str:
    """The subject token (and ``op_id``) of a scope's ``spend_rolled``: names may hold any character."""
    return f"{scope[0]}-{hashlib.sha256(scope[1].encode()).hexdigest()[:20]}"


def scopes_of(e: Charge) -> list[Scope]:
    """The budget scopes a charge counts in: an attempt's queue and project; a node's pool (never a queue or a
    project: what the node ran is charged to their ops already), none for a node of no pool."""
    if isinstance(e, NodeCostRecorded):
        return [("pool", e.pool)] if e.pool else []
    return [("queue", e.queue)] + ([("project", e.project)] if e.project else [])


@dataclass
class SpendTotals:
    money: dict[SpendKey, float] = field(default_factory=dict)
    gpu_hours: dict[SpendKey, float] = field(default_factory=dict)
    seen: dict[tuple[str, int], datetime] = field(default_factory=dict)  # (op, attempt) -> charged at
    marks: list[tuple[int, datetime]] = field(default_factory=list)  # (stream sequence, at), in stream order
    base: dict[Scope, Amounts] = field(default_factory=dict)  # each scope's last rollup
    rolled_through: dict[Scope, int] = field(default_factory=dict)  # ... and the sequence it counts through
    unrolled: list[tuple[int, Charge]] = field(default_factory=list)  # folded after it, in stream order

    def record(self, e: Charge, seq: int = 0) -> bool:
        """Fold a charge (once per op and attempt; a node's: once per node token). Returns True when it was new."""
        if (e.op_id, e.attempt) in self.seen:
            return False
        self.seen[(e.op_id, e.attempt)] = e.at
        if seq:
            self.marks.append((seq, e.at))
        fresh = [s for s in scopes_of(e) if not seq or seq > self.rolled_through.get(s, 0)]
        for scope in fresh:
            self._add(scope, e.at, e.amount, e.gpu_hours)
        if seq and fresh:
            self.unrolled.append((seq, e))
        return True

    def roll(self, r: SpendRolled) -> None:
        """Take a rollup: the scope's base, and what was folded after its sequence on top."""
        scope: Scope = (r.scope, r.name)
        if r.through_seq < self.rolled_through.get(scope, 0):
            return  # an older one (replayed before its successor was purged)
        self.base[scope] = {(w.window, w.start): (w.money, w.gpu_hours) for w in r.windows}
        self.rolled_through[scope] = r.through_seq
        for table in (self.money, self.gpu_hours):
            for key in [k for k in table if (k[0], k[1]) == scope]:
                del table[key]
        for (window, start), (money, gpu) in self.base[scope].items():
            self.money[(*scope, window, start)] = money
            self.gpu_hours[(*scope, window, start)] = gpu
        for seq, e in self.unrolled:
            if seq > r.through_seq and scope in scopes_of(e):
                self._add(scope, e.at, e.amount, e.gpu_hours)
        self.unrolled = [(seq, e) for seq, e in self.unrolled
                         if any(seq > self.rolled_through.get(s, 0) for s in scopes_of(e))]

    def rollups(self, through_seq: int, at: datetime) -> list[SpendRolled]:
        """For every scope with charges folded after its last rollup and at or before ``through_seq``, its
        totals through ``through_seq`` (its base plus those charges), to publish."""
        out: dict[Scope, Amounts] = {}
        for seq, e in self.unrolled:
            if seq > through_seq:
                break
            for scope in scopes_of(e):
                if seq > self.rolled_through.get(scope, 0):
                    amounts = out.setdefault(scope, dict(self.base.get(scope, {})))
                    for window in WINDOWS:
                        key = (window, window_start(e.at, window))
                        money, gpu = amounts.get(key, (0.0, 0.0))
                        amounts[key] = (money + e.amount, gpu + e.gpu_hours)
        return [SpendRolled(op_id=token_of(scope), at=at, scope=scope[0], name=scope[1], through_seq=through_seq,
                            windows=[WindowSpend(window=w, start=start, money=m, gpu_hours=g)
                                     for (w, start), (m, g) in sorted(amounts.items())])
                for scope, amounts in sorted(out.items())]

    def of(self, scope: str, name: str, window: str, at: datetime) -> tuple[float, float]:
        """Money and GPU-hours spent in the window of ``window`` that holds ``at``."""
        key = (scope, name, window, window_start(at, window))
        return self.money.get(key, 0.0), self.gpu_hours.get(key, 0.0)

    def scopes(self) -> set[Scope]:
        return {(k[0], k[1]) for k in self.money}

    def forget_before(self, now: datetime, consumed_seq: int) -> int | None:
        """Forget what was charged before the oldest window holding ``now`` began. Returns the stream
        sequence before which every ``cost_recorded`` is of such spend (and consumed by every service,
        ``consumed_seq``), so may be removed; None when there is nothing to remove."""
        boundary = min(window_start(now, w) for w in WINDOWS)
        for table in (self.money, self.gpu_hours):
            for key in [k for k in table if k[3] < boundary]:
                del table[key]
        for amounts in self.base.values():
            for window_key in [k for k in amounts if k[1] < boundary]:
                del amounts[window_key]
        for charged in [k for k, at in self.seen.items() if at < boundary]:
            del self.seen[charged]
        self.unrolled = [(seq, e) for seq, e in self.unrolled if e.at >= boundary]
        cut = 0
        while cut < len(self.marks) and self.marks[cut][1] < boundary and self.marks[cut][0] <= consumed_seq:
            cut += 1
        if cut == 0:
            return None
        keep_from = self.marks[cut - 1][0] + 1
        del self.marks[:cut]
        return keep_from

    def _add(self, scope: Scope, at: datetime, money: float, gpu_hours: float) -> None:
        for window in WINDOWS:
            key = (*scope, window, window_start(at, window))
            self.money[key] = self.money.get(key, 0.0) + money
            self.gpu_hours[key] = self.gpu_hours.get(key, 0.0) + gpu_hours
