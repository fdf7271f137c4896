"""The cost ledger and budgets on the bus (dispatcher in null mode: the test publishes the
running/succeeded events itself): an attempt's actual cost is recorded, a daily budget holds the
next op with `budget_exhausted`, and `opsched cost` reports the spend and the budget left."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from opsched.client import Client
from opsched.proto.events import (
    CostEstimated,
    CostRecorded,
    OperationAdmitted,
    OperationRunning,
    OperationSucceeded,
)
from opsched.tables import cost_text
from tests.builders import op
from tests.waiting import eventually

BUSES = ["memory"]  # service logic, not about the bus: on the in-memory bus alone (tests/service/conftest.py)

# one GPU of no priced product: 2.0/h; a 1-hour timeout makes each estimate 2.0 (+ nothing else)
QUEUES = """
queues:
  - name: default
    concurrency: 10
budgets:
  - scope: queue
    name: default
    window: day
    money: 3.0
"""


def gpu_op(name: str):
    return op(name).gpus(1).project("vision").timeout(3600).build()


async def ran(bus, op_id: str, seconds: float) -> None:
    end = datetime.now(timezone.utc)
    await bus.publish(OperationRunning(op_id=op_id, at=end - timedelta(seconds=seconds), pod_name=f"op-{op_id}-0"))
    await bus.publish(OperationSucceeded(op_id=op_id, at=end, pod_name=f"op-{op_id}-0"))


async def why_code(client: Client, op_id: str, code: str, timeout: float = 10.0):
    async def waiting() -> object:
        answer = await client.why(op_id)
        return answer if any(r.code == code for r in answer.reasons) else None
    return await eventually(waiting, f"{op_id} waiting with reason {code}", timeout)


async def test_a_finished_attempt_records_its_actual_cost(stack_factory, bus, client, events, tmp_path):
    await stack_factory(dispatcher_mode="null")
    op_id = await client.submit(gpu_op("train"))
    await events.expect(OperationAdmitted, op_id)
    await ran(bus, op_id, 1800)
    cost = await events.expect(CostRecorded, op_id)
    assert cost.queue == "default" and cost.project == "vision" and cost.currency == "USD"
    assert abs(cost.seconds - 1800) < 1 and abs(cost.amount - 1.0) < 1e-3 and abs(cost.gpu_hours - 0.5) < 1e-3


async def test_a_daily_budget_admits_the_first_op_and_holds_the_second(stack_factory, bus, client, events, tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(dispatcher_mode="null", queues_file=path)
    first = await client.submit(gpu_op("first"))
    await events.expect(OperationAdmitted, first)
    second = await client.submit(gpu_op("second"))
    assert (await events.expect(CostEstimated, second)).estimate.amount == 2.0
    answer = await why_code(client, second, "budget_exhausted")
    assert "queue default daily budget" in answer.reasons[0].message and "resets at" in answer.reasons[0].message
    await ran(bus, first, 1800)  # actually cost 1.0: 1.0 + 2.0 fits the 3.0 budget
    await events.expect(CostRecorded, first)
    await events.expect(OperationAdmitted, second)
    third = await client.submit(gpu_op("third"))
    await why_code(client, third, "budget_exhausted")
    report = await client.cost()
    line = next(s for s in report.spend if (s.scope, s.name) == ("queue", "default"))
    assert abs(line.day - 1.0) < 1e-3 and abs(line.month - 1.0) < 1e-3
    budget = report.budgets[0]
    assert (budget.scope, budget.name, budget.window, budget.money) == ("queue", "default", "day", 3.0)
    assert abs(budget.remaining_money - 2.0) < 1e-3 and budget.resets_at is not None
    text = cost_text(report)
    assert "default" in text and "left" in text and "burn rate" in text
