"""Queues on the real control plane: cohorts and borrowing, concurrency, flavor fallback, why, maxQueued."""
from __future__ import annotations

import asyncio

import pytest

from opsched.client import Client
from opsched.proto.events import (
    CostEstimated,
    OperationAdmitted,
    OperationRejected,
    OperationRunning,
    OperationSucceeded,
)
from tests.builders import op
from tests.waiting import queued

COHORT = """
defaultQueue: team-a
flavors:
  - {name: a100, nodeLabels: {nvidia.com/gpu.product: A100}}
queues:
  - name: team-a
    cohort: lab
    resources: [{resource: nvidia.com/gpu, flavors: [{name: a100, nominal: 2}]}]
  - name: team-b
    cohort: lab
    resources: [{resource: nvidia.com/gpu, flavors: [{name: a100, nominal: 1}]}]
  - name: solo
    concurrency: 1
  - name: tiny
    maxQueued: 1
    concurrency: 1
"""

FALLBACK = """
defaultQueue: train
flavors:
  - {name: h100, nodeLabels: {nvidia.com/gpu.product: H100}}
  - {name: a100, nodeLabels: {nvidia.com/gpu.product: A100}}
queues:
  - name: train
    resources: [{resource: nvidia.com/gpu, flavors: [{name: h100, nominal: 1}, {name: a100, nominal: 2}]}]
"""


@pytest.fixture
async def start(control_plane, k8s_namespace, sim_nodes, stack_factory, client, tmp_path):
    async def go(queues_yaml: str, *nodes):
        sim_nodes(*nodes)
        path = tmp_path / "queues.yaml"
        path.write_text(queues_yaml)
        await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=path)
        await _wait_nodes_known(client, len(nodes))
        return client
    return go


async def _wait_nodes_known(client: Client, count: int) -> None:
    """Admission learns node capacity from the dispatcher's node facts (a condition, not a sleep)."""
    probe = await client.submit(op("probe").gpus(99).build())
    rejected = await asyncio.wait_for(_until_rejected(client, probe), timeout=20)
    assert rejected


async def _until_rejected(client: Client, op_id: str) -> bool:
    async for event, _ in client.watch(op_id):
        if isinstance(event, OperationRejected):
            return event.reason == "unfittable"
    return False


async def test_a_queue_borrows_its_cohorts_idle_gpus_and_borrowing_stops_while_the_lender_waits(start, events):
    client = await start(COHORT, ("gpu-a", 2, "A100"), ("gpu-b", 1, "A100"))
    borrower = await client.submit(op("b-big").queue("team-b").gpus(2).runs("sleep 3").build())
    admitted = await events.expect(OperationAdmitted, borrower)
    assert admitted.borrowing and admitted.flavors == {"nvidia.com/gpu": "a100"}
    await events.expect(OperationRunning, borrower)

    lender = await client.submit(op("a-two").queue("team-a").gpus(2).runs("sleep 1").build())
    await events.expect(CostEstimated, lender)
    assert (await queued(client, lender)).reasons[0].code == "quota_lent_out"
    more = await client.submit(op("b-more").queue("team-b").gpus(1).runs("sleep 1").build())
    await events.expect(CostEstimated, more)
    probe = await client.submit(op("probe2").queue("solo").build())  # a cycle after b-more's gates
    await events.expect(OperationAdmitted, probe)
    assert not events.of(more, OperationAdmitted)  # one free GPU, but team-a waits for its own quota

    for op_id in (borrower, lender, more):
        await events.expect(OperationSucceeded, op_id, timeout=40)
    assert events.seq_of(OperationAdmitted, lender) > events.seq_of(OperationSucceeded, borrower)
    assert events.seq_of(OperationAdmitted, more) > events.seq_of(OperationAdmitted, lender)


async def test_concurrency_one_runs_one_op_at_a_time(start, events):
    client = await start(COHORT, ("gpu-a", 2, "A100"))
    ids = [await client.submit(op(f"s{i}").queue("solo").runs("sleep 0.5").build()) for i in range(3)]
    for op_id in ids:
        await events.expect(OperationSucceeded, op_id, timeout=30)
    for before, after in zip(ids, ids[1:]):
        assert events.seq_of(OperationAdmitted, after) > events.seq_of(OperationSucceeded, before)


async def test_an_h100_first_queue_falls_back_to_a100_nodes_when_h100_is_taken(start, events, core_v1, k8s_namespace):
    client = await start(FALLBACK, ("gpu-h100", 1, "H100"), ("gpu-a100", 2, "A100"))
    first = await client.submit(op("first").gpus(1).runs("sleep 3").build())
    second = await client.submit(op("second").gpus(1).runs("sleep 1").build())
    one = await events.expect(OperationAdmitted, first)
    two = await events.expect(OperationAdmitted, second)
    assert one.flavors == {"nvidia.com/gpu": "h100"} and two.flavors == {"nvidia.com/gpu": "a100"}
    await events.expect(OperationRunning, second)
    pods = {op_id: await asyncio.to_thread(core_v1.read_namespaced_pod, f"op-{op_id}-0", k8s_namespace)
            for op_id in (first, second)}
    assert pods[first].spec.node_name == "gpu-h100"
    assert pods[first].spec.node_selector == {"nvidia.com/gpu.product": "H100"}
    assert pods[second].spec.node_name == "gpu-a100"
    assert pods[second].spec.node_selector == {"nvidia.com/gpu.product": "A100"}


async def test_an_op_over_its_queue_quota_waits_and_why_says_so(start, events):
    client = await start(FALLBACK, ("gpu-h100", 1, "H100"), ("gpu-a100", 4, "A100"))
    hog = await client.submit(op("hog").gpus(2, product="A100").runs("sleep 3").build())
    await events.expect(OperationRunning, hog)
    over = await client.submit(op("over").gpus(1, product="A100").runs("sleep 0.2").build())
    await events.expect(CostEstimated, over)
    answer = await queued(client, over)
    assert answer.position == 1
    assert answer.reasons[0].code == "quota_exhausted"
    assert "nvidia.com/gpu flavor a100" in answer.reasons[0].message and "2/2" in answer.reasons[0].message
    table = await client.queues()
    train = next(q for q in table.queues if q.name == "train")
    assert train.pending == 1 and any(u.flavor == "a100" and u.used == 2 for u in train.usage)
    await events.expect(OperationSucceeded, over, timeout=30)


async def test_max_queued_rejects_the_next_submission_with_the_reason(start, events):
    client = await start(COHORT, ("gpu-a", 1, "A100"))
    running = await client.submit(op("runs").queue("tiny").runs("sleep 3").build())
    await events.expect(OperationRunning, running)
    waiting = await client.submit(op("waits").queue("tiny").build())
    await events.expect(CostEstimated, waiting)
    refused = await client.submit(op("refused").queue("tiny").build())
    rejected = await events.expect(OperationRejected, refused)
    assert rejected.reason == "queue_full" and "maxQueued 1" in rejected.message
