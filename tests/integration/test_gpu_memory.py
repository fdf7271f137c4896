"""GPU memory sharing on the real control plane: a node of 2 cards x 16 GiB (aliyun.com/gpu-mem) runs three
shared ops at once; an op that fits the node's free total but no single card waits until a card frees."""
from __future__ import annotations

import pytest

from opsched.client import Client
from opsched.proto.events import OperationAdmitted, OperationRunning, OperationStopped
from opsched.proto.resources import GPU_MEMORY
from tests.builders import op
from tests.waiting import eventually, waiting_on

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(control_plane, k8s_namespace, sim_nodes, stack_factory, client) -> Client:
    sim_nodes(("share", "2x16Gi", "T4"))
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace)
    return client


def shared(name: str, gib: int, script: str = "sleep 60"):
    return op(name).runs(script).limits(**{GPU_MEMORY: f"{gib}Gi"}).build()


async def test_shared_gpu_memory_is_fitted_per_card(client, events, core_v1, k8s_namespace):
    first = await client.submit(shared("first", 10))
    second = await client.submit(shared("second", 10))
    for op_id in (first, second):
        assert (await events.expect(OperationRunning, op_id, timeout=30)).node == "share"

    big = await client.submit(shared("big", 12))  # 12 GiB free on the node, but 6 on each card
    answer = await eventually(lambda: waiting_on(client, big, "no_capacity"), "big to wait for a card", timeout=20)
    assert "12 GiB of aliyun.com/gpu-mem on one card" in answer.reasons[0].message

    small = await client.submit(shared("small", 6))  # the third op on the 2 cards
    assert (await events.expect(OperationRunning, small, timeout=30)).node == "share"
    pod = core_v1.read_namespaced_pod(f"op-{small}-0", k8s_namespace)
    assert pod.spec.containers[0].resources.limits == {GPU_MEMORY: "6"}  # the device plugin's unit: GiB

    await client.stop(second)
    await events.expect(OperationStopped, second, timeout=30)
    await events.expect(OperationAdmitted, big, timeout=30)
    assert (await events.expect(OperationRunning, big, timeout=30)).node == "share"
    for op_id in (first, small, big):
        await client.stop(op_id)
