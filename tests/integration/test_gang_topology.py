"""A gang on the real control plane, kept in one topology domain and given its rendezvous: admission places its
pods within the one rack that can take them all (the flavor's ``topologyKey``), kube-scheduler binds them there
(each pod prefers its node), the dispatcher creates a headless Service with the pods that names each of them
``<role>-<i>``, every pod gets its kind's env (PyTorch's MASTER_ADDR/..., a tfjob's TF_CONFIG, an xgbjob's, an
mpijob's hostfile, whose launcher starts once its workers run), and the Service (and hostfile) go with the pods."""
from __future__ import annotations

import asyncio
import json

import msgspec
import pytest
from kubernetes.client.rest import ApiException

from opsched.proto.events import OperationAdmitted, OperationRunning, OperationStopped, OperationSucceeded
from opsched.proto.spec import ReplicaGroup
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
    assert (main.spec.hostname, main.spec.subdomain) == ("main-0", service_name)
    ranks = {}
    for pod in listed:
        env = {e.name: e.value for e in pod.spec.containers[0].env}
        assert env["MASTER_ADDR"] == f"main-0.{service_name}" and env["WORLD_SIZE"] == "3"
        ranks[pod.metadata.name] = env["RANK"]
    assert ranks[admitted.pod_name] == "0" and sorted(ranks.values()) == ["0", "1", "2"]
    service = await asyncio.to_thread(core_v1.read_namespaced_service, service_name, k8s_namespace)
    assert service.spec.cluster_ip == "None" and service.spec.publish_not_ready_addresses
    assert service.spec.selector == {"app.kubernetes.io/managed-by": "opsched", "opsched.io/op-id": gang,
                                     "opsched.io/attempt": "0"}  # every pod of the attempt: each has its DNS name

    await cluster.stop(gang)
    await events.expect(OperationStopped, gang, timeout=30)

    async def service_gone() -> bool:
        try:
            await asyncio.to_thread(core_v1.read_namespaced_service, service_name, k8s_namespace)
        except ApiException as exc:
            return exc.status == 404
        return False
    await eventually(service_gone, "the gang's Service to be deleted with its pods", timeout=30)


def kind_of(kind: str, main: str, *groups: tuple[str, int, str], **fields):
    """A gang of ``kind``: its main pod running ``main``, each (role, count, script) group its own script."""
    spec = op(kind).gpus(1, product="A100").runs(main).build()
    replicas = [ReplicaGroup(name=role, count=count, container=msgspec.structs.replace(
        spec.container, command=["sh", "-c", script])) for role, count, script in groups]
    return msgspec.structs.replace(spec, run_kind=kind, replicas=replicas, **fields)


async def test_a_tfjob_an_mpijob_and_an_xgbjob_run_to_success_each_pod_with_its_kind_s_env_and_dns_name(
        cluster, events, core_v1, k8s_namespace):
    pods = {}

    async def started(op_id: str) -> None:
        admitted = await events.expect(OperationAdmitted, op_id, timeout=30)
        await events.expect(OperationRunning, op_id, timeout=60)
        listed = await asyncio.to_thread(lambda: core_v1.list_namespaced_pod(
            k8s_namespace, label_selector=f"opsched.io/op-id={op_id}").items)
        assert {p.spec.subdomain for p in listed} == {rendezvous.service_name(admitted.pod_name)}
        pods[op_id] = {p.spec.hostname: p for p in listed}
    tf = await cluster.submit(kind_of("tfjob", "sleep 4", ("worker", 2, "sleep 30")))  # rack r2: 3 of its 4 GPUs
    xgb = await cluster.submit(kind_of("xgbjob", "sleep 4", ("worker", 1, "sleep 30")))  # rack r1: its 2 GPUs
    for op_id in (tf, xgb):
        await started(op_id)

    def env(op_id: str, host: str) -> dict[str, str]:
        return {e.name: e.value for e in pods[op_id][host].spec.containers[0].env}
    tf_service = rendezvous.service_name(f"op-{tf}-0")
    cluster_spec = {"chief": [f"chief-0.{tf_service}.{k8s_namespace}.svc:2222"],
                    "worker": [f"worker-{i}.{tf_service}.{k8s_namespace}.svc:2222" for i in range(2)]}
    assert sorted(pods[tf]) == ["chief-0", "worker-0", "worker-1"]
    for host in pods[tf]:
        role, index = host.rsplit("-", 1)
        assert json.loads(env(tf, host)["TF_CONFIG"]) == {
            "cluster": cluster_spec, "task": {"type": role, "index": int(index)}, "environment": "cloud"}
    xgb_service = rendezvous.service_name(f"op-{xgb}-0")
    assert [(env(xgb, h)["MASTER_ADDR"], env(xgb, h)["RANK"]) for h in ("master-0", "worker-0")] == [
        (f"master-0.{xgb_service}", "0"), (f"master-0.{xgb_service}", "1")]

    for op_id in (tf, xgb):
        await events.expect(OperationSucceeded, op_id, timeout=60)

    mpi = await cluster.submit(kind_of("mpijob", "sleep 2", ("worker", 2, "sleep 60"), slots_per_worker=2,
                                       clean_pod_policy="All"))
    await started(mpi)
    mpi_service = rendezvous.service_name(f"op-{mpi}-0")
    launcher, workers = pods[mpi]["launcher-0"], [pods[mpi][f"worker-{i}"] for i in range(2)]
    assert launcher.metadata.creation_timestamp >= max(w.status.start_time for w in workers)  # after they ran
    assert env(mpi, "launcher-0")["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    hostfile = await asyncio.to_thread(core_v1.read_namespaced_config_map, f"{mpi_service}-hostfile", k8s_namespace)
    assert hostfile.data == {"hostfile": "".join(f"worker-{i}.{mpi_service}.{k8s_namespace}.svc slots=2\n"
                                                 for i in range(2))}
    await events.expect(OperationSucceeded, mpi, timeout=60)

    async def hostfile_gone() -> bool:  # cleanPodPolicy All: every pod deleted, then its rendezvous
        try:
            await asyncio.to_thread(core_v1.read_namespaced_config_map, f"{mpi_service}-hostfile", k8s_namespace)
        except ApiException as exc:
            return exc.status == 404
        return False
    await eventually(hostfile_gone, "the mpijob's hostfile to be deleted with its pods", timeout=30)
