"""What nodes cost, on the bus: a node's removal on the cluster stream is charged once (``node_cost_recorded``),
from its creation, split by the op pods that ran on it; ``opsched cost`` lists its pool."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from opsched.proto import subjects
from opsched.proto.cluster import NodeObserved, NodeRemoved
from opsched.proto.events import (
    BudgetExceeded,
    NodeCostRecorded,
    OperationAdmitted,
    OperationRunning,
    OperationSucceeded,
)
from opsched.rules.node_pools import token_of
from opsched.tables import cost_text
from tests.builders import GPU, GPU_PRODUCT, op

# on every bus of tests/service/conftest.py: on the secure one, the cost service publishes as its own user

HOUR = timedelta(hours=1)
LABELS = {GPU_PRODUCT: "T4"}
ALLOC = {GPU: "2", "cpu": "8", "memory": "32Gi"}


async def publish_node(bus, event, mid: str) -> None:
    await bus.publish(event, subject=subjects.node(event.node, event.agent), msg_id=mid)


async def test_a_removed_node_is_charged_once_with_what_ran_on_it(stack_factory, bus, client, events):
    await stack_factory(dispatcher_mode="null")
    now = datetime.now(timezone.utc).replace(microsecond=0)
    t0 = now - 2 * HOUR
    await publish_node(bus, NodeObserved(node="gpu-a", at=t0, labels=LABELS, allocatable=ALLOC, created=t0),
                       "node.gpu-a.1")
    op_id = await client.submit(op("train").gpus(1).build())
    await events.expect(OperationAdmitted, op_id)
    await bus.publish(OperationRunning(op_id=op_id, at=t0, pod_name=f"op-{op_id}-0", node="gpu-a",
                                       nodes=["gpu-a"]))
    await bus.publish(OperationSucceeded(op_id=op_id, at=t0 + HOUR, pod_name=f"op-{op_id}-0"))
    removed = NodeRemoved(node="gpu-a", at=now, created=t0, labels=LABELS, allocatable=ALLOC)
    await publish_node(bus, removed, "node.gpu-a.removed.2")
    token = token_of("", "gpu-a", t0)
    charge = await events.expect(NodeCostRecorded, token)
    assert (charge.node, charge.pool, charge.seconds, charge.gpu_hours) == ("gpu-a", "", 7200.0, 4.0)
    # T4 0.35/GPU-h x 2, 8 cores x 0.04, 32 GiB x 0.005: 1.18/h for 2 h
    assert abs(charge.amount - 2.36) < 1e-6
    # 1 of 2 GPUs held for 1 h (busy 1 GPU-h), 1 free beside it (stranded 1), none for 1 h (idle 2): of 4
    assert (charge.busy, charge.stranded, charge.idle) == (0.59, 0.59, 1.18)

    await publish_node(bus, removed, "node.gpu-a.removed.3")  # redelivered (a replica, a relist): no new charge
    await publish_node(bus, NodeRemoved(node="gpu-b", at=now, created=now - HOUR, labels=LABELS,
                                        allocatable=ALLOC), "node.gpu-b.removed.4")
    await events.expect(NodeCostRecorded, token_of("", "gpu-b", now - HOUR))  # handled after the repeat
    assert len(events.of(token, NodeCostRecorded)) == 1

    report = await client.cost()
    [line] = report.pools
    assert (line.pool, line.nodes) == ("", 0)
    assert line.month.idle > 0 and abs(line.month.money - (2.36 + 1.18)) < 1e-6
    assert "IDLE" in cost_text(report)


POOLED = """
flavors:
  - name: t4
    nodeLabels: {nvidia.com/gpu.product: T4}
    pool:
      name: t4-pool
      nodeLabels: {karpenter.sh/nodepool: t4}
      allocatable: {nvidia.com/gpu: 2, cpu: 8, memory: 32Gi}
      maxNodes: 3
queues:
  - name: default
budgets:
  - {scope: pool, name: t4-pool, window: month, money: 2.0}
"""


async def test_a_pools_node_is_charged_to_the_pool_and_its_budget_announced(stack_factory, bus, client, events,
                                                                              tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(POOLED)
    await stack_factory(dispatcher_mode="null", queues_file=path)
    now = datetime.now(timezone.utc).replace(microsecond=0)
    created = now - 2 * HOUR
    labels = {**LABELS, "karpenter.sh/nodepool": "t4"}
    await publish_node(bus, NodeRemoved(node="t4-0", at=now, created=created, labels=labels, allocatable=ALLOC),
                       "node.t4-0.removed.1")
    token = token_of("", "t4-0", created)
    charge = await events.expect(NodeCostRecorded, token)
    assert (charge.pool, charge.idle, charge.amount) == ("t4-pool", charge.amount, 2.36)
    exceeded = await events.expect(BudgetExceeded, token)  # 2.36 of 2.0: no new t4 node this month
    assert (exceeded.scope, exceeded.name, exceeded.limit, exceeded.spent) == ("pool", "t4-pool", 2.0, 2.36)
    report = await client.cost()
    assert [(p.pool, round(p.month.idle, 6)) for p in report.pools] == [("t4-pool", 2.36)]
    assert [(s.scope, s.name) for s in report.spend] == [("pool", "t4-pool")]  # never a queue's or a project's
    [budget] = report.budgets
    assert (budget.scope, budget.spent_money, budget.remaining_money) == ("pool", 2.36, 0.0)
