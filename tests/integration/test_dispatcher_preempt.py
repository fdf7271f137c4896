"""The dispatcher alone against a real control plane: gangs start all-or-nothing (or are evicted
after the gang timeout), preemption and stop delete pods on purpose, and neither is ever a failure.

The tests publish what admission would (``admitted``, ``preempt_requested``, ``stop_requested``)
and wait on the events the dispatcher publishes; only API-server conditions are polled."""
from __future__ import annotations

import asyncio
import secrets

import msgspec
import pytest
from kubernetes import client

from opsched.localcluster.simkubelet import terminate
from opsched.proto.events import (
    OperationAdmitted,
    OperationDispatched,
    OperationEvicted,
    OperationFailed,
    OperationPreempted,
    OperationRunning,
    OperationStopped,
    OperationSucceeded,
    PreemptRequested,
    StopRequested,
)
from opsched.proto.spec import OpSpec, ReplicaGroup
from opsched.rules.naming import pod_name, pod_names
from opsched.rules.podspec import (
    ANNOTATION_STOPPED,
    LABEL_GANG_SIZE,
    LABEL_REPLICA,
    attempt_selector,
)
from tests.builders import admitted, op, queues_configured

pytestmark = pytest.mark.integration


def gang_spec(product: str, *, main: str, workers: str, count: int = 2) -> OpSpec:
    """A master and ``count`` workers, one GPU of ``product`` each."""
    spec = op("dist").gpus(1, product=product).runs(main).build()
    worker = op("worker").gpus(1).runs(workers).build().container
    return msgspec.structs.replace(spec, replicas=[ReplicaGroup(name="worker", count=count, container=worker)])


async def start_dispatcher(stack_factory, control_plane, namespace: str, bus, **settings):
    """The dispatcher alone, and the queue configuration it checks the admitted events against (admission's)."""
    await bus.publish(queues_configured("queues:\n  - name: default\n"))
    return await stack_factory(names=("dispatcher",), kubeconfig=control_plane.kubeconfig, namespace=namespace,
                               **settings)


async def admit(bus, spec: OpSpec, namespace: str, prefix: str) -> OperationAdmitted:
    """What admission publishes when it admits an op (``services/admission/cycle.py``)."""
    op_id = f"{prefix}-{secrets.token_hex(3)}"
    event = admitted(spec, op_id=op_id, namespace=namespace, pod_name=pod_name(op_id, 0))
    await bus.publish(event)
    return event


def phases(core: client.CoreV1Api, event: OperationAdmitted) -> dict[str, str]:
    pods = core.list_namespaced_pod(event.namespace, label_selector=attempt_selector(event.op_id, event.attempt))
    return {p.metadata.name: p.status.phase for p in pods.items if p.metadata.deletion_timestamp is None}


def pods_of(core: client.CoreV1Api, event: OperationAdmitted) -> list[client.V1Pod]:
    return core.list_namespaced_pod(event.namespace,
                                    label_selector=attempt_selector(event.op_id, event.attempt)).items


async def poll(wait_for, predicate, message: str, timeout: float = 30.0):
    """Poll an API-server condition off the event loop (the dispatcher runs on it)."""
    return await asyncio.to_thread(wait_for, predicate, timeout=timeout, interval=0.1, message=message)


async def test_a_gang_runs_only_once_all_its_pods_run_and_succeeds_with_its_main_pod(
        stack_factory, control_plane, k8s_namespace, sim_nodes, core_v1, bus, events, wait_for):
    await start_dispatcher(stack_factory, control_plane, k8s_namespace, bus)
    await asyncio.to_thread(sim_nodes, ("gpu-gang-a0", 2, "GANGA"))
    event = await admit(bus, gang_spec("GANGA", main="sleep 15", workers="sleep 30"), k8s_namespace, "gang")
    names = pod_names(event.op_id, 0, event.spec)

    dispatched = await events.expect(OperationDispatched, event.op_id)
    assert dispatched.pod_name == names[0]
    pods = {p.metadata.name: p for p in await asyncio.to_thread(pods_of, core_v1, event)}
    assert sorted(pods) == sorted(names)
    assert {p.metadata.labels[LABEL_REPLICA] for p in pods.values()} == {"main", "worker-0", "worker-1"}
    assert {p.metadata.labels[LABEL_GANG_SIZE] for p in pods.values()} == {"3"}

    # room for two: two pods run, the third waits for a node, and the gang is not running
    await poll(wait_for, lambda: sorted(phases(core_v1, event).values()) == ["Pending", "Running", "Running"],
               "two of the three pods running")
    assert events.of(event.op_id, OperationRunning) == []

    await asyncio.to_thread(sim_nodes, ("gpu-gang-a1", 1, "GANGA"))
    running = await events.expect(OperationRunning, event.op_id, timeout=30)
    assert running.pod_name == names[0]
    assert set((await asyncio.to_thread(phases, core_v1, event)).values()) == {"Running"}  # all three, now

    done = await events.expect(OperationSucceeded, event.op_id, timeout=60)
    assert done.pod_name == names[0]
    assert events.of(event.op_id, OperationFailed) == []


