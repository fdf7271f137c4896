"""The cost service's Prometheus metrics (``services.runtime.metrics``), read at a scrape from what
``opsched cost`` answers (``SpendView.answer``):

- ``opsched_spend{scope,name,window,currency}`` and ``opsched_spend_gpu_hours{scope,name,window}``: spend of
  each queue and project in the current UTC day, week and month;
- ``opsched_budget_limit{scope,name,window,unit}`` and ``opsched_budget_remaining{...}`` (``unit``: the
  currency or ``gpu_hours``): each budget and what is left of it in its window;
- ``opsched_burn_rate_per_hour{currency}``: the spend of the last hour;
- ``opsched_pool_spend{pool,agent,kind,window,currency}`` (``kind``: busy, stranded or idle): what each node pool's
  nodes cost in the current window (charged nodes and the open ones so far), by use."""
from __future__ import annotations

from typing import Any

from opsched.proto.queries import CostAnswer
from opsched.services.runtime.metrics import gauge

WINDOWS = ("day", "week", "month")
GPU_HOURS = "gpu_hours"
POOL_KINDS = ("busy", "stranded", "idle")


def families(answer: CostAnswer) -> list[Any]:
    cur = answer.currency
    return [
        gauge("opsched_spend", "Spend in the current window", ["scope", "name", "window", "currency"],
              [([s.scope, s.name, w, cur], getattr(s, w)) for s in answer.spend for w in WINDOWS]),
        gauge("opsched_spend_gpu_hours", "GPU-hours in the current window", ["scope", "name", "window"],
              [([s.scope, s.name, w], getattr(s, f"gpu_hours_{w}")) for s in answer.spend for w in WINDOWS]),
        gauge("opsched_budget_limit", "A budget's limit in its window", ["scope", "name", "window", "unit"],
              _budgets(answer, "money", "gpu_hours")),
        gauge("opsched_budget_remaining", "What is left of a budget in its window",
              ["scope", "name", "window", "unit"], _budgets(answer, "remaining_money", "remaining_gpu_hours")),
        gauge("opsched_burn_rate_per_hour", "Spend of the last hour", ["currency"],
              [([cur], answer.burn_rate_per_hour)]),
        gauge("opsched_pool_spend", "What a node pool's nodes cost in the current window, by use",
              ["pool", "agent", "kind", "window", "currency"],
              [([p.pool, p.agent, kind, w, cur], getattr(getattr(p, w), kind))
               for p in answer.pools for w in WINDOWS for kind in POOL_KINDS]),
    ]


def _budgets(answer: CostAnswer, money: str, gpu_hours: str) -> list[tuple[list[str], float]]:
    out = []
    for b in answer.budgets:
        for field, unit in ((money, answer.currency), (gpu_hours, GPU_HOURS)):
            value = getattr(b, field)
            if value is not None:
                out.append(([b.scope, b.name, b.window, unit], float(value)))
    return out
