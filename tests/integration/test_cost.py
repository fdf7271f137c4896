"""Cost end to end: real nats-server, real kube-apiserver + kube-scheduler, a simulated GPU node, the
four services. A queue's cost quota holds the second op until the first ends; a daily budget holds an
op once the day's actual spend leaves no room for it, and `opsched cost` (the real CLI) reports it.

Every estimate here is an op's own ``cost``, above what the catalogue estimates (an op's cost may only
raise its estimate), so no hold depends on how the estimator guesses a run's length; what an attempt is
charged always comes from the catalogue (the built-in prices), never from the op's ``cost``."""
from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from datetime import datetime, time, timedelta, timezone
from pathlib import Path

import pytest

from opsched.client import Client
from opsched.localcluster.simkubelet import terminate
from opsched.proto.events import (
    CostEstimated,
    CostRecorded,
    NodeCostRecorded,
    OperationAdmitted,
    OperationDispatched,
    OperationRunning,
    OperationSucceeded,
)
from opsched.proto.queries import PendingReason
from opsched.rules.node_pools import token_of
from tests.builders import op
from tests.builders.identities import ADMIN
from tests.waiting import eventually

MANAGED = "app.kubernetes.io/managed-by=opsched"
REPO = Path(__file__).resolve().parents[2]

CAPPED = """
defaultQueue: capped
queues:
  - name: capped
    costQuota: 10
  - name: probe
"""

METERED = """
defaultQueue: metered
queues:
  - name: metered
  - name: probe
budgets:
  - {scope: queue, name: metered, window: day, money: 100}
"""


@pytest.fixture
async def start(control_plane, k8s_namespace, sim_nodes, stack_factory, client, tmp_path):
    async def go(queues_yaml: str, *nodes) -> Client:
        sim_nodes(*nodes)
        path = tmp_path / "queues.yaml"
        path.write_text(queues_yaml)
        await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=path)
        return client
    return go


def pods_of(core_v1, namespace: str) -> dict[str, str]:
    """op id -> pod name, for every pod opsched created in ``namespace``."""
    pods = core_v1.list_namespaced_pod(namespace, label_selector=MANAGED).items
    return {p.metadata.labels["opsched.io/op-id"]: p.metadata.name for p in pods}


async def submitted_with_cost(client: Client, events, spec) -> str:
    """Submit; return once its gates are answered (the estimate: caching is off), checking the estimate."""
    op_id = await client.submit(spec)
    estimated = await events.expect(CostEstimated, op_id)
    assert (estimated.estimate.amount, estimated.basis) == (spec.cost, "explicit")
    return op_id


async def held_for(client: Client, op_id: str, code: str) -> PendingReason:
    """The op is queued (a cycle has seen it) and its first reason has ``code``."""
    async def check():
        answer = await client.why(op_id)
        return answer if answer.status == "queued" and answer.reasons and answer.reasons[0].code == code else None
    answer = await eventually(check, f"{op_id} queued with reason {code}", timeout=20)
    return answer.reasons[0]


async def a_cycle_passes(client: Client, events, name: str) -> None:
    """A later cycle ran: an op of the unconstrained queue ``probe``, submitted now, is admitted."""
    probe = await client.submit(op(name).queue("probe").build())
    await events.expect(OperationAdmitted, probe, timeout=20)


async def test_a_cost_quota_holds_the_second_op_until_the_first_ends(start, events, core_v1, k8s_namespace):
    client = await start(CAPPED, ("gpu-a", 4, "A100"))  # 4 GPUs for two 1-GPU ops: capacity is no limit
    first = await submitted_with_cost(client, events, op("first").gpus(1).cost(6).runs("sleep 8").build())
    await events.expect(OperationRunning, first, timeout=30)
    second = await submitted_with_cost(client, events, op("second").gpus(1).cost(6).runs("sleep 1").build())

    reason = await held_for(client, second, "cost_quota")  # 6 alone fits 10; 6 + 6 does not
    assert reason.message == "queue capped cost quota: 6.00 in use + 6.00 estimated > 10.00"
    capped = next(q for q in (await client.queues()).queues if q.name == "capped")
    assert (capped.cost_used, capped.cost_quota, capped.pending) == (6, 10, 1)
    await a_cycle_passes(client, events, "probe-1")
    assert not events.of(second, OperationAdmitted) and not events.of(second, OperationDispatched)
    assert not events.of(first, OperationSucceeded), "the first ended before the hold was checked"
    pods = await asyncio.to_thread(pods_of, core_v1, k8s_namespace)
    assert pods[first] == f"op-{first}-0" and second not in pods

    done = await events.expect(OperationSucceeded, first, timeout=30)
    admitted = await events.expect(OperationAdmitted, second, timeout=20)
    assert events.seq_of(OperationAdmitted, second) > events.seq_of(OperationSucceeded, first)
    assert admitted.at >= done.at
    await events.expect(OperationRunning, second, timeout=30)
    pod = await asyncio.to_thread(core_v1.read_namespaced_pod, admitted.pod_name, k8s_namespace)
    assert pod.metadata.labels["opsched.io/op-id"] == second and pod.spec.node_name == "gpu-a"
    assert pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    await events.expect(OperationSucceeded, second, timeout=30)


