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
from proto.events import (
    OperationAdmitted, OperationDispatched, OperationEvicted, OperationFailed, OperationPreempted, OperationRunning,
    OperationStopped, OperationSucceeded, PreemptRequested, StopRequested,
)
from proto.naming import pod_name, pod_names
from proto.spec import OpSpec, ReplicaGroup
from services.dispatcher.podspec import (
    ANNOTATION_STOPPED, LABEL_GANG_SIZE, LABEL_REPLICA, attempt_selector,
)
from tests.builders import admitted, op

pytestmark = pytest.mark.integration


def gang_spec(product: str, *, main: str, workers: str, count: int = 2) -> OpSpec:
    """A master and ``count`` workers, one GPU of ``product`` each."""
    spec = op("dist").gpus(1, product=product).runs(main).build()
    worker = op("worker").gpus(1).runs(workers).build().container
    return msgspec.structs.replace(spec, replicas=[ReplicaGroup(name="worker", count=count, container=worker)])


async def start_dispatcher(stack_factory, control_plane, namespace: str, **settings):
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
    await start_dispatcher(stack_factory, control_plane, k8s_namespace)
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
    await start_dispatcher(stack_factory, control_plane, k8s_namespace, gang_timeout_s=3)
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
    await start_dispatcher(stack_factory, control_plane, k8s_namespace)
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
    await start_dispatcher(stack_factory, control_plane, k8s_namespace)
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

async def _running_op_on_a_dead_kubelet(stack_factory, control_plane, namespace, sim_nodes, bus, events,
                                        product: str, prefix: str):
    """An op running on a node whose kubelet then dies: its deleted pods stay terminating."""
    first = await start_dispatcher(stack_factory, control_plane, namespace)
    kubelet = await asyncio.to_thread(sim_nodes, (f"gpu-{prefix}-0", 1, product))
    event = await admit(bus, op(prefix).gpus(1, product=product).runs("sleep 120").build(), namespace, prefix)
    await events.expect(OperationRunning, event.op_id, timeout=30)
    await asyncio.to_thread(terminate, kubelet)
    return first, event


async def _sentinel(bus, events, sim_nodes, namespace: str, product: str) -> None:
    """An op that runs after everything before it happened: once it runs, the watcher saw the rest."""
    await asyncio.to_thread(sim_nodes, (f"gpu-sentinel-{product.lower()}", 1, product))
    sentinel = await admit(bus, op("sentinel").gpus(1, product=product).runs("sleep 30").build(),
                           namespace, "sentinel")
    await events.expect(OperationRunning, sentinel.op_id, timeout=30)


async def test_a_pod_stopped_before_a_restart_and_deleted_after_it_is_no_failure(
        stack_factory, control_plane, k8s_namespace, sim_nodes, core_v1, bus, events, wait_for):
    first, event = await _running_op_on_a_dead_kubelet(stack_factory, control_plane, k8s_namespace, sim_nodes,
                                                       bus, events, "RSTOP", "rstop")
    await bus.publish(StopRequested(op_id=event.op_id, at=event.at, attempt=0, pod_name=event.pod_name,
                                    namespace=k8s_namespace))
    await events.expect(OperationStopped, event.op_id, timeout=30)
    (pod,) = await asyncio.to_thread(pods_of, core_v1, event)
    assert pod.metadata.deletion_timestamp is not None and pod.metadata.annotations[ANNOTATION_STOPPED] == "true"

    await first.close()
    await start_dispatcher(stack_factory, control_plane, k8s_namespace)  # remembers nothing
    await asyncio.to_thread(_confirm_deletion, core_v1, event.pod_name, k8s_namespace)  # as a kubelet would
    await _sentinel(bus, events, sim_nodes, k8s_namespace, "RSTOP")
    assert events.of(event.op_id, OperationFailed) == []


async def test_a_preemption_started_before_a_restart_is_reported_after_it(
        stack_factory, control_plane, k8s_namespace, sim_nodes, core_v1, bus, events, wait_for):
    first, event = await _running_op_on_a_dead_kubelet(stack_factory, control_plane, k8s_namespace, sim_nodes,
                                                       bus, events, "RPRE", "rpre")
    await bus.publish(PreemptRequested(op_id=event.op_id, at=event.at, attempt=0, pod_names=[event.pod_name],
                                       namespace=k8s_namespace, preemptor="urgent-op", reason="reclaim"))
    await poll(wait_for, lambda: all(p.metadata.deletion_timestamp for p in pods_of(core_v1, event)),
               "the victim's pod terminating")
    assert events.of(event.op_id, OperationPreempted) == []  # not yet: its pod is not gone

    await first.close()
    await start_dispatcher(stack_factory, control_plane, k8s_namespace)
    await asyncio.to_thread(_confirm_deletion, core_v1, event.pod_name, k8s_namespace)
    preempted = await events.expect(OperationPreempted, event.op_id, timeout=30)
    assert (preempted.preemptor, preempted.reason) == ("urgent-op", "reclaim")
    assert events.of(event.op_id, OperationFailed) == []


def _confirm_deletion(core: client.CoreV1Api, name: str, namespace: str) -> None:
    try:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
