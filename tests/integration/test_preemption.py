"""Priority and preemption on the real control plane: victims' pods are deleted on the API server,
preemptors run on the freed GPU; reclaim, cooldown, preemptible:false, gangs and aging."""
from __future__ import annotations

import asyncio

import msgspec
import pytest

from opsched.client import Client
from opsched.proto.events import (
    CostEstimated,
    OperationAdmitted,
    OperationFailed,
    OperationPreempted,
    OperationRejected,
    OperationRunning,
    OperationSucceeded,
    PreemptRequested,
)
from opsched.proto.spec import ReplicaGroup
from opsched.tables import why_text
from tests.builders import op
from tests.kube import pod_gone
from tests.waiting import queued

QUEUES = """
defaultQueue: main
priorityClasses: [{name: low, value: 0}, {name: high, value: 100}]
flavors: [{name: a100, nodeLabels: {nvidia.com/gpu.product: A100}}]
queues:
  - name: main
    cohort: lab
    defaultPriorityClass: low
    preemption: {withinQueue: LowerPriority, reclaimWithinCohort: Any, cooldownSeconds: 300}
    resources: [{resource: nvidia.com/gpu, flavors: [{name: a100, nominal: 2}]}]
  - name: other
    cohort: lab
    resources: [{resource: nvidia.com/gpu, flavors: [{name: a100, nominal: 0}]}]
  - name: aging
    concurrency: 1
    aging: {perMinute: 600, cap: 200}
  - name: fifo
    concurrency: 1
"""


def spec(name: str, *, cls: str | None = None, seconds: float = 30, queue: str = "main",
         preemptible: bool = True, gpus: int = 1, priority: int = 0):
    builder = op(name).queue(queue).runs(f"sleep {seconds}").priority(priority)
    base = (builder.gpus(gpus) if gpus else builder).build()
    return msgspec.structs.replace(base, priority_class=cls, preemptible=preemptible)


@pytest.fixture
async def cluster(control_plane, k8s_namespace, sim_nodes, stack_factory, client, events, tmp_path, core_v1):
    sim_nodes(("gpu-a", 1, "A100"), ("gpu-b", 1, "A100"))
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=path)
    probe = await client.submit(spec("probe", gpus=9))  # rejected once admission knows the nodes
    await events.expect(OperationRejected, probe)
    return client


async def running_both(client: Client, events, *specs) -> list[str]:
    ids = []
    for s in specs:
        ids.append(await client.submit(s))
        await events.expect(OperationRunning, ids[-1])
    return ids


async def test_a_high_priority_op_preempts_the_newest_low_priority_op_and_runs_on_its_gpu(
        cluster, events, core_v1, k8s_namespace):
    client = cluster
    older, newer = await running_both(client, events, spec("older"), spec("newer"))
    victim_node = events.of(newer, OperationRunning)[0].node
    urgent = await client.submit(spec("urgent", cls="high", seconds=1))
    request = await events.expect(PreemptRequested, newer)
    assert request.preemptor == urgent and request.reason == "within_queue"
    assert await pod_gone(core_v1, k8s_namespace, f"op-{newer}-0")
    preempted = await events.expect(OperationPreempted, newer)
    assert preempted.preemptor == urgent
    running = await events.expect(OperationRunning, urgent)
    assert running.node == victim_node
    assert not events.of(older, PreemptRequested) and not events.of(newer, OperationFailed)
    again = await events.expect(OperationRunning, newer, timeout=30, where=lambda e: e.attempt == 1)
    assert again.pod_name == f"op-{newer}-1"  # back in its queue, re-admitted as a new attempt


async def test_a_lender_reclaims_its_quota_from_a_borrowing_queue(cluster, events):
    client = cluster
    borrowers = await running_both(client, events, spec("b1", queue="other"), spec("b2", queue="other"))
    assert all(events.of(b, OperationAdmitted)[0].borrowing for b in borrowers)
    lender = await client.submit(spec("lender", seconds=1))
    victim = next(b for b in reversed(borrowers))  # most recently admitted borrower goes first
    request = await events.expect(PreemptRequested, victim)
    assert request.reason == "reclaim" and request.preemptor == lender
    await events.expect(OperationSucceeded, lender, timeout=30)
    assert not events.of(borrowers[0], PreemptRequested)
    # the victim's `why` tells who took its GPU and why, now that it is back in its queue (its history, issue 32)
    assert f"preempted by {lender} (reclaim)" in why_text(await client.why(victim))


async def test_a_victim_is_not_preempted_again_during_its_cooldown(cluster, events):
    client = cluster
    older, newer = await running_both(client, events, spec("older"), spec("newer"))
    first = await client.submit(spec("urgent-1", cls="high", seconds=1))
    await events.expect(PreemptRequested, newer)
    await events.expect(OperationSucceeded, first, timeout=30)
    await events.expect(OperationRunning, newer, timeout=30, where=lambda e: e.attempt == 1)
    second = await client.submit(spec("urgent-2", cls="high", seconds=1))
    request = await events.expect(PreemptRequested, older)  # `newer` is younger but in its cooldown
    assert request.preemptor == second
    assert len(events.of(newer, PreemptRequested)) == 1


async def test_an_op_that_is_not_preemptible_is_never_chosen(cluster, events):
    client = cluster
    plain, protected = await running_both(client, events, spec("plain"), spec("protected", preemptible=False))
    urgent = await client.submit(spec("urgent", cls="high", seconds=1))
    request = await events.expect(PreemptRequested, plain)
    assert request.preemptor == urgent
    await events.expect(OperationRunning, urgent)
    assert not events.of(protected, PreemptRequested)


async def test_a_gang_of_three_on_room_for_two_is_not_partially_started(cluster, events, core_v1, k8s_namespace):
    client = cluster
    base = spec("ddp", seconds=2)
    gang = msgspec.structs.replace(base, replicas=[ReplicaGroup(name="worker", count=2, container=base.container)])
    op_id = await client.submit(gang)
    await events.expect(CostEstimated, op_id)
    answer = await queued(client, op_id)
    assert any("a gang of 3 pods" in r.message or "quota" in r.message for r in answer.reasons), answer.reasons
    pods = await asyncio.to_thread(core_v1.list_namespaced_pod, k8s_namespace,
                                   label_selector=f"opsched.io/op-id={op_id}")
    assert pods.items == [] and not events.of(op_id, OperationAdmitted)


async def test_aging_lets_a_low_priority_op_run_under_a_steady_stream_of_high_priority_ops(cluster, events):
    client = cluster
    loop = asyncio.get_running_loop()
    head = await client.submit(spec("head", queue="aging", gpus=0, seconds=1, priority=100))
    await events.expect(OperationRunning, head)
    low = await client.submit(spec("low", queue="aging", gpus=0, seconds=0.5, priority=0))
    start = loop.time()
    previous = head
    highs = 0
    while not events.of(low, OperationAdmitted):
        assert loop.time() - start < 40, "the low-priority op starved"
        nxt = await client.submit(spec(f"high-{highs}", queue="aging", gpus=0, seconds=1, priority=100))
        highs += 1
        await events.expect(OperationSucceeded, previous, timeout=30)
        previous = nxt
    waited = loop.time() - start
    # 600/minute: it outranks new priority-100 ops after 10 s, then runs once the current op ends.
    assert highs >= 3 and waited < 25, (highs, waited)
