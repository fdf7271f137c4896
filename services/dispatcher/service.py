"""Wire the dispatcher to the bus: create the pods of each admitted attempt (one, or a gang), release
them on preemption and stop, evict gangs not all Running in time, report pod states and node facts."""
from __future__ import annotations

import asyncio
from typing import Any

from proto import codec, subjects
from proto.events import (
    Event,
    OperationAdmitted,
    OperationDispatched,
    OperationFailed,
    OperationPreempted,
    OperationRejected,
    OperationStopped,
    PreemptRequested,
    StopRequested,
)
from proto.gpu_accounting import violations
from proto.podspec import ANNOTATION_EVICTED, build_pods
from services.dispatcher.expiry import check_expiry
from services.dispatcher.gang import POD_REJECTED
from services.dispatcher.k8s import Kube, PodRejected, load_api_client
from services.dispatcher.nodewatch import NodeWatcher
from services.dispatcher.preempt import Releaser, check_gangs
from services.dispatcher.watcher import PodWatcher
from services.runtime.bus import Bus
from services.runtime.service import Context, Service
from services.runtime.settings import Settings


def build(settings: Settings, clock=None) -> Service:
    service = Service("dispatcher", settings, clock)
    kube = None if settings.dispatcher_mode == "null" else Kube(load_api_client(settings.kubeconfig))
    releaser = watcher = None
    if kube is not None:
        releaser = Releaser(kube, settings, service.log)
        watcher = PodWatcher(kube.core, lambda event: _publish(service, event), service.clock, service.log,
                             free=releaser.free)
        service.extra_tasks += [_pod_watch(service, watcher), _node_watch(service, kube),
                                _gang_checks(service, watcher, releaser), _expiry_checks(service, kube, releaser)]
    sub = service.consume(subjects.DISPATCHER_ADMITTED, subjects.OPS_STREAM,
                          [subjects.events_of("admitted"), subjects.events_of("stop_requested"),
                           subjects.events_of("preempt_requested")])

    @service.on(sub, OperationAdmitted)
    async def on_admitted(event: OperationAdmitted, ctx: Context) -> Event:
        base: dict[str, Any] = dict(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt)
        problems = violations(event.spec)
        if problems:
            return OperationRejected(**base, reason="forbidden_pod_spec", message="; ".join(problems))
        if kube is not None and releaser is not None:
            refusal = await _create_attempt(kube, releaser, event, ctx)
            if refusal is not None:
                return OperationFailed(**base, pod_name=event.pod_name, reason="PodRejected", message=refusal)
        return OperationDispatched(**base, pod_name=event.pod_name, namespace=event.namespace)

    @service.on(sub, PreemptRequested)
    async def on_preempt(event: PreemptRequested, ctx: Context) -> Event | None:
        if releaser is None or watcher is None:  # null mode: no pods, nothing to wait for
            return OperationPreempted(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt,
                                      preemptor=event.preemptor, reason=event.reason, message=event.message)
        watcher.expect_preemption(event)  # before the deletes: a re-list that finds no pod reports it
        preempted = await releaser.preempt(event, ctx.clock.now())
        if preempted is not None:
            watcher.preemption_reported((event.op_id, event.attempt))
        return preempted

    @service.on(sub, StopRequested)
    async def on_stop(event: StopRequested, ctx: Context) -> Event:
        if releaser is not None:
            return await releaser.stop(event, ctx.clock.now())
        return OperationStopped(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt, reason=event.reason)

    return service


async def _publish(service: Service, event: Event) -> None:
    assert service.bus is not None
    await service.bus.publish(event)


async def _create_attempt(kube: Kube, releaser: Releaser, event: OperationAdmitted, ctx: Context) -> str | None:
    """Create every pod of the attempt (409: it exists). On a refusal, release the pods of the gang
    already created and return the API's message."""
    pods = build_pods(event)
    results = await asyncio.gather(*(kube.create_pod(p) for p in pods), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, PodRejected):
            raise result  # temporary: the redelivery creates what is missing
    names = [p["metadata"]["name"] for p in pods]
    refusals = [r for r in results if isinstance(r, PodRejected)]
    if refusals:
        created = [n for n, r in zip(names, results) if not isinstance(r, BaseException)]
        await releaser.release(event.namespace, created, {ANNOTATION_EVICTED: POD_REJECTED},
                               ctx.settings.stop_grace_s)
        return refusals[0].message
    for name, result in zip(names, results):
        ctx.log.info("pod_created" if getattr(result, "created", False) else "pod_existed", pod=name)
    return None


def _pod_watch(service: Service, watcher: PodWatcher):
    async def run(bus: Bus, stop: asyncio.Event) -> None:
        await _seed_preemptions(bus, watcher, service)
        watcher.start()
        await stop.wait()
        watcher.stop()
    return run


async def _seed_preemptions(bus: Bus, watcher: PodWatcher, service: Service) -> None:
    """Preemptions asked for and not yet reported (best effort: else only new ones are followed)."""
    try:
        requested = await _read_events(bus, "preempt_requested")
        reported = await _read_events(bus, "preempted")
    except Exception as exc:  # noqa: BLE001
        service.log.warning("preemptions_not_seeded", error=repr(exc))
        return
    watcher.seed_preemptions([e for e in requested if isinstance(e, PreemptRequested)],
                             [e for e in reported if isinstance(e, OperationPreempted)])


async def _read_events(bus: Bus, kind: str) -> list[Event]:
    events = []
    for data in await bus.read_all(subjects.OPS_STREAM, subjects.events_of(kind)):
        try:
            events.append(codec.decode_event(data))
        except codec.DecodeError:
            continue  # garbage on the stream is not ours to judge here
    return events


def _node_watch(service: Service, kube: Kube):
    async def run(bus: Bus, stop: asyncio.Event) -> None:
        watcher = NodeWatcher(kube.core, bus.publish, service.clock, service.log)
        await watcher.seed(bus)  # node facts for admission's flavors
        watcher.start()
        await stop.wait()
        watcher.stop()
    return run


def _gang_checks(service: Service, watcher: PodWatcher, releaser: Releaser):
    async def run(bus: Bus, stop: asyncio.Event) -> None:
        await check_gangs(watcher.gangs, releaser, bus.publish, service.clock, stop)
    return run


def _expiry_checks(service: Service, kube: Kube, releaser: Releaser):
    async def run(bus: Bus, stop: asyncio.Event) -> None:
        await check_expiry(kube, releaser, bus.publish, service.clock, stop, service.log)
    return run
