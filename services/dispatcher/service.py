"""Wire the dispatcher to the bus: create a pod per admitted attempt, delete on stop, report pod states
and node facts."""
from __future__ import annotations

import asyncio

from proto import subjects
from proto.events import (
    Event, OperationAdmitted, OperationDispatched, OperationFailed, OperationRejected, OperationStopped,
    StopRequested,
)
from services.dispatcher.gpu_accounting import violations
from services.dispatcher.k8s import Kube, PodRejected, load_api_client
from services.dispatcher.nodewatch import NodeWatcher
from services.dispatcher.podspec import build_pod
from services.dispatcher.watcher import PodWatcher
from services.runtime.bus import Bus
from services.runtime.service import Context, Service
from services.runtime.settings import Settings

STOP_GRACE_S = 30


def build(settings: Settings, clock=None) -> Service:
    service = Service("dispatcher", settings, clock)
    null_mode = settings.dispatcher_mode == "null"
    kube = None if null_mode else Kube(load_api_client(settings.kubeconfig))
    holder: dict[str, PodWatcher] = {}

    async def start_watcher(bus: Bus, stop: asyncio.Event) -> None:
        if kube is None:
            return
        watcher = PodWatcher(kube.core, bus.publish, service.clock, service.log)
        holder["watcher"] = watcher
        watcher.start()
        await stop.wait()
        watcher.stop()

    async def start_node_watcher(bus: Bus, stop: asyncio.Event) -> None:
        assert kube is not None
        watcher = NodeWatcher(kube.core, bus.publish, service.clock, service.log)
        await watcher.seed(bus)
        watcher.start()
        await stop.wait()
        watcher.stop()

    service.extra_tasks.append(start_watcher)
    if kube is not None:
        service.extra_tasks.append(start_node_watcher)  # node facts for admission's flavors
    sub = service.consume(subjects.DISPATCHER_ADMITTED, subjects.OPS_STREAM,
                          [subjects.events_of("admitted"), subjects.events_of("stop_requested")])

    @service.on(sub, OperationAdmitted)
    async def on_admitted(event: OperationAdmitted, ctx: Context) -> Event:
        base = dict(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt)
        problems = violations(event.spec)
        if problems:
            return OperationRejected(**base, reason="forbidden_pod_spec", message="; ".join(problems))
        if kube is not None:
            try:
                result = await kube.create_pod(build_pod(event))
            except PodRejected as exc:
                return OperationFailed(**base, pod_name=event.pod_name, reason="PodRejected", message=exc.message)
            ctx.log.info("pod_created" if result.created else "pod_existed", pod=event.pod_name)
        return OperationDispatched(**base, pod_name=event.pod_name, namespace=event.namespace)

    @service.on(sub, StopRequested)
    async def on_stop(event: StopRequested, ctx: Context) -> Event:
        if kube is not None:
            watcher = holder.get("watcher")
            if watcher:
                watcher.stopping.add(event.pod_name)
            await kube.delete_pod(event.pod_name, event.namespace, STOP_GRACE_S)
        return OperationStopped(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt,
                                reason=event.reason)

    return service
