"""Budgets over calendar UTC windows (money or GPU-hours per day/week/month, per queue or project).

An op may be admitted only if, for every budget that covers it, the window's actual spend plus what
the ops running now are expected to spend plus the op's own estimate stays within the limit (money:
its estimate; GPU-hours: its GPUs x expected hours). Not resolvable by preemption: the money is spent.
Pure: spend, commitments and the time come from the caller."""
from __future__ import annotations

from datetime import datetime

from opsched.proto.queries import PendingReason
from opsched.proto.queues import Budget
from opsched.proto.reasons import Reason, pending
from opsched.rules.windows import window_end

CODE = Reason.BUDGET_EXHAUSTED
ADJECTIVE = {"day": "daily", "week": "weekly", "month": "monthly"}
EPSILON = 1e-9
Committed = dict[tuple[str, str], tuple[float, float]]  # (scope, name) -> (money, GPU-hours) of active ops


def covering(budgets: list[Budget], queue: str, project: str | None) -> list[Budget]:
    """The budgets that apply to an op of ``queue`` and ``project`` (a pool's budget is its nodes', never an op's)."""
    return [b for b in budgets if b.name == {"queue": queue, "project": project}.get(b.scope)]


def check(budgets: list[Budget], queue: str, project: str | None, money: float, gpu_hours: float,
          spent, committed: Committed, now: datetime, flavor: str = "") -> PendingReason | None:
    """The first budget the op (``money`` and ``gpu_hours`` estimated) would exceed, as a reason.
    ``spent(scope, name, window, now)`` gives the window's actual (money, GPU-hours); ``flavor``: where the op
    was priced, as the reason names it (" on flavor a100", or "")."""
    for b in covering(budgets, queue, project):
        spent_money, spent_gpu = spent(b.scope, b.name, b.window, now)
        held_money, held_gpu = committed.get((b.scope, b.name), (0.0, 0.0))
        if b.money is not None and spent_money + held_money + money > b.money + EPSILON:
            return _reason(b, "", spent_money, held_money, money, b.money, now, flavor)
        if b.gpu_hours is not None and spent_gpu + held_gpu + gpu_hours > b.gpu_hours + EPSILON:
            return _reason(b, " GPU-hours", spent_gpu, held_gpu, gpu_hours, b.gpu_hours, now, flavor)
    return None


def next_reset(budgets: list[Budget], queue: str, project: str | None, now: datetime) -> datetime | None:
    """The earliest time a budget covering the op starts a new window."""
    ends = [window_end(now, b.window) for b in covering(budgets, queue, project)]
    return min(ends) if ends else None


def _reason(b: Budget, unit: str, spent: float, held: float, estimate: float, limit: float,
            now: datetime, flavor: str = "") -> PendingReason:
    running = f" + {held:.2f} expected of running ops (and of ended ones not charged yet)" if held else ""
    return pending(CODE, scope=b.scope, name=b.name, period=ADJECTIVE[b.window], spent=spent, unit=unit,
                   running=running, estimate=estimate, flavor=flavor, limit=limit,
                   resets_at=window_end(now, b.window).isoformat())
