"""What has been spent, for `opsched cost`: folded from the op stream (``submitted``, ``running``,
attempt ends and ``cost_recorded``), rebuilt by replay on start. Pure: time comes from the caller."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from proto.events import CostRecorded, Event, OperationRunning, OperationSubmitted
from proto.queries import BudgetLine, CostAnswer, SpendLine
from proto.queues import Budget
from proto.windows import WINDOWS, window_end, window_start

HOUR = timedelta(hours=1)


@dataclass
class Running:
    hourly: float
    since: datetime


@dataclass
class SpendView:
    currency: str = "USD"
    hourly: dict[str, float] = field(default_factory=dict)  # op -> price per hour
    running: dict[tuple[str, int], Running] = field(default_factory=dict)
    records: dict[tuple[str, int], CostRecorded] = field(default_factory=dict)

    def fold(self, e: Event, hourly_of=None) -> None:
        if isinstance(e, OperationSubmitted) and hourly_of is not None:
            self.hourly.setdefault(e.op_id, hourly_of(e.spec))
        elif isinstance(e, OperationRunning):
            self.running.setdefault((e.op_id, e.attempt), Running(self.hourly.get(e.op_id, 0.0), e.at))
        elif isinstance(e, CostRecorded):
            self.records.setdefault((e.op_id, e.attempt), e)
            self.running.pop((e.op_id, e.attempt), None)

    def spent(self, scope: str, name: str, start: datetime) -> tuple[float, float]:
        """Money and GPU-hours of ``scope``/``name`` charged since ``start``."""
        money = gpu = 0.0
        for r in self.records.values():
            if (r.queue if scope == "queue" else r.project) == name and r.at >= start:
                money, gpu = money + max(0.0, r.amount), gpu + max(0.0, r.gpu_hours)  # nothing is credited
        return round(money, 6), round(gpu, 6)

    def burn_rate(self, now: datetime) -> float:
        """Spend of the last hour (finished attempts pro rata, running ones so far), per hour."""
        since = now - HOUR
        total = 0.0
        for r in self.records.values():
            started = r.started_at or r.at
            length = (r.at - started).total_seconds()
            if length > 0:
                total += r.amount * _overlap(started, r.at, since, now) / length
            elif since <= r.at <= now:
                total += r.amount
        for run in self.running.values():
            total += run.hourly * _overlap(run.since, now, since, now) / 3600.0
        return round(total, 6)

    def answer(self, budgets: list[Budget], now: datetime) -> CostAnswer:
        names = {("queue", r.queue) for r in self.records.values()} | {("project", r.project)
                                                                     for r in self.records.values() if r.project}
        names |= {(b.scope, b.name) for b in budgets}
        spend = [self._line(scope, name, now) for scope, name in sorted(names)]
        return CostAnswer(at=now, currency=self.currency, burn_rate_per_hour=self.burn_rate(now), spend=spend,
                          budgets=[self.budget_line(b, now) for b in budgets])

    def _line(self, scope: str, name: str, now: datetime) -> SpendLine:
        out = {w: self.spent(scope, name, window_start(now, w)) for w in WINDOWS}
        return SpendLine(scope=scope, name=name, day=out["day"][0], week=out["week"][0], month=out["month"][0],
                         gpu_hours_day=out["day"][1], gpu_hours_week=out["week"][1],
                         gpu_hours_month=out["month"][1])

    def budget_line(self, b: Budget, now: datetime) -> BudgetLine:
        money, gpu = self.spent(b.scope, b.name, window_start(now, b.window))
        return BudgetLine(scope=b.scope, name=b.name, window=b.window, money=b.money, gpu_hours=b.gpu_hours,
                          spent_money=money, spent_gpu_hours=gpu,
                          remaining_money=None if b.money is None else round(max(0.0, b.money - money), 6),
                          remaining_gpu_hours=None if b.gpu_hours is None else round(max(0.0, b.gpu_hours - gpu), 6),
                          resets_at=window_end(now, b.window))


def _overlap(a0: datetime, a1: datetime, b0: datetime, b1: datetime) -> float:
    return max(0.0, (min(a1, b1) - max(a0, b0)).total_seconds())
