"""Admission places only where Kubernetes can place, on the real control plane: required node affinity
and taints are evaluated before an op is admitted, and a pod kube-scheduler keeps Unschedulable past its
queue's pendingTimeout is deleted and its op requeued with the scheduler's own message."""
from __future__ import annotations

import asyncio

import pytest

from opsched.client import Client
from opsched.proto.events import (
    OperationAdmitted,
    OperationEvicted,
    OperationRejected,
    OperationRunning,
)
from tests.builders import op
from tests.waiting import eventually, waiting_on

pytestmark = pytest.mark.integration

QUEUES = """
defaultQueue: default
queues:
  - name: default
    pendingTimeoutSeconds: 1
"""
HOSTNAME = "kubernetes.io/hostname"


def affinity(*expressions):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}}


@pytest.fixture
async def client(control_plane, k8s_namespace, sim_nodes, core_v1, stack_factory, client, tmp_path) -> Client:
    sim_nodes(("gpu-a", 1, "A100"), ("gpu-b", 1, "A100"), ("gpu-taint", 2, "A100"))
    taint = {"spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}}
    await asyncio.to_thread(core_v1.patch_node, "gpu-taint", taint)
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=path)
    return client


async def test_affinity_and_taints_decide_where_an_op_is_admitted(client, events):
    nowhere = await client.submit(op("nowhere").gpus(1).affinity(affinity(
        {"key": "zone", "operator": "In", "values": ["mars"]})).build())
    rejected = await events.expect(OperationRejected, nowhere, timeout=30)
    assert rejected.reason == "unfittable" and "zone In [mars]" in rejected.message

    not_a = affinity({"key": HOSTNAME, "operator": "NotIn", "values": ["gpu-a"]})
    first = await client.submit(op("first").gpus(1).runs("sleep 30").affinity(not_a).build())
    running = await events.expect(OperationRunning, first, timeout=30)
    assert running.node == "gpu-b"  # gpu-a is excluded, gpu-taint is not tolerated: kube-scheduler agrees

    second = await client.submit(op("second").gpus(1).runs("sleep 30").affinity(not_a).build())
    # 3 GPUs are free, none where its pod may go
    await eventually(lambda: waiting_on(client, second, "no_capacity"), "second to wait for capacity", timeout=20)
    assert not events.of(second, OperationAdmitted)

    tolerant = await client.submit(op("tolerant").gpus(2).runs("sleep 1").affinity(not_a)
                                   .toleration(key="dedicated", operator="Equal", value="ml", effect="NoSchedule")
                                   .build())
    assert (await events.expect(OperationRunning, tolerant, timeout=30)).node == "gpu-taint"


async def test_a_pod_unschedulable_past_pending_timeout_is_requeued_with_the_scheduler_s_message(
        client, events):
    needs_ghost = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "ghost"}}, "topologyKey": HOSTNAME}]}}
    op_id = await client.submit(op("lonely").gpus(1).affinity(needs_ghost).build())
    await events.expect(OperationAdmitted, op_id, timeout=30)  # admission leaves pod affinity to kube-scheduler
    evicted = await events.expect(OperationEvicted, op_id, timeout=30)
    assert evicted.reason == "unschedulable" and evicted.attempt == 0
    assert "pod affinity" in evicted.message and "pendingTimeout" in evicted.message
    answer = await eventually(lambda: waiting_on(client, op_id, "backoff"), "a back-off", timeout=20)
    assert "pod affinity" in answer.reasons[0].message
