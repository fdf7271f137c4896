"""The cost service's metrics at a scrape (``services.cost.metrics``): what ``opsched cost`` answers."""
from __future__ import annotations

from opsched.proto.queries import BudgetLine, CostAnswer, PoolSpend, PoolSpendLine, SpendLine
from opsched.services.cost import metrics
from tests.builders import t
from tests.unit.test_admission_metrics import scrape


def test_spend_per_window_budgets_left_in_money_and_gpu_hours_and_the_burn_rate():
    answer = CostAnswer(at=t(0), currency="EUR", burn_rate_per_hour=3.5,
                        spend=[SpendLine(scope="queue", name="gpu", day=2.0, week=9.0, month=30.0, gpu_hours_day=1.0)],
                        budgets=[BudgetLine(scope="project", name="vision", window="month", money=100.0,
                                            remaining_money=70.0, gpu_hours=None),
                                 BudgetLine(scope="queue", name="gpu", window="day", gpu_hours=8.0,
                                            remaining_gpu_hours=7.0)])
    got = scrape(lambda: metrics.families(answer))
    assert got[("opsched_spend", (("currency", "EUR"), ("name", "gpu"), ("scope", "queue"), ("window", "week")))] == 9
    assert got[("opsched_spend_gpu_hours", (("name", "gpu"), ("scope", "queue"), ("window", "day")))] == 1
    vision = (("name", "vision"), ("scope", "project"), ("unit", "EUR"), ("window", "month"))
    assert (got[("opsched_budget_limit", vision)], got[("opsched_budget_remaining", vision)]) == (100, 70)
    gpu = (("name", "gpu"), ("scope", "queue"), ("unit", "gpu_hours"), ("window", "day"))
    assert (got[("opsched_budget_limit", gpu)], got[("opsched_budget_remaining", gpu)]) == (8, 7)
    assert not [k for k in got if k[0] == "opsched_budget_limit" and ("unit", "gpu_hours") in k[1]
                and ("name", "vision") in k[1]]  # a budget in money only has no GPU-hour series
    assert got[("opsched_burn_rate_per_hour", (("currency", "EUR"),))] == 3.5


def test_each_pools_node_spend_by_use_per_window():
    answer = CostAnswer(at=t(0), currency="EUR", pools=[PoolSpendLine(
        pool="a100", nodes=1, day=PoolSpend(money=10.0, busy=6.0, stranded=1.0, idle=3.0),
        month=PoolSpend(money=40.0, busy=30.0, stranded=2.0, idle=8.0))])
    got = scrape(lambda: metrics.families(answer))

    def key(kind: str, window: str) -> tuple:
        return ("opsched_pool_spend", (("agent", ""), ("currency", "EUR"), ("kind", kind), ("pool", "a100"),
                                       ("window", window)))
    assert (got[key("busy", "day")], got[key("stranded", "day")], got[key("idle", "day")]) == (6, 1, 3)
    assert got[key("idle", "month")] == 8 and got[key("idle", "week")] == 0
