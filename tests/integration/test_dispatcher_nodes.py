"""The dispatcher against a real control plane: it publishes node facts for admission, places an admitted
op's pod as admission said, and never creates the namespace an op names (an admin declares queue namespaces):
an op naming one that does not exist fails with the reason."""
from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable

import msgspec
import pytest
from kubernetes import client

from opsched.localcluster.nodes import NOT_READY_TAINTS, now_rfc3339
from opsched.localcluster.simkubelet import terminate
from opsched.proto import codec, subjects
from opsched.proto.cluster import ClusterEvent, NodeObserved, NodeRemoved
from opsched.proto.events import OperationAdmitted, OperationDispatched, OperationFailed
from opsched.rules.podspec import ANNOTATION_FLAVORS, LABEL_BORROWING
from tests.builders import GPU, GPU_PRODUCT, admitted, op, queues_configured

pytestmark = pytest.mark.integration


class ClusterLog:
    """Every cluster fact published while it listens (the stream itself keeps only the latest)."""

    def __init__(self, bus) -> None:
        self.bus = bus
        self.seen: list[ClusterEvent] = []
        self._changed = asyncio.Condition()
        self._sub = None

    async def start(self) -> "ClusterLog":
        self._sub = await self.bus.follow(subjects.CLUSTER_STREAM, subjects.CLUSTER_ALL, self._on)
        return self

    async def _on(self, data: bytes, _seq: int) -> None:
        async with self._changed:
            self.seen.append(codec.decode_cluster(data))
            self._changed.notify_all()

    def latest(self) -> dict[str, ClusterEvent]:
        return {e.node: e for e in self.seen}

    async def expect(self, node: str, where: Callable[[ClusterEvent], bool], timeout: float = 20.0) -> ClusterEvent:
        def found() -> ClusterEvent | None:
            event = self.latest().get(node)
            return event if event is not None and where(event) else None
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: found() is not None), timeout)
            except asyncio.TimeoutError:
                raise AssertionError(f"no matching fact for node {node} within {timeout}s; "
                                     f"latest: {self.latest().get(node)!r}") from None
        return found()  # type: ignore[return-value]

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()


@pytest.fixture
async def cluster(bus):
    log = await ClusterLog(bus).start()
    yield log
    await log.stop()


def ready_with_gpus(count: str) -> Callable[[ClusterEvent], bool]:
    """The node as sim_nodes leaves it: Ready, its GPUs allocatable, the not-ready taint cleared."""
    return lambda e: (isinstance(e, NodeObserved) and e.schedulable and e.allocatable.get(GPU) == count
                      and not [t for t in e.taints if t["key"] in NOT_READY_TAINTS])


async def stored_facts(bus) -> dict[str, ClusterEvent]:
    return {e.node: e for e in map(codec.decode_cluster,
                                   await bus.read_all(subjects.CLUSTER_STREAM, subjects.CLUSTER_ALL))}


async def test_node_facts_are_published_and_a_deleted_node_is_removed(
        stack_factory, control_plane, k8s_namespace, sim_nodes, core_v1, bus, cluster):
    await stack_factory(names=("dispatcher",), kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace)
    await asyncio.to_thread(sim_nodes, ("gpu-h100-0", 2, "H100"))
    a100_kubelet = await asyncio.to_thread(sim_nodes, ("gpu-a100-0", 4, "A100"))

    h100 = await cluster.expect("gpu-h100-0", ready_with_gpus("2"))
    a100 = await cluster.expect("gpu-a100-0", ready_with_gpus("4"))
    assert h100.labels[GPU_PRODUCT] == "H100"
    assert a100.labels[GPU_PRODUCT] == "A100"
    stored = await stored_facts(bus)
    assert stored["gpu-h100-0"] == h100 and stored["gpu-a100-0"] == a100  # the latest per node

    await asyncio.to_thread(terminate, a100_kubelet)  # decommissioned: its kubelet would re-register it
    await asyncio.to_thread(core_v1.delete_node, "gpu-a100-0")
    removed = await cluster.expect("gpu-a100-0", lambda e: isinstance(e, NodeRemoved))
    assert removed.node == "gpu-a100-0"
    assert isinstance((await stored_facts(bus))["gpu-a100-0"], NodeRemoved)
    assert isinstance(cluster.latest()["gpu-h100-0"], NodeObserved)


