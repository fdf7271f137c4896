"""What has been spent, for `opsched cost`: folded from the op stream (``submitted``, ``running``,
``cost_recorded`` and ``spend_rolled``: the totals per budget window are ``rules.spend_totals``, the rule
admission's budgets use), rebuilt by replay on start. The burn rate reads the charges of the last hour
(and the attempts running). Pure: time comes from the caller."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from opsched.proto.events import (
    CostRecorded,
    Event,
    NodeCostRecorded,
    OperationRunning,
    OperationSubmitted,
    SpendRolled,
)
from opsched.proto.queries import BudgetLine, CostAnswer, PoolSpend, PoolSpendLine, SpendLine
from opsched.proto.queues import Budget
from opsched.rules.spend_totals import SpendTotals
from opsched.rules.windows import WINDOWS, window_end, window_start
from opsched.services.cost.node_meter import NodeSpend

HOUR = timedelta(hours=1)
Spent = Callable[[str, str, str, datetime], tuple[float, float]]  # (scope, name, window, at) -> money, GPU-hours
PoolKey = tuple[str, str, str, datetime]  # pool, agent, window, window start


@dataclass
class Running:
    hourly: float
    since: datetime


@dataclass
class SpendView:
    currency: str = "USD"
    hourly: dict[str, float] = field(default_factory=dict)  # op -> price per hour
    running: dict[tuple[str, int], Running] = field(default_factory=dict)
    totals: SpendTotals = field(default_factory=SpendTotals)
    recent: dict[tuple[str, int], CostRecorded] = field(default_factory=dict)  # charges, for the burn rate
    pools: dict[PoolKey, PoolSpend] = field(default_factory=dict)  # the charged nodes' spend, by use

    def fold(self, e: Event, hourly_of=None, seq: int = 0) -> None:
        if isinstance(e, OperationSubmitted) and hourly_of is not None:
            self.hourly.setdefault(e.op_id, hourly_of(e.spec))
        elif isinstance(e, OperationRunning):
            self.running.setdefault((e.op_id, e.attempt), Running(self.hourly.get(e.op_id, 0.0), e.at))
        elif isinstance(e, CostRecorded):
            if self.totals.record(e, seq):
                self.recent[(e.op_id, e.attempt)] = e
            self.running.pop((e.op_id, e.attempt), None)
        elif isinstance(e, NodeCostRecorded):
            if self.totals.record(e, seq):
                for window in WINDOWS:
                    key = (e.pool, e.agent, window, window_start(e.at, window))
                    self.pools[key] = _plus(self.pools.get(key, PoolSpend()), e.amount, e.busy, e.stranded,
                                            e.idle, e.seconds / 3600.0)
        elif isinstance(e, SpendRolled):
            self.totals.roll(e)

    def charged(self, op_id: str, attempt: int) -> bool:
        return (op_id, attempt) in self.totals.seen

    def spent(self, scope: str, name: str, window: str, at: datetime) -> tuple[float, float]:
        """Money and GPU-hours of ``scope``/``name`` charged in the window of ``window`` holding ``at``."""
        money, gpu = self.totals.of(scope, name, window, at)
        return round(money, 6), round(gpu, 6)

    def burn_rate(self, now: datetime) -> float:
        """Spend of the last hour (finished attempts pro rata, running ones so far), per hour."""
        since = now - HOUR
        for key in [k for k, r in self.recent.items() if r.at < since]:
            del self.recent[key]  # ended before the hour: counts no more
        total = 0.0
        for r in self.recent.values():
            started = r.started_at or r.at
            length = (r.at - started).total_seconds()
            if length > 0:
                total += r.amount * _overlap(started, r.at, since, now) / length
            elif since <= r.at <= now:
                total += r.amount
        for run in self.running.values():
            total += run.hourly * _overlap(run.since, now, since, now) / 3600.0
        return round(total, 6)

    def answer(self, budgets: list[Budget], now: datetime, open_nodes: Sequence[NodeSpend] = (),
               spent: Spent | None = None) -> CostAnswer:
        """``spent``: a budget's spend in its window (None: the charges folded; the cost service's also counts a
        pool's open nodes so far, as its pool budgets do)."""
        self.totals.forget_before(now, 0)
        names = self.totals.scopes() | {(b.scope, b.name) for b in budgets}
        spend = [self._line(scope, name, now) for scope, name in sorted(names)]
        return CostAnswer(at=now, currency=self.currency, burn_rate_per_hour=self.burn_rate(now), spend=spend,
                          budgets=[self.budget_line(b, now, spent) for b in budgets],
                          pools=self.pool_lines(now, open_nodes))

    def pool_lines(self, now: datetime, open_nodes: Sequence[NodeSpend] = ()) -> list[PoolSpendLine]:
        """Each pool's nodes' spend per window: the charged nodes' of the window holding ``now``, plus the open
        nodes' so far (``open_nodes``, all counted in the current windows)."""
        boundary = min(window_start(now, w) for w in WINDOWS)
        for key in [k for k in self.pools if k[3] < boundary]:
            del self.pools[key]
        names = {(k[0], k[1]) for k in self.pools} | {(n.pool, n.agent) for n in open_nodes}
        out: list[PoolSpendLine] = []
        for pool, agent in sorted(names):
            here = [n for n in open_nodes if (n.pool, n.agent) == (pool, agent)]
            windows: dict[str, PoolSpend] = {}
            for window in WINDOWS:
                spend = self.pools.get((pool, agent, window, window_start(now, window)), PoolSpend())
                for n in here:
                    spend = _plus(spend, n.amount, n.busy, n.stranded, n.idle, n.seconds / 3600.0)
                windows[window] = spend
            out.append(PoolSpendLine(pool=pool, agent=agent, nodes=len(here), day=windows["day"],
                                     week=windows["week"], month=windows["month"]))
        return out

    def _line(self, scope: str, name: str, now: datetime) -> SpendLine:
        out = {w: self.spent(scope, name, w, now) for w in WINDOWS}
        return SpendLine(scope=scope, name=name, day=out["day"][0], week=out["week"][0], month=out["month"][0],
                         gpu_hours_day=out["day"][1], gpu_hours_week=out["week"][1],
                         gpu_hours_month=out["month"][1])

    def budget_line(self, b: Budget, now: datetime, spent: Spent | None = None) -> BudgetLine:
        money, gpu = (spent or self.spent)(b.scope, b.name, b.window, now)
        return BudgetLine(scope=b.scope, name=b.name, window=b.window, money=b.money, gpu_hours=b.gpu_hours,
                          spent_money=money, spent_gpu_hours=gpu,
                          remaining_money=None if b.money is None else round(max(0.0, b.money - money), 6),
                          remaining_gpu_hours=None if b.gpu_hours is None else round(max(0.0, b.gpu_hours - gpu), 6),
                          resets_at=window_end(now, b.window))


def _plus(s: PoolSpend, money: float, busy: float, stranded: float, idle: float, node_hours: float) -> PoolSpend:
    return PoolSpend(money=round(s.money + money, 6), busy=round(s.busy + busy, 6),
                     stranded=round(s.stranded + stranded, 6), idle=round(s.idle + idle, 6),
                     node_hours=round(s.node_hours + node_hours, 6))


def _overlap(a0: datetime, a1: datetime, b0: datetime, b1: datetime) -> float:
    return max(0.0, (min(a1, b1) - max(a0, b0)).total_seconds())
