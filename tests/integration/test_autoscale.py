"""GPU node pools that scale from zero, end to end (issue 34): real nats-server, real kube-apiserver + kube-scheduler,
the services in this process, and the simulated kubelet with ``--autoscale`` and a CPU-only static node.

1. An op onto the empty pool is admitted waiting for a node (``why``: waiting_for_node); a node ``a100-0`` comes, the
   op runs on it and succeeds.
2. A 3-pod gang gets 3 nodes or none: with ``maxNodes: 3`` the 3 come and it runs; with only 2 in stock (``--stock``)
   it is evicted ``node_not_provisioned`` without a pod ever Running, queued again after the back-off, and the 2
   nodes that came go once idle.
3. An idle node goes: tainted ``ToBeDeletedByClusterAutoscaler`` (admission's pools row shows it leaving), then
   removed.
4. A pool at ``maxNodes`` holds a second op (``pool_at_max``) until the first ends, then runs it on the same node.

Pools here come in 1 s (5 s where `why` is asked meanwhile) and go after 2 s idle; every wait is bounded (events or the API, never a sleep).
"""
from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from kubernetes import client

from opsched.client import Client
from opsched.localcluster.autoscaling import TO_BE_DELETED_TAINT
from opsched.proto.events import (
    OperationAdmitted,
    OperationEvicted,
    OperationRunning,
    OperationSucceeded,
)
from opsched.proto.reasons import Eviction, Reason
from tests.builders import op
from tests.integration.kube_reads import node_or_none
from tests.waiting import eventually

pytestmark = pytest.mark.integration

MANAGED = "app.kubernetes.io/managed-by=opsched"


def queues_yaml(tag: str, *, max_nodes: int, timeout_s: float = 60, provisioning_s: float = 1) -> str:
    """One GPU queue over the a100 flavor, whose pool starts empty; ``tag`` keeps its nodes this test's."""
    return f"""
defaultQueue: gpu
flavors:
  - name: a100
    nodeLabels: {{nvidia.com/gpu.product: A100, opsched.io/test-pool: "{tag}"}}
    pool:
      name: a100
      allocatable: {{nvidia.com/gpu: 1, cpu: "8", memory: 64Gi}}
      maxNodes: {max_nodes}
      provisioningSeconds: {provisioning_s}
      provisioningTimeoutSeconds: {timeout_s}
      scaleDownUnneededSeconds: 2
queues:
  - name: gpu
    concurrency: 4
    resources:
      - resource: nvidia.com/gpu
        flavors: [{{name: a100, nominal: 8}}]
"""


@pytest.fixture
async def start(control_plane, k8s_namespace, sim_nodes, stack_factory, client, tmp_path):
    """``start(max_nodes=..., timeout_s=..., provisioning_s=..., stock=..., **settings)``: the pool's queue file, the simulated kubelet
    autoscaling it (with a CPU node), and the services; returns the client and the test's pool tag."""
    async def go(*, max_nodes: int, timeout_s: float = 60, provisioning_s: float = 1,
                 stock: dict[str, int] | None = None, **settings: Any) -> tuple[Client, str]:
        tag = secrets.token_hex(4)
        path = tmp_path / "queues.yaml"
        path.write_text(queues_yaml(tag, max_nodes=max_nodes, timeout_s=timeout_s, provisioning_s=provisioning_s))
        sim_nodes(f"cpu-{tag}:0", autoscale=path, stock=stock or {}, delete_nodes_on_exit=True)
        await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=path,
                            **settings)
        return client, tag
    return go


def gpu_op(name: str, tag: str, script: str) -> Any:
    return op(name).gpus(1, product="A100").node_selector("opsched.io/test-pool", tag).runs(script)


def pool_nodes(core: client.CoreV1Api, tag: str) -> list[client.V1Node]:
    return core.list_node(label_selector=f"opsched.io/test-pool={tag}").items


def marked(node: client.V1Node | None) -> bool:
    return node is not None and any(t.key == TO_BE_DELETED_TAINT for t in node.spec.taints or [])


async def why_code(cl: Client, op_id: str, code: str) -> Any:
    async def check() -> Any:
        answer = await cl.why(op_id)
        return next((r for r in answer.reasons if r.code == code), None)
    return await eventually(check, f"{op_id}: why says {code}", timeout=20)


async def gone(core: client.CoreV1Api, name: str) -> None:
    await eventually(lambda: asyncio.to_thread(lambda: node_or_none(core, name) is None), f"node {name} removed",
                     timeout=30)