async def test_a_heartbeat_publishes_nothing_a_label_change_publishes_once(
        stack_factory, control_plane, k8s_namespace, sim_nodes, core_v1, cluster):
    await stack_factory(names=("dispatcher",), kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace)
    await asyncio.to_thread(sim_nodes, ("gpu-quiet-0", 1, "T4"))
    await cluster.expect("gpu-quiet-0", ready_with_gpus("1"))
    before = len(cluster.seen)

    heartbeat = {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now_rfc3339()}
    for _ in range(3):  # what a kubelet writes every few seconds: the node changes, its facts do not
        await asyncio.to_thread(core_v1.patch_node_status, "gpu-quiet-0", {"status": {"conditions": [heartbeat]}})
    await asyncio.to_thread(core_v1.patch_node, "gpu-quiet-0", {"metadata": {"labels": {"pool": "spot"}}})
    # watch events arrive in order: once the label is published, the heartbeats were seen before it
    await cluster.expect("gpu-quiet-0", lambda e: isinstance(e, NodeObserved) and e.labels.get("pool") == "spot")
    assert [e.labels.get("pool") for e in cluster.seen[before:] if e.node == "gpu-quiet-0"] == ["spot"]


async def test_an_admitted_op_gets_its_pod_placed_and_one_in_a_missing_namespace_fails_without_creating_it(
        stack_factory, control_plane, k8s_namespace, core_v1, bus, events):
    missing, lost = f"ns-{secrets.token_hex(4)}", f"nsop-{secrets.token_hex(3)}"
    # admission's configuration, which the dispatcher checks admitted events against: a queue in a missing namespace
    await bus.publish(queues_configured(f"queues:\n  - name: default\n  - name: lost\n    namespace: {missing}\n"))
    await stack_factory(names=("dispatcher",), kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace)
    ns, op_id = k8s_namespace, f"nsop-{secrets.token_hex(3)}"
    spec = op("train").gpus(1, product="T4").command("sh", "-c", "sleep 30").build()
    event: OperationAdmitted = msgspec.structs.replace(
        admitted(spec, op_id=op_id, namespace=ns), flavors={GPU: "a100"},
        node_selector={GPU_PRODUCT: "A100"}, borrowing=True,
        tolerations=[{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}])
    await bus.publish(event)

    dispatched = await events.expect(OperationDispatched, op_id)
    assert (dispatched.namespace, dispatched.pod_name) == (ns, event.pod_name)
    try:
        pod = await asyncio.to_thread(core_v1.read_namespaced_pod, event.pod_name, ns)
        assert pod.spec.node_selector == {GPU_PRODUCT: "A100"}
        assert json.loads(pod.metadata.annotations[ANNOTATION_FLAVORS]) == {GPU: "a100"}
        assert pod.metadata.labels[LABEL_BORROWING] == "true"
        assert [(t.key, t.operator) for t in pod.spec.tolerations or []][:1] == [(GPU, "Exists")]
    finally:
        await asyncio.to_thread(_force_delete, core_v1, event.pod_name, ns)

    await bus.publish(admitted(spec, op_id=lost, queue="lost", namespace=missing))
    failed = await events.expect(OperationFailed, lost)
    assert failed.reason == "NamespaceRefused" and f"namespace {missing} does not exist" in failed.message
    with pytest.raises(client.ApiException) as raised:
        await asyncio.to_thread(core_v1.read_namespace, missing)
    assert raised.value.status == 404


def _force_delete(core: client.CoreV1Api, name: str, ns: str) -> None:
    try:
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