async def test_a_gang_without_room_for_all_its_pods_is_evicted_after_the_gang_timeout(
        stack_factory, control_plane, k8s_namespace, sim_nodes, core_v1, bus, events, wait_for):
    await start_dispatcher(stack_factory, control_plane, k8s_namespace, bus, gang_timeout_s=3)
    await asyncio.to_thread(sim_nodes, ("gpu-gang-b0", 2, "GANGB"))
    event = await admit(bus, gang_spec("GANGB", main="sleep 60", workers="sleep 60"), k8s_namespace, "stuck")

    evicted = await events.expect(OperationEvicted, event.op_id, timeout=30)
    assert evicted.reason == "gang_timeout"
    assert evicted.message == "2/3 pods running after 3s"
    assert evicted.retry_after_s == 10.0  # attempt 0: the base backoff
    await poll(wait_for, lambda: not pods_of(core_v1, event), "every pod of the gang deleted")
    assert events.of(event.op_id, OperationRunning) == []
    assert events.of(event.op_id, OperationFailed) == []


async def test_preemption_deletes_the_victims_pods_and_reports_the_preemptor_not_a_failure(
        stack_factory, control_plane, k8s_namespace, sim_nodes, core_v1, bus, events, wait_for):
    await start_dispatcher(stack_factory, control_plane, k8s_namespace, bus)
    await asyncio.to_thread(sim_nodes, ("gpu-gang-c0", 2, "GANGC"))
    event = await admit(bus, gang_spec("GANGC", main="sleep 60", workers="sleep 60", count=1),
                        k8s_namespace, "victim")
    await events.expect(OperationRunning, event.op_id, timeout=30)

    await bus.publish(PreemptRequested(
        op_id=event.op_id, at=event.at, attempt=0, pod_names=pod_names(event.op_id, 0, event.spec),
        namespace=k8s_namespace, preemptor="urgent-op", reason="within_queue", message="priority 100 > 0"))
    preempted = await events.expect(OperationPreempted, event.op_id, timeout=30)
    assert (preempted.preemptor, preempted.reason, preempted.message) == ("urgent-op", "within_queue",
                                                                          "priority 100 > 0")
    assert await asyncio.to_thread(pods_of, core_v1, event) == []  # reported once every pod is gone
    assert events.of(event.op_id, OperationFailed) == []  # the deletions came before the report


async def test_a_stopped_op_has_its_pod_deleted_and_is_stopped_not_failed(
        stack_factory, control_plane, k8s_namespace, sim_nodes, core_v1, bus, events, wait_for):
    await start_dispatcher(stack_factory, control_plane, k8s_namespace, bus)
    await asyncio.to_thread(sim_nodes, ("gpu-gang-d0", 2, "GANGD"))
    event = await admit(bus, op("stoppable").gpus(1, product="GANGD").runs("sleep 60").build(),
                        k8s_namespace, "stop")
    await events.expect(OperationRunning, event.op_id, timeout=30)
    seen = await asyncio.to_thread(pods_of, core_v1, event)
    assert [p.metadata.annotations.get(ANNOTATION_STOPPED) for p in seen] == [None]

    await bus.publish(StopRequested(op_id=event.op_id, at=event.at, attempt=0, pod_name=event.pod_name,
                                    namespace=k8s_namespace))
    await events.expect(OperationStopped, event.op_id, timeout=30)
    await poll(wait_for, lambda: not pods_of(core_v1, event), "the stopped pod deleted")

    # a sentinel op that runs after the deletion: the watcher has seen the deletion once it reports it
    sentinel = await admit(bus, op("sentinel").gpus(1, product="GANGD").runs("sleep 30").build(),
                           k8s_namespace, "sentinel")
    await events.expect(OperationRunning, sentinel.op_id, timeout=30)
    assert events.of(event.op_id, OperationFailed) == []


# ---- after a restart: what the API holds is enough -------------------------------------------------------

