"""The dispatcher's reconciler on the real control plane: ops survive a kube-apiserver crash and restart
(kill -9, started again with the same flags and etcd), and an attempt whose pod was deleted while the
dispatcher was down is reported instead of staying ``running`` forever."""
from __future__ import annotations

import asyncio
import secrets

import pytest

from opsched.proto.events import OperationAdmitted, OperationFailed, OperationRunning, OperationSucceeded
from tests.builders import op
from tests.kube import pod_gone

pytestmark = pytest.mark.integration

QUEUES = """
defaultQueue: default
retryBackoff: {baseSeconds: 0, factor: 2, maxSeconds: 0}
queues:
  - name: default
"""
OUTAGE_S = 6.0
FAST = dict(reconcile_interval_s=1.0, reconcile_grace_s=2.0)


@pytest.fixture
def queues_file(tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    return path


def spec(name: str, script: str, retries: int = 0):
    return op(name).gpus(1).runs(script).max_retries(retries).build()


async def pods_by_op(core_v1, namespace: str) -> dict[str, list[str]]:
    pods = (await asyncio.to_thread(core_v1.list_namespaced_pod, namespace)).items
    out: dict[str, list[str]] = {}
    for pod in pods:
        out.setdefault(pod.metadata.labels["opsched.io/op-id"], []).append(pod.metadata.name)
    return out


async def test_ops_running_and_admitted_while_the_api_server_restarts_all_finish_with_one_pod_per_attempt(
        control_plane, k8s_namespace, sim_nodes, stack_factory, client, events, core_v1, queues_file):
    sim_nodes((f"gpu-rec-{secrets.token_hex(2)}", 6, "A100"))
    # max_deliver=2: an admitted handled while the API is down is dead-lettered at once; only the
    # reconciler can give it its pod
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=queues_file,
                        max_deliver=2, **FAST)
    before = [await client.submit(spec(f"before-{i}", "sleep 3")) for i in range(3)]
    for op_id in before:
        await events.expect(OperationRunning, op_id, timeout=30)

    control_plane.kill()
    try:
        during = [await client.submit(spec(f"during-{i}", "sleep 1")) for i in range(3)]
        for op_id in during:
            await events.expect(OperationAdmitted, op_id)
        await asyncio.sleep(OUTAGE_S)  # the outage itself: the running pods' run time passes meanwhile
    finally:
        control_plane.revive()  # on this thread (see ControlPlane.kill); blocks until /readyz says ok

    ends = [await events.expect(OperationSucceeded, op_id, timeout=45) for op_id in before + during]
    assert all(end.attempt == 0 for end in ends)
    pods = await pods_by_op(core_v1, k8s_namespace)
    assert {op_id: sorted(pods.get(op_id, [])) for op_id in before + during} == {
        op_id: [f"op-{op_id}-0"] for op_id in before + during}


async def test_a_pod_deleted_while_the_dispatcher_was_down_is_reported_failed(
        control_plane, k8s_namespace, sim_nodes, stack_factory, client, events, core_v1, queues_file):
    sim_nodes((f"gpu-rec-{secrets.token_hex(2)}", 1, "A100"))
    await stack_factory(names=("admission", "cost", "cache"), namespace=k8s_namespace, queues_file=queues_file)
    dispatcher = await stack_factory(names=("dispatcher",), kubeconfig=control_plane.kubeconfig,
                                     namespace=k8s_namespace, **FAST)
    op_id = await client.submit(spec("doomed", "sleep 60"))
    running = await events.expect(OperationRunning, op_id, timeout=30)

    await dispatcher.close()
    await asyncio.to_thread(core_v1.delete_namespaced_pod, running.pod_name, k8s_namespace, grace_period_seconds=0)
    assert await pod_gone(core_v1, k8s_namespace, running.pod_name)
    await stack_factory(names=("dispatcher",), kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, **FAST)

    failed = await events.expect(OperationFailed, op_id, timeout=20)
    assert (failed.attempt, failed.reason) == (0, "PodDeleted")
    assert "not watching" in failed.message
