"""The cache end to end: real nats-server, real kube-apiserver + kube-scheduler, a simulated GPU node,
the four services. The same op submitted twice runs once, and every hit carries the outputs the original wrote."""
from __future__ import annotations

import asyncio
import json

import pytest

from opsched.proto.events import (
    CacheHit,
    CacheMissed,
    OperationAdmitted,
    OperationDispatched,
    OperationRunning,
    OperationSucceeded,
)
from tests.builders import op

MANAGED = "app.kubernetes.io/managed-by=opsched"


@pytest.fixture
async def gpu_cluster(control_plane, k8s_namespace, sim_nodes, stack_factory, client, events):
    sim_nodes(("gpu-a", 2, "A100"))
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace)
    return client


OUTPUTS = {"loss": 0.25, "model": "runs/train/model.pt"}


def train():  # writes its outputs to its termination message, as a container does
    return op("train").gpus(1).runs(f"sleep 2; echo '{json.dumps(OUTPUTS)}' > /dev/termination-log") \
        .cache(disable=False).build()


def pods_of(core_v1, namespace: str) -> dict[str, str]:
    """op id -> pod name, for every pod opsched created in ``namespace``."""
    pods = core_v1.list_namespaced_pod(namespace, label_selector=MANAGED).items
    return {p.metadata.labels["opsched.io/op-id"]: p.metadata.name for p in pods}


async def test_the_same_op_submitted_twice_runs_once_and_the_second_is_a_cache_hit_with_its_outputs_without_a_pod(
        gpu_cluster, events, core_v1, k8s_namespace):
    client = gpu_cluster
    first = await client.submit(train())
    await events.expect(OperationRunning, first, timeout=30)
    second = await client.submit(train())  # its original is running: it waits for it

    done = await events.expect(OperationSucceeded, first, timeout=30)
    assert done.reason != "cache_hit" and done.outputs == OUTPUTS and not done.outputs_warning  # read from the pod
    hit = await events.expect(CacheHit, second, timeout=30)
    assert hit.original_op_id == first and hit.outputs == OUTPUTS
    second_done = await events.expect(OperationSucceeded, second, timeout=30)
    assert second_done.reason == "cache_hit" and second_done.outputs == OUTPUTS

    third = await client.submit(train())  # after the original succeeded: a hit at once
    assert (await events.expect(CacheHit, third, timeout=30)).original_op_id == first
    third_done = await events.expect(OperationSucceeded, third, timeout=30)
    assert third_done.reason == "cache_hit" and third_done.outputs == OUTPUTS
    rows = {row.op_id: row for row in await client.ops()}  # what `opsched ops ID -o json` prints
    assert rows[first].outputs == rows[third].outputs == OUTPUTS

    for op_id in (second, third):
        assert not events.of(op_id, OperationAdmitted) and not events.of(op_id, OperationDispatched)
        assert not events.of(op_id, CacheMissed)
    pods = await asyncio.to_thread(pods_of, core_v1, k8s_namespace)
    assert pods == {first: f"op-{first}-0"}  # one pod, for the original only
