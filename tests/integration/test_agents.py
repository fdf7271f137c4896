"""Agents on two real control planes: the session's cluster is the default agent's, a second one (its own etcd,
kube-apiserver, kube-scheduler and simulated kubelet) is agent ``agent-b``'s, each with its own dispatcher. Both
clusters have a node named ``twin-0``. A polyaxonfile with ``queue: agent-b/gpu`` runs its pod in the second
cluster; ops of a queue whose flavors span both fill the first cluster, then go to the second; a stop reaches the
dispatcher that runs the op; ``agent-c/gpu`` is refused naming the agents the queue runs on."""
from __future__ import annotations

import asyncio

import msgspec
import pytest
from kubernetes import client

from opsched.localcluster.controlplane import ControlPlane
from opsched.localcluster.launcher import spawn, terminate
from opsched.polyaxonfile import load_polyaxonfile
from opsched.proto.events import (
    OperationAdmitted,
    OperationFailed,
    OperationRejected,
    OperationRunning,
    OperationStopped,
    OperationSucceeded,
)
from tests.builders import op
from tests.waiting import eventually

pytestmark = pytest.mark.integration

QUEUES = """
defaultQueue: gpu
agents: [{name: agent-b, heartbeatTimeoutSeconds: 3, lostAfterSeconds: 6}]
flavors:
  - {name: home, nodeLabels: {nvidia.com/gpu.product: A100}}
  - {name: remote, nodeLabels: {nvidia.com/gpu.product: A100}, agent: agent-b}
queues:
  - name: gpu
    resources:
      - resource: nvidia.com/gpu
        flavors: [{name: home, nominal: 2}, {name: remote, nominal: 2}]
  - name: burst
    resources:
      - resource: nvidia.com/gpu
        flavors: [{name: remote, nominal: 2}, {name: home, nominal: 2}]
"""
FILE = """
version: 1.1
kind: component
name: remote-train
queue: {queue}
run:
  kind: job
  container:
    image: python:3.11-slim
    command: ["sh", "-c", "sleep 1"]
    resources: {{limits: {{nvidia.com/gpu: 1, memory: 1Gi}}}}
"""


@pytest.fixture(scope="module")
def second_cluster(tmp_path_factory):
    """Agent-b's cluster, shared by this module's tests (each has its own namespace there too)."""
    plane = ControlPlane(tmp_path_factory.mktemp("agent-b")).start()
    kubelet = spawn(plane.kubeconfig, [("twin-0", 2, "A100")], log_file=tmp_path_factory.mktemp("kubelet") / "log")
    try:
        yield plane
    finally:
        terminate(kubelet)
        plane.stop()


@pytest.fixture
async def agents(control_plane, second_cluster, k8s_namespace, sim_nodes, stack_factory, client, tmp_path):
    second_cluster.ensure_namespace(k8s_namespace)
    sim_nodes(("twin-0", 2, "A100"))
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    common = dict(namespace=k8s_namespace, pod_namespaces=k8s_namespace)
    stack = await stack_factory(kubeconfig=control_plane.kubeconfig, queues_file=path, **common)
    remote = await stack_factory(names=("dispatcher",), kubeconfig=second_cluster.kubeconfig, agent="agent-b",
                                 agent_heartbeat_s=0.5, **common)
    fold = stack.service("admission").state.fold

    async def both_known() -> bool:
        return {"twin-0", "agent-b/twin-0"} <= set(fold.nodes) and "agent-b" in fold.heartbeats
    await eventually(both_known, "admission to know both clusters' nodes and hear agent-b", timeout=30)
    client.remote_dispatcher = remote  # the test that silences agent-b stops it
    return client


def pod_in(plane: ControlPlane, namespace: str, name: str):
    with plane.api_client() as api:
        return client.CoreV1Api(api).read_namespaced_pod(name, namespace)


async def test_a_file_naming_agent_b_runs_its_pod_in_the_second_cluster(
        agents, events, second_cluster, k8s_namespace, tmp_path):
    path = tmp_path / "remote.yaml"
    path.write_text(FILE.format(queue="agent-b/gpu"))
    op_id = await agents.submit(load_polyaxonfile(path))
    admitted = await events.expect(OperationAdmitted, op_id, timeout=30)
    assert (admitted.agent, admitted.flavors) == ("agent-b", {"nvidia.com/gpu": "remote"})
    assert (await events.expect(OperationRunning, op_id, timeout=30)).node == "twin-0"
    await events.expect(OperationSucceeded, op_id, timeout=30)
    pod = await asyncio.to_thread(pod_in, second_cluster, k8s_namespace, admitted.pod_name)
    assert pod.spec.node_name == "twin-0" and pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"

    path.write_text(FILE.format(queue="agent-c/gpu"))
    refused = await agents.submit(load_polyaxonfile(path))
    rejected = await events.expect(OperationRejected, refused, timeout=30)
    assert rejected.reason == "agent_mismatch" and "runs on agent agent-b, the default agent" in rejected.message


async def test_a_queue_spanning_agents_fills_the_first_cluster_then_the_second_and_a_stop_reaches_it(
        agents, events, core_v1, k8s_namespace, second_cluster):
    first = await agents.submit(op("first").gpus(2, product="A100").runs("sleep 60").build())
    assert (await events.expect(OperationAdmitted, first, timeout=30)).agent == ""
    await events.expect(OperationRunning, first, timeout=30)
    second = await agents.submit(op("second").gpus(2, product="A100").runs("sleep 60").build())
    admitted = await events.expect(OperationAdmitted, second, timeout=30)
    assert admitted.agent == "agent-b"
    await events.expect(OperationRunning, second, timeout=30)
    here = await asyncio.to_thread(core_v1.list_namespaced_pod, k8s_namespace)
    assert [p.metadata.name for p in here.items] == [f"op-{first}-0"]  # the second's pod is not in this cluster
    await agents.stop(second)
    await events.expect(OperationStopped, second, timeout=30)

    async def gone() -> bool:
        try:
            await asyncio.to_thread(pod_in, second_cluster, k8s_namespace, admitted.pod_name)
        except client.ApiException as exc:
            return exc.status == 404
        return False
    await eventually(gone, "the stopped op's pod to leave the second cluster", timeout=30)
    await agents.stop(first)
    await events.expect(OperationStopped, first, timeout=30)


async def test_an_agent_that_goes_silent_gets_no_new_ops_and_its_running_op_is_retried_in_the_other_cluster(
        agents, events):
    spec = op("far").gpus(1, product="A100").runs("sleep 120").build()
    burst = await agents.submit(msgspec.structs.replace(spec, queue="burst"))
    first = await events.expect(OperationAdmitted, burst, timeout=30)
    assert first.agent == "agent-b"
    await events.expect(OperationRunning, burst, timeout=30)
    await agents.remote_dispatcher.close()  # agent-b's dispatcher goes away: no more heartbeats
    lost = await events.expect(OperationFailed, burst, timeout=30)
    assert lost.reason == "AgentLost" and lost.attempt == 0 and "agent agent-b silent since" in lost.message
    again = await events.expect(OperationAdmitted, burst, timeout=30, where=lambda e: e.attempt == 1)
    assert again.agent == ""  # retried where a dispatcher answers
    await events.expect(OperationRunning, burst, timeout=30, where=lambda e: e.attempt == 1)
    await agents.stop(burst)
