"""A gang on the real control plane, kept in one topology domain and given its rendezvous: admission places its
pods within the one rack that can take them all (the flavor's ``topologyKey``), kube-scheduler binds them there
(each pod prefers its node), the dispatcher creates a headless Service with the pods that names the main pod
``master``, every pod gets MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK, and the Service goes with the pods."""
from __future__ import annotations

import asyncio

import pytest
from kubernetes.client.rest import ApiException

from opsched.proto.events import OperationAdmitted, OperationRunning, OperationStopped
from opsched.rules import rendezvous
from tests.builders import op
from tests.waiting import eventually

pytestmark = pytest.mark.integration

RACK = "topology.example.com/rack"
QUEUES = f"""
defaultQueue: default
flavors:
  - {{name: a100, nodeLabels: {{nvidia.com/gpu.product: A100}}, topologyKey: {RACK}}}
queues:
  - name: default
    resources:
      - resource: nvidia.com/gpu
        flavors: [{{name: a100, nominal: 16}}]
"""
RACKS = {"rdzv-a": "r1", "rdzv-b": "r2", "rdzv-c": "r2"}


@pytest.fixture
async def cluster(control_plane, k8s_namespace, sim_nodes, core_v1, stack_factory, client, tmp_path):
    sim_nodes(*((name, 2, "A100") for name in RACKS))
    for name, rack in RACKS.items():
        await asyncio.to_thread(core_v1.patch_node, name, {"metadata": {"labels": {RACK: rack}}})
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    stack = await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=path)
    admission = stack.service("admission")

    async def racks_known() -> bool:
        nodes = admission.state.nodes
        return all(nodes.get(n) is not None and nodes[n].labels.get(RACK) == r for n, r in RACKS.items())
    await eventually(racks_known, "admission to know the racks", timeout=30)
    return client


async def test_a_gang_runs_within_one_rack_finds_its_master_and_its_service_goes_with_its_pods(
        cluster, events, core_v1, k8s_namespace):
    gang = await cluster.submit(op("ddp").gpus(1, product="A100").replicas("worker", 2).runs("sleep 60").build())
    admitted = await events.expect(OperationAdmitted, gang, timeout=30)
    assert sorted(admitted.preferred_hosts) == ["rdzv-b", "rdzv-b", "rdzv-c"]  # rack r2: 4 GPUs; r1 has 2
    await events.expect(OperationRunning, gang, timeout=60)

    def pods() -> list:
        return core_v1.list_namespaced_pod(k8s_namespace, label_selector=f"opsched.io/op-id={gang}").items
    listed = await asyncio.to_thread(pods)
    assert len(listed) == 3 and {p.spec.node_name for p in listed} <= {"rdzv-b", "rdzv-c"}
    main = next(p for p in listed if p.metadata.name == admitted.pod_name)
    service_name = rendezvous.service_name(admitted.pod_name)
    assert (main.spec.hostname, main.spec.subdomain) == ("master", service_name)
    ranks = {}
    for pod in listed:
        env = {e.name: e.value for e in pod.spec.containers[0].env}
        assert env["MASTER_ADDR"] == f"master.{service_name}" and env["WORLD_SIZE"] == "3"
        ranks[pod.metadata.name] = env["RANK"]
    assert ranks[admitted.pod_name] == "0" and sorted(ranks.values()) == ["0", "1", "2"]
    service = await asyncio.to_thread(core_v1.read_namespaced_service, service_name, k8s_namespace)
    assert service.spec.cluster_ip == "None" and service.spec.publish_not_ready_addresses
    assert service.spec.selector == {"app.kubernetes.io/managed-by": "opsched", "opsched.io/op-id": gang,
                                     "opsched.io/attempt": "0", "opsched.io/replica": "main"}

    await cluster.stop(gang)
    await events.expect(OperationStopped, gang, timeout=30)

    async def service_gone() -> bool:
        try:
            await asyncio.to_thread(core_v1.read_namespaced_service, service_name, k8s_namespace)
        except ApiException as exc:
            return exc.status == 404
        return False
    await eventually(service_gone, "the gang's Service to be deleted with its pods", timeout=30)
