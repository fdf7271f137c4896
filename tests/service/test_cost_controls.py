"""Cost and priority controls a spec cannot bypass (issue 14), on a real nats-server (dispatcher in null
mode: the test publishes running/succeeded itself): an op saying ``cost: 0`` is estimated and charged by
the catalogue and held by a money budget; a raw priority above its queue's maximum is rejected at submit."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from opsched.client import Client
from opsched.proto.events import (
    CostEstimated,
    CostRecorded,
    OperationAdmitted,
    OperationRejected,
    OperationRunning,
    OperationSucceeded,
)
from tests.builders import op
from tests.waiting import eventually

# one GPU of no priced product: 2.0/h; a 1-hour timeout makes each catalogue estimate 2.0
QUEUES = """
priorityClasses: [{name: high, value: 100}, {name: low, value: 1}]
queues:
  - name: default
    concurrency: 10
budgets:
  - {scope: queue, name: default, window: day, money: 3.0}
"""


def free_op(name: str):
    """An op that says it costs nothing."""
    return op(name).gpus(1).timeout(3600).cost(0.0).build()


async def held_by_budget(client: Client, op_id: str) -> str:
    async def waiting() -> object:
        reasons = (await client.why(op_id)).reasons
        return next((r.message for r in reasons if r.code == "budget_exhausted"), None)
    return await eventually(waiting, f"{op_id} held by the daily budget", timeout=10)


async def test_a_spec_cannot_make_an_op_free_nor_outrank_its_queue(stack_factory, bus, client, events, tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(dispatcher_mode="null", queues_file=path)

    first = await client.submit(free_op("first"))
    estimate = await events.expect(CostEstimated, first)
    assert (estimate.estimate.amount, estimate.basis) == (2.0, "timeout")  # the catalogue's, not the spec's 0
    await events.expect(OperationAdmitted, first)
    end = datetime.now(timezone.utc)
    await bus.publish(OperationRunning(op_id=first, at=end - timedelta(hours=1), pod_name=f"op-{first}-0"))
    await bus.publish(OperationSucceeded(op_id=first, at=end, pod_name=f"op-{first}-0"))
    charged = await events.expect(CostRecorded, first)
    assert abs(charged.amount - 2.0) < 1e-3  # an hour at the catalogue's 2.0/h, not the spec's 0

    second = await client.submit(free_op("second"))
    assert (await events.expect(CostEstimated, second)).estimate.amount == 2.0
    message = await held_by_budget(client, second)
    assert message.startswith("queue default daily budget exhausted: 2.00 spent + 2.00 estimated > 3.00 limit")

    raw = await client.submit(op("urgent").priority(101).build())
    rejected = await events.expect(OperationRejected, raw)
    assert rejected.reason == "priority_too_high"
    assert rejected.message.startswith("priority 101 is above queue default's maximum priority 100")
    assert not events.of(second, OperationAdmitted)