def next_utc_midnights(*moments: datetime) -> set[str]:
    """When a daily window holding any of ``moments`` resets, as ISO text."""
    return {datetime.combine(m.date() + timedelta(days=1), time(0), tzinfo=timezone.utc).isoformat()
            for m in moments}


async def spent_today(client: Client, queue: str) -> float:
    line = next((s for s in (await client.cost()).spend if (s.scope, s.name) == ("queue", queue)), None)
    return line.day if line else 0.0


def opsched_cost(nats_server) -> subprocess.CompletedProcess:
    """The CLI as admin, over TLS."""
    return subprocess.run([sys.executable, "-m", "opsched.cli", "cost"], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ, **nats_server.env(ADMIN)})


async def test_a_daily_budget_holds_an_op_once_the_days_spend_leaves_no_room_and_opsched_cost_reports_it(
        start, events, core_v1, k8s_namespace, nats_server):
    client = await start(METERED, ("gpu-a", 2, "A100"))
    # estimated at its own 60 (the catalogue's 1 GPU x 2.0/h x 60 s is less); charged by the catalogue
    first = await submitted_with_cost(client, events, op("first").gpus(1).cost(60).timeout(60)
                                      .runs("sleep 1").build())
    await events.expect(OperationSucceeded, first, timeout=30)
    spent = await events.expect(CostRecorded, first, timeout=20)
    assert spent.queue == "metered" and 0 < spent.amount < 0.05  # ~1 s at 3.0/h (an A100 node): the catalogue's, not its own 60

    # exactly the whole budget: it would fit an untouched day, not one with any spend
    before = datetime.now(timezone.utc)
    second = await submitted_with_cost(client, events, op("second").gpus(1).cost(100).runs("sleep 1").build())
    reason = await held_for(client, second, "budget_exhausted")
    after = datetime.now(timezone.utc)
    head, _, resets = reason.message.partition("; the window resets at ")
    assert head == (f"queue metered daily budget exhausted: {spent.amount:.2f} spent + 100.00 estimated "
                    "> 100.00 limit")  # no "expected of running ops": the first's actual spend holds it
    assert resets in next_utc_midnights(before, after)

    await a_cycle_passes(client, events, "probe-1")
    assert not events.of(second, OperationAdmitted) and not events.of(second, OperationDispatched)
    pods = await asyncio.to_thread(pods_of, core_v1, k8s_namespace)
    assert pods[first] == f"op-{first}-0" and second not in pods

    await eventually(lambda: _close(spent_today(client, "metered"), spent.amount),
                     "the cost service to have folded the first's cost", timeout=10)
    result = await asyncio.to_thread(opsched_cost, nats_server)
    assert result.returncode == 0, result.stderr
    assert_cost_report(result.stdout, spent.amount, next_utc_midnights(before, after))
    assert (await client.why(second)).reasons[0].code == "budget_exhausted"  # still held


async def _close(value, expected: float) -> bool:
    return abs(await value - expected) < 1e-6


def assert_cost_report(text: str, amount: float, resets: set[str]) -> None:
    """`opsched cost`: today's spend of queue metered, and its daily budget: spent/limit (left), reset."""
    rows = text.splitlines()
    spend = [r.split() for r in rows if re.match(r"queue\s+metered\s+[\d.]+\s", r)]
    assert len(spend) == 1, text
    assert spend[0][2:5] == [f"{amount:.2f}"] * 3, text  # today, this week, this month
    budget = [r for r in rows if re.match(r"queue\s+metered\s+day\s", r)]
    assert len(budget) == 1, text
    left = round(max(0.0, 100 - round(amount, 6)), 6)
    assert f"{amount:.2f}/100.00 USD ({left:.2f} left)" in budget[0], text
    assert budget[0].split()[-1] in resets, text
    assert "MONEY SPENT/LIMIT (LEFT)" in text and "burn rate:" in text, text


POOLED = """
defaultQueue: pooled
flavors:
  - name: a100
    nodeLabels: {nvidia.com/gpu.product: A100}
    pool: {name: a100, allocatable: {nvidia.com/gpu: 2}, maxNodes: 2}
queues:
  - name: pooled
"""


async def test_a_deleted_node_is_charged_to_its_pool_from_its_creation(start, sim_nodes, events, core_v1):
    await start(POOLED)
    kubelet = sim_nodes(("pool-a", 2, "A100"))
    node = await asyncio.to_thread(core_v1.read_node, "pool-a")
    created = node.metadata.creation_timestamp
    await asyncio.to_thread(terminate, kubelet)  # no kubelet to register it again
    await asyncio.to_thread(core_v1.delete_node, "pool-a")
    charge = await events.expect(NodeCostRecorded, token_of("", "pool-a", created), timeout=30)
    assert (charge.node, charge.pool, charge.created) == ("pool-a", "a100", created)
    assert charge.seconds > 0 and charge.amount > 0 and charge.idle == charge.amount  # it ran nothing