async def test_an_op_onto_the_empty_pool_waits_for_a_node_then_runs_on_it(start, events, core_v1, k8s_namespace):
    cl, tag = await start(max_nodes=2, provisioning_s=5)  # time to ask `why` while the node comes
    assert await asyncio.to_thread(pool_nodes, core_v1, tag) == []
    op_id = await cl.submit(gpu_op("first", tag, "sleep 3").build())

    admitted = await events.expect(OperationAdmitted, op_id, timeout=30)
    assert admitted.provisioning == ["a100"]
    reason = await why_code(cl, op_id, Reason.WAITING_FOR_NODE)
    assert "waiting for 1 new node(s) of pool a100" in reason.message

    await events.expect(OperationRunning, op_id, timeout=30)
    pod = await asyncio.to_thread(core_v1.read_namespaced_pod, admitted.pod_name, k8s_namespace)
    assert pod.spec.node_name == "a100-0"
    assert (await asyncio.to_thread(core_v1.read_node, "a100-0")).metadata.labels["opsched.io/test-pool"] == tag
    await events.expect(OperationSucceeded, op_id, timeout=30)
    assert not [r for r in (await cl.why(op_id)).reasons if r.code == Reason.WAITING_FOR_NODE]


async def test_a_three_pod_gang_gets_three_nodes_and_runs(start, events, core_v1):
    cl, tag = await start(max_nodes=3)
    gang = await cl.submit(gpu_op("ddp", tag, "sleep 2").replicas("worker", 2).build())
    admitted = await events.expect(OperationAdmitted, gang, timeout=30)
    assert admitted.provisioning == ["a100", "a100", "a100"]
    await events.expect(OperationRunning, gang, timeout=60)
    names = sorted(n.metadata.name for n in await asyncio.to_thread(pool_nodes, core_v1, tag))
    assert names == ["a100-0", "a100-1", "a100-2"]
    await events.expect(OperationSucceeded, gang, timeout=60)


async def test_a_gang_whose_nodes_do_not_all_come_is_released_and_retried_without_ever_running(
        start, events, core_v1, k8s_namespace):
    # the back-off (8 s) outlasts the nodes' idle time (2 s): the retry finds them gone
    cl, tag = await start(max_nodes=3, timeout_s=5, stock={"a100": 2}, gang_timeout_s=3.0,
                          gang_backoff_base_s=8.0)
    # each pod runs long: a real gang's pods wait for each other, a simulated one's do not (a short main pod would
    # succeed on one of the 2 nodes before the provisioning timeout released the attempt)
    gang = await cl.submit(gpu_op("ddp", tag, "sleep 60").replicas("worker", 2).build())
    admitted = await events.expect(OperationAdmitted, gang, timeout=30)
    assert admitted.provisioning == ["a100", "a100", "a100"]

    evicted = await events.expect(OperationEvicted, gang, timeout=60)
    assert evicted.reason == Eviction.NODE_NOT_PROVISIONED
    assert "no node of pool a100 came within 5s" in evicted.message
    assert not events.of(gang, OperationRunning)
    # only the 2 nodes in stock came; idle once the attempt is released, they go
    assert len(await asyncio.to_thread(pool_nodes, core_v1, tag)) <= 2
    assert await asyncio.to_thread(node_or_none, core_v1, "a100-2") is None
    await gone(core_v1, "a100-0")
    await gone(core_v1, "a100-1")
    # the op was queued again, behind the back-off, and admitted again: a fresh attempt, still waiting for nodes
    readmitted = await events.expect(OperationAdmitted, gang, timeout=60, where=lambda e: e.attempt > admitted.attempt)
    assert readmitted.provisioning
    assert not events.of(gang, OperationRunning)


async def test_an_idle_node_is_tainted_shown_leaving_then_removed(start, events, core_v1):
    cl, tag = await start(max_nodes=2)
    op_id = await cl.submit(gpu_op("short", tag, "sleep 1").build())
    await events.expect(OperationSucceeded, op_id, timeout=60)

    await eventually(lambda: asyncio.to_thread(lambda: marked(node_or_none(core_v1, "a100-0"))),
                     f"a100-0 tainted {TO_BE_DELETED_TAINT}", timeout=30)

    async def leaving() -> Any:
        pools = (await cl.queues()).pools
        return next((p for p in pools if p.pool == "a100" and p.leaving == 1), None)
    row = await eventually(leaving, "the pools row LEAVING 1", timeout=20)
    assert (row.nodes, row.max_nodes) == (1, 2)
    await gone(core_v1, "a100-0")


async def test_a_pool_at_max_holds_the_second_op_until_the_first_ends(start, events, core_v1, k8s_namespace):
    cl, tag = await start(max_nodes=1)
    first = await cl.submit(gpu_op("long", tag, "sleep 8").build())
    await events.expect(OperationRunning, first, timeout=30)
    second = await cl.submit(gpu_op("next", tag, "sleep 1").build())

    reason = await why_code(cl, second, Reason.POOL_AT_MAX)
    assert reason.message.startswith("pool a100 is at maxNodes (1/1)")
    assert not events.of(second, OperationAdmitted)

    done = await events.expect(OperationSucceeded, first, timeout=30)
    admitted = await events.expect(OperationAdmitted, second, timeout=30)
    assert admitted.at >= done.at
    await events.expect(OperationRunning, second, timeout=30)
    pod = await asyncio.to_thread(core_v1.read_namespaced_pod, admitted.pod_name, k8s_namespace)
    assert pod.spec.node_name.startswith("a100-")  # a100-0 again, unless it went idle long enough to be replaced
    await events.expect(OperationSucceeded, second, timeout=30)
