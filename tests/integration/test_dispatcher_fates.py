"""A stop or a preemption wins over an ``admitted``, across dispatcher replicas (issue 13, point 5).

The race, at handler level on a real nats-server and the real control plane, with two ``Dispatcher``
instances sharing the KV bucket of attempt fates: replica A handles a stop (or a preemption) while the
``admitted`` waits for its redelivery, and reports it (no pod yet); replica B then handles the redelivered
``admitted``, its table of attempts not knowing the stop yet (its fold lags). B creates the pod (it no longer
marks the attempt ``creating`` first: issue 36), reads the fate, deletes what it created and reports nothing:
the op ends ``stopped`` with no pod left."""
from __future__ import annotations

import asyncio
import secrets

import pytest

from opsched.bus.bus import Bus
from opsched.proto import subjects
from opsched.proto.events import OperationAdmitted, OperationPreempted, OperationStopped
from opsched.rules.naming import pod_name
from opsched.rules.podspec import attempt_selector
from opsched.services.dispatcher.service import Dispatcher
from opsched.services.runtime.service import Context
from tests.builders import admitted, op, preempt_requested, queues_configured, stop_requested
from tests.builders.identities import HARNESS
from tests.kube import pod_gone

pytestmark = pytest.mark.integration


@pytest.fixture
async def replicas(nats_server, control_plane, k8s_namespace, bus):
    """Two dispatchers, each with its own connection, started as ``Service.run`` starts them (buckets,
    replay), their handlers called directly."""
    settings = nats_server.settings(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, stop_grace_s=0)
    await bus.publish(queues_configured("queues:\n  - name: default\n"))  # admission's: what they check against
    made: list[tuple[Dispatcher, Bus]] = []
    for _ in ("a", "b"):
        own = await nats_server.connect(name="opsched-dispatcher")
        await own.ensure_streams()
        dispatcher = Dispatcher(settings)
        dispatcher.bus = own
        await dispatcher.start(own)
        made.append((dispatcher, own))
    yield [d for d, _ in made]
    for _, own in made:
        await own.close()


def ctx(dispatcher: Dispatcher) -> Context:
    return Context(dispatcher.name, dispatcher.clock, dispatcher.settings, dispatcher.log)


def the_admitted(namespace: str) -> OperationAdmitted:
    op_id = f"race-{secrets.token_hex(3)}"
    return admitted(op("race").gpus(1).runs("sleep 60").build(), op_id=op_id, namespace=namespace,
                    pod_name=pod_name(op_id, 0))


async def pods_of(core_v1, event: OperationAdmitted) -> list[str]:
    listed = await asyncio.to_thread(core_v1.list_namespaced_pod, event.namespace,
                                     label_selector=attempt_selector(event.op_id, event.attempt))
    return [p.metadata.name for p in listed.items]


async def test_a_stop_handled_by_one_replica_wins_over_the_redelivered_admitted_on_another(
        replicas, k8s_namespace, core_v1):
    a, b = replicas
    event = the_admitted(k8s_namespace)

    stopped = await a.on_stop(stop_requested(event.op_id, namespace=k8s_namespace), ctx(a))
    assert isinstance(stopped, OperationStopped)  # reported: there was no pod yet
    assert b.attempts.wanted((event.op_id, 0))  # B's table does not know: without the KV record it would create

    assert await b.on_admitted(event, ctx(b)) is None  # nothing more to report
    assert await pod_gone(core_v1, k8s_namespace, event.pod_name)
    assert await pods_of(core_v1, event) == []


async def test_a_preemption_handled_by_one_replica_wins_over_the_redelivered_admitted_on_another(
        replicas, k8s_namespace, core_v1):
    a, b = replicas
    event = the_admitted(k8s_namespace)

    preempted = await a.on_preempt(preempt_requested(event.op_id, namespace=k8s_namespace), ctx(a))
    assert isinstance(preempted, OperationPreempted)

    assert await b.on_admitted(event, ctx(b)) is None
    assert await pod_gone(core_v1, k8s_namespace, event.pod_name)
    assert await pods_of(core_v1, event) == []


async def test_a_stop_handled_while_the_admitted_creates_its_pod_deletes_it_and_nothing_more_is_reported(
        replicas, k8s_namespace, core_v1):
    """The stop's handler looks for pods just before B's create reaches the API server: it finds none and
    reports ``stopped``; B's pod is created anyway, and B, reading the attempt's fate again, deletes it."""
    a, b = replicas
    event = the_admitted(k8s_namespace)
    assert b.kube is not None
    create = b.kube.create_pod
    stops: list[object] = []

    async def create_after_a_stop(body):
        stops.append(await a.on_stop(stop_requested(event.op_id, namespace=k8s_namespace), ctx(a)))
        return await create(body)

    b.kube.create_pod = create_after_a_stop  # type: ignore[method-assign]
    assert await b.on_admitted(event, ctx(b)) is None
    assert len(stops) == 1 and isinstance(stops[0], OperationStopped)
    assert await pod_gone(core_v1, k8s_namespace, event.pod_name)
    assert await pods_of(core_v1, event) == []


async def test_the_record_of_a_released_attempt_is_shared_and_keeps_who_released_it(replicas, nats_server):
    a, b = replicas
    await a.on_stop(stop_requested("kept-1", namespace=a.settings.namespace), ctx(a))
    assert b.fates is not None and await b.fates.released("kept-1", 0)
    assert not await b.fates.released("kept-1", 1)  # a later attempt is its own
    bus = await nats_server.connect(name="test", identity=HARNESS)
    try:
        kv = await bus.ensure_cache_bucket(subjects.ATTEMPT_FATE_BUCKET)
        status = await kv.status()
        assert status.ttl == pytest.approx(a.settings.attempt_fate_max_age_s)  # keys of ended attempts expire
    finally:
        await bus.close()
