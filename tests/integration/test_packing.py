"""Placement policies on the real control plane: admission picks the node (binpack: the fullest that fits;
spread: the emptiest), the pod prefers it (a preferred node affinity on its hostname), and kube-scheduler, which
alone would spread, binds it there. Under binpack a whole node stays free for a 4-GPU op; under spread it waits."""
from __future__ import annotations

import asyncio

import pytest

from opsched.client import Client
from opsched.proto.events import OperationAdmitted, OperationRunning, OperationStopped
from opsched.rules.podspec import PREFERRED
from tests.builders import op
from tests.waiting import eventually, waiting_on

pytestmark = pytest.mark.integration

QUEUES = """
defaultQueue: default
placement: {placement}
flavors:
  - {{name: a100, nodeLabels: {{nvidia.com/gpu.product: A100}}}}
queues:
  - name: default
    resources:
      - resource: nvidia.com/gpu
        flavors: [{{name: a100, nominal: 16}}]
"""


async def start(policy: str, control_plane, k8s_namespace, sim_nodes, stack_factory, client, tmp_path) -> Client:
    sim_nodes(("pack-a", 4, "A100"), ("pack-b", 4, "A100"))
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES.format(placement=policy))
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=path)

    async def both_nodes_known() -> bool:  # before that, admission admits on quota alone and places nothing
        return [f.nodes for f in (await client.queues()).fragmentation if f.flavor == "a100"] == [2]
    await eventually(both_nodes_known, "admission to know both nodes", timeout=30)
    return client


async def run_two_small_ops(client: Client, events) -> list[OperationRunning]:
    ids = []
    for name in ("small-1", "small-2"):
        ids.append(await client.submit(op(name).gpus(1, product="A100").runs("sleep 60").build()))
        await events.expect(OperationRunning, ids[-1], timeout=30)  # one at a time: the second sees the first
    return [events.of(i, OperationRunning)[0] for i in ids]


async def test_binpack_puts_small_ops_on_one_node_and_keeps_a_whole_node_for_a_big_one(
        control_plane, k8s_namespace, sim_nodes, stack_factory, client, events, core_v1, tmp_path):
    client = await start("binpack", control_plane, k8s_namespace, sim_nodes, stack_factory, client, tmp_path)
    first, second = await run_two_small_ops(client, events)
    assert first.node == "pack-a" and second.node == "pack-a"  # kube-scheduler alone would have spread them
    admitted = events.of(second.op_id, OperationAdmitted)[0]
    assert admitted.preferred_hosts == ["pack-a"]
    pod = await asyncio.to_thread(core_v1.read_namespaced_pod, admitted.pod_name, k8s_namespace)
    term = pod.to_dict()["spec"]["affinity"]["node_affinity"]["preferred_during_scheduling_ignored_during_execution"]
    assert term[0]["weight"] == 100 and term[0]["preference"]["match_expressions"][0]["values"] == ["pack-a"]
    big = await client.submit(op("big").gpus(4, product="A100").runs("sleep 1").build())
    assert (await events.expect(OperationRunning, big, timeout=30)).node == "pack-b"
    await stop_all(client, events, first.op_id, second.op_id)


async def test_spread_puts_small_ops_on_different_nodes_and_a_big_op_waits_for_a_whole_one(
        control_plane, k8s_namespace, sim_nodes, stack_factory, client, events, tmp_path):
    client = await start("spread", control_plane, k8s_namespace, sim_nodes, stack_factory, client, tmp_path)
    first, second = await run_two_small_ops(client, events)
    assert (first.node, second.node) == ("pack-a", "pack-b")
    big = await client.submit(op("big").gpus(4, product="A100").runs("sleep 1").build())
    await eventually(lambda: waiting_on(client, big, "no_capacity"), "the big op to wait for capacity", timeout=20)
    answer = await client.queues()
    (figure,) = [f for f in answer.fragmentation if f.flavor == "a100"]
    assert (figure.free, figure.stranded, figure.largest_waiting) == (6.0, 6.0, 4.0)
    await stop_all(client, events, first.op_id, second.op_id)
    assert (await events.expect(OperationRunning, big, timeout=30)).node in ("pack-a", "pack-b")


async def stop_all(client: Client, events, *ids: str) -> None:
    for op_id in ids:
        await client.stop(op_id)
    for op_id in ids:
        await events.expect(OperationStopped, op_id, timeout=30)


def test_the_preferred_key_is_the_node_affinity_field_kubernetes_reads():
    assert PREFERRED == "preferredDuringSchedulingIgnoredDuringExecution"