class Restart:
    """An op running on a node whose kubelet then dies (its deleted pods stay terminating until
    ``confirm_deletion``), a dispatcher to restart, and sentinel ops on a live node of their own: once
    a sentinel runs, the new dispatcher's watcher has seen everything that happened before it."""

    def __init__(self, stack_factory, control_plane, namespace, sim_nodes, core, bus, events, prefix: str):
        self.args = (stack_factory, control_plane, namespace, bus)
        self.namespace, self.sim_nodes, self.core, self.bus, self.events = namespace, sim_nodes, core, bus, events
        self.prefix, self.product = prefix, prefix.upper()
        self.stack = None

    async def running_victim(self) -> OperationAdmitted:
        self.stack = await start_dispatcher(*self.args)
        kubelet = await asyncio.to_thread(self.sim_nodes, (f"gpu-{self.prefix}-0", 1, self.product))
        await asyncio.to_thread(self.sim_nodes, (f"gpu-{self.prefix}-sentinel", 2, self.product + "S"))
        spec = op(self.prefix).gpus(1, product=self.product).runs("sleep 120").build()
        victim = await admit(self.bus, spec, self.namespace, self.prefix)
        await self.events.expect(OperationRunning, victim.op_id, timeout=30)
        await asyncio.to_thread(terminate, kubelet)
        return victim

    async def restart(self) -> None:
        await self.stack.close()
        self.stack = await start_dispatcher(*self.args)  # remembers nothing

    async def sentinel(self) -> None:
        spec = op("sentinel").gpus(1, product=self.product + "S").runs("sleep 60").build()
        event = await admit(self.bus, spec, self.namespace, "sentinel")
        await self.events.expect(OperationRunning, event.op_id, timeout=30)

    async def confirm_deletion(self, victim: OperationAdmitted) -> None:
        """What the kubelet would do once the containers ended."""
        await asyncio.to_thread(_confirm_deletion, self.core, victim.pod_name, victim.namespace)


@pytest.fixture
def restart(stack_factory, control_plane, k8s_namespace, sim_nodes, core_v1, bus, events):
    return lambda prefix: Restart(stack_factory, control_plane, k8s_namespace, sim_nodes, core_v1, bus, events,
                                  prefix)


async def test_a_pod_stopped_before_a_restart_and_deleted_after_it_is_no_failure(restart, core_v1, bus, events):
    r = restart("rstop")
    victim = await r.running_victim()
    await bus.publish(StopRequested(op_id=victim.op_id, at=victim.at, attempt=0, pod_name=victim.pod_name,
                                    namespace=victim.namespace))
    await events.expect(OperationStopped, victim.op_id, timeout=30)
    (pod,) = await asyncio.to_thread(pods_of, core_v1, victim)
    assert pod.metadata.deletion_timestamp is not None and pod.metadata.annotations[ANNOTATION_STOPPED] == "true"

    await r.restart()
    await r.sentinel()  # the new watcher listed the terminating pod
    await r.confirm_deletion(victim)
    await r.sentinel()  # ... and saw it deleted
    assert events.of(victim.op_id, OperationFailed) == []


async def _preempt_while_kubelet_is_dead(r: Restart, core_v1, bus, events, wait_for) -> OperationAdmitted:
    victim = await r.running_victim()
    await bus.publish(PreemptRequested(op_id=victim.op_id, at=victim.at, attempt=0, pod_names=[victim.pod_name],
                                       namespace=victim.namespace, preemptor="urgent-op", reason="reclaim"))
    await poll(wait_for, lambda: all(p.metadata.deletion_timestamp for p in pods_of(core_v1, victim)),
               "the victim's pod terminating")
    assert events.of(victim.op_id, OperationPreempted) == []  # not yet: its pod is not gone
    return victim


async def test_a_preemption_whose_pods_went_while_the_dispatcher_was_down_is_reported_after_its_restart(
        restart, core_v1, bus, events, wait_for):
    r = restart("rpdown")
    victim = await _preempt_while_kubelet_is_dead(r, core_v1, bus, events, wait_for)
    await r.stack.close()
    await r.confirm_deletion(victim)  # nobody watches: only the stream knows a preemption is pending
    r.stack = await start_dispatcher(*r.args)
    preempted = await events.expect(OperationPreempted, victim.op_id, timeout=30)
    assert (preempted.preemptor, preempted.reason) == ("urgent-op", "reclaim")
    assert events.of(victim.op_id, OperationFailed) == []


async def test_a_preemption_whose_pods_go_after_a_restart_is_reported_from_their_annotations(
        restart, core_v1, bus, events, wait_for):
    r = restart("rpafter")
    victim = await _preempt_while_kubelet_is_dead(r, core_v1, bus, events, wait_for)
    await r.restart()
    await r.sentinel()  # the new watcher listed the terminating pod
    await r.confirm_deletion(victim)
    preempted = await events.expect(OperationPreempted, victim.op_id, timeout=30)
    assert (preempted.preemptor, preempted.reason) == ("urgent-op", "reclaim")
    assert events.of(victim.op_id, OperationFailed) == []


def _confirm_deletion(core: client.CoreV1Api, name: str, namespace: str) -> None:
    try:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
