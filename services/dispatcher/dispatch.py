"""An admitted attempt becomes pods. A pod spec that would bypass GPU accounting, or whose pods break its
queue's pod security level (``rules.pod_security``), is refused (``rejected``, ``forbidden_pod_spec``, no pod
created); else every pod of the attempt is created (one, or a gang, after its rendezvous Service and, an mpijob's,
its hostfile ConfigMap; 409: it exists already, as a pod of the same op and attempt) and the attempt is
``dispatched``. A main pod that waits for the others (an mpijob's launcher: ``rules.replica_roles.main_waits``) is
created later, by ``start_main``, once every other pod of the attempt runs. When
the API refuses a pod, or a pod of that name belongs to another op or attempt, the pods of the gang
already created are released and the attempt has ``failed`` (``PodRejected``, ``PodConflict``: the
other's pod is left alone, never adopted). When the API
server is unavailable, the handler loop waits it out (``DependencyUnavailable``), and the op's
``dispatch_delayed`` says so once per attempt (admission's ``why``: waiting for the Kubernetes API).
Without a cluster (null mode) an attempt is dispatched at once."""
from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from opsched.bus.errors import DependencyUnavailable
from opsched.proto.events import (
    DispatchDelayed,
    Event,
    OperationAdmitted,
    OperationDispatched,
    OperationFailed,
    OperationRejected,
)
from opsched.proto.reasons import Refusal
from opsched.rules import connections, reserved_keys
from opsched.rules.gpu_accounting import violations
from opsched.rules.pod_security import check_pods, policy_of
from opsched.rules.podspec import ANNOTATION_EVICTED, build_pods, rendezvous_config_map, rendezvous_service
from opsched.rules.replica_roles import main_waits
from opsched.services.dispatcher.gang import POD_REJECTED
from opsched.services.dispatcher.k8s import Kube, PodRejected
from opsched.services.dispatcher.podtrace import create_pod
from opsched.services.dispatcher.preempt import Releaser
from opsched.services.runtime.sealing import UNSEALABLE_ENV, Sealer, Unsealable
from opsched.services.runtime.service import Context


async def dispatch(event: OperationAdmitted, ctx: Context, kube: Kube | None, releaser: Releaser | None) -> Event:
    base: dict[str, Any] = dict(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt)
    try:  # its env as written (sealed in the stream: ``services.runtime.sealing``)
        event = msgspec.structs.replace(event, spec=Sealer.of(ctx.settings.env_key_file).unseal(event.spec))
    except Unsealable as exc:
        return OperationRejected(**base, reason=UNSEALABLE_ENV, message=f"cannot build the pod: {exc}")
    policy = policy_of(event.queue, event)
    unbuildable = connections.undeclared(event.spec, event.connections)  # (its pods need their declarations)
    problems = violations(event.spec) + reserved_keys.problems(event.spec) + (
        unbuildable or check_pods(build_pods(event), policy))
    if problems:
        return OperationRejected(**base, reason=Refusal.FORBIDDEN_POD_SPEC, message="; ".join(problems))
    if kube is not None and releaser is not None:
        try:
            refusal = await create_attempt(kube, releaser, event, ctx)
        except DependencyUnavailable as exc:
            exc.events.append(DispatchDelayed(**base, dependency=exc.dependency, message=exc.detail))
            raise
        if refusal is not None:
            return OperationFailed(**base, pod_name=event.pod_name, reason=refusal.reason, message=refusal.message)
    return OperationDispatched(**base, pod_name=event.pod_name, namespace=event.namespace)


async def create_attempt(kube: Kube, releaser: Releaser, event: OperationAdmitted,
                         ctx: Context) -> PodRejected | None:
    """Create every pod of the attempt (409: it exists, as this attempt's). On a refusal or a conflict,
    release the pods of the gang already created (never another's) and return the first refusal."""
    pods = build_pods(event)
    if main_waits(event.spec):  # an mpijob's launcher: created once its workers run (``start_main``)
        pods = pods[1:]
    service, config_map = rendezvous_service(event), rendezvous_config_map(event)
    try:  # before its pods: they resolve each other's names as they start, the launcher mounts its hostfile
        if service is not None:
            await kube.create_service(service)
        if config_map is not None:
            await kube.create_config_map(config_map)
    except PodRejected as refusal:
        return refusal
    results = await asyncio.gather(*(create_pod(kube, p, ctx.service) for p in pods), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, PodRejected):
            raise result  # temporary: the redelivery creates what is missing
    names = [p["metadata"]["name"] for p in pods]
    refusals = [r for r in results if isinstance(r, PodRejected)]
    if refusals:
        created = [n for n, r in zip(names, results) if not isinstance(r, BaseException)]
        await releaser.release(event.namespace, created, {ANNOTATION_EVICTED: POD_REJECTED},
                               ctx.settings.stop_grace_s)
        return refusals[0]
    for name, result in zip(names, results):
        ctx.log.info("pod_created" if getattr(result, "created", False) else "pod_existed", pod=name)
    return None


async def start_main(kube: Kube, releaser: Releaser, event: OperationAdmitted, ctx: Context) -> PodRejected | None:
    """Create the main pod of an attempt whose main pod waits (its other pods all run now): 409, it exists, is
    fine. A refusal releases the attempt's pods (``evicted: pod_rejected``) and is returned."""
    try:
        event = msgspec.structs.replace(event, spec=Sealer.of(ctx.settings.env_key_file).unseal(event.spec))
    except Unsealable as exc:
        return PodRejected(422, f"cannot build the pod: {exc}")
    main = build_pods(event)[0]
    try:
        result = await create_pod(kube, main, ctx.service)
    except PodRejected as refusal:
        names = await releaser.attempt_pods(event.namespace, event.op_id, event.attempt)
        await releaser.release(event.namespace, names, {ANNOTATION_EVICTED: POD_REJECTED}, ctx.settings.stop_grace_s)
        return refusal
    ctx.log.info("pod_created" if getattr(result, "created", False) else "pod_existed", pod=main["metadata"]["name"])
    return None
