"""Deleting pods on purpose: preemption, stop, and the release of gangs (timed out, failed, rejected).

A service's Service (``rules.serving``) goes with its pods; a gang's rendezvous Service with its pods too.
Every such deletion first annotates the pods with why (``opsched.io/preempted-by``,
``opsched.io/stopped``, ``opsched.io/evicted``), so that the watcher, even one started after a
restart, never mistakes it for a failure; then deletes them with a grace period (the containers
get SIGTERM and may checkpoint). A pod that is already gone (404) is fine.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any

from opsched.proto.events import (
    Event,
    OperationEvicted,
    OperationPreempted,
    OperationStopped,
    PreemptRequested,
    StopRequested,
)
from opsched.rules import rendezvous
from opsched.rules.naming import pod_name
from opsched.rules.podspec import (
    ANNOTATION_EVICTED,
    ANNOTATION_PREEMPT_MESSAGE,
    ANNOTATION_PREEMPT_REASON,
    ANNOTATION_PREEMPTED_BY,
    ANNOTATION_STOPPED,
    attempt_selector,
)
from opsched.services.dispatcher.gang import PodView, main_due, timed_out
from opsched.services.dispatcher.k8s import Kube
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.settings import Settings

GANG_CHECK_INTERVAL_S = 1.0


class Releaser:
    def __init__(self, kube: Kube, settings: Settings, log) -> None:
        self.kube = kube
        self.settings = settings
        self.log = log

    # ---- the two steps ----------------------------------------------------------------------------
    async def annotate(self, namespace: str, names: list[str], annotations: dict[str, str]) -> list[str]:
        """Annotate the pods; the names of those that exist."""
        found = await asyncio.gather(*(self.kube.annotate_pod(n, namespace, annotations) for n in names))
        return [n for n, ok in zip(names, found) if ok]

    async def delete(self, namespace: str, names: list[str], grace_s: int, main: str | None = None) -> list[str]:
        """Delete the pods, and the rendezvous of a gang among them (its main pod's and replicas' names given) or the
        Service of the attempt whose ``main`` pod is named (a service's, even of one pod); the names of the pods
        still there."""
        found = await asyncio.gather(*(self.kube.delete_pod(n, namespace, grace_s) for n in names))
        gangs = [n for n in names if any(other.startswith(f"{n}-") for other in names)]  # a main pod, replicas
        mains = dict.fromkeys([*gangs, *([main] if main else [])])
        await asyncio.gather(*(self.delete_rendezvous(namespace, n) for n in mains))
        return [n for n, ok in zip(names, found) if ok]

    async def delete_rendezvous(self, namespace: str, main_pod: str) -> None:
        """Delete what a gang's rendezvous made besides its pods (``rules.rendezvous``): its headless Service and,
        an mpijob's, its hostfile ConfigMap (either not there: fine)."""
        await asyncio.gather(self.kube.delete_service(rendezvous.service_name(main_pod), namespace),
                             self.kube.delete_config_map(rendezvous.config_map_name(main_pod), namespace))

    async def release(self, namespace: str, names: Iterable[str], annotations: dict[str, str],
                      grace_s: int, main: str | None = None) -> bool:
        """Annotate, then delete (``main``: see ``delete``); False when every pod was already gone."""
        existing = await self.annotate(namespace, list(dict.fromkeys(names)), annotations)
        deleted = await self.delete(namespace, existing, grace_s, main)
        if deleted:
            self.log.info("pods_released", namespace=namespace, pods=deleted, why=annotations)
        return bool(deleted)

    async def free(self, views: list[PodView], annotations: dict[str, str]) -> None:
        """Release the given pods (the rest of a failed gang) with the stop grace period (a service's: its Service
        too)."""
        for namespace in dict.fromkeys(v.namespace for v in views):
            names = [v.name for v in views if v.namespace == namespace]
            serves = next((v for v in views if v.namespace == namespace and v.serves), None)
            await self.release(namespace, names, annotations, self.settings.stop_grace_s,
                               pod_name(serves.op_id, serves.attempt) if serves is not None else None)

    async def attempt_pods(self, namespace: str, op_id: str, attempt: int, *known: str) -> list[str]:
        """Every pod of the attempt, found by its labels (plus the names already known)."""
        listed = await self.kube.pod_names(namespace, attempt_selector(op_id, attempt))
        return list(dict.fromkeys([*known, *listed]))

    # ---- the handlers -----------------------------------------------------------------------------
    async def preempt(self, event: PreemptRequested, now: datetime) -> OperationPreempted | None:
        """Release the victim's pods. ``preempted`` now if they were all gone already; else the
        watcher reports it once the last one is deleted."""
        annotations = {ANNOTATION_PREEMPTED_BY: event.preemptor, ANNOTATION_PREEMPT_REASON: event.reason}
        if event.message:
            annotations[ANNOTATION_PREEMPT_MESSAGE] = event.message
        if await self.release(event.namespace, event.pod_names, annotations, self.settings.preempt_grace_s,
                              pod_name(event.op_id, event.attempt)):
            return None
        return OperationPreempted(op_id=event.op_id, at=now, attempt=event.attempt, preemptor=event.preemptor,
                                  reason=event.reason, message=event.message)

    async def stop(self, event: StopRequested, now: datetime) -> OperationStopped:
        names = await self.attempt_pods(event.namespace, event.op_id, event.attempt, event.pod_name)
        await self.release(event.namespace, names, {ANNOTATION_STOPPED: "true"}, self.settings.stop_grace_s,
                           pod_name(event.op_id, event.attempt))
        return OperationStopped(op_id=event.op_id, at=now, attempt=event.attempt, reason=event.reason)

    async def evict(self, views: list[PodView], event: OperationEvicted,
                    publish: Callable[[Event], Awaitable[Any]]) -> None:
        """Annotate every pod of the gang, publish the eviction, then delete them (a crash in between
        leaves annotated pods, which the next check evicts again: the publish is deduplicated)."""
        namespace = views[0].namespace
        names = await self.attempt_pods(namespace, event.op_id, event.attempt, *(v.name for v in views))
        existing = await self.annotate(namespace, names, {ANNOTATION_EVICTED: event.reason})
        await publish(event)
        await self.delete(namespace, existing, self.settings.stop_grace_s)
        self.log.info("gang_evicted", op_id=event.op_id, attempt=event.attempt, pods=existing,
                      message=event.message, retry_after_s=event.retry_after_s)


# ---- the gang timeout check ---------------------------------------------------------------------------

async def check_gangs(gangs: Callable[[], list[list[PodView]]], releaser: Releaser,
                      publish: Callable[[Event], Awaitable[Any]], clock: Clock, stop: asyncio.Event,
                      start_main: Callable[[list[PodView]], Awaitable[Any]] | None = None) -> None:
    """Every second, evict the gangs not all Running in time (time from the injected clock), and hand the gangs
    whose other pods all run but whose main pod is not there yet to ``start_main`` (it creates the main pod of
    those whose main pod waits: an mpijob's launcher)."""
    evicted: set[tuple[str, int]] = set()  # released by this process: not again while they terminate
    while not stop.is_set():
        now, current = clock.now(), gangs()
        evicted &= {views[0].key for views in current}
        for views in current:
            if start_main is not None and main_due(views):
                try:
                    await start_main(views)
                except Exception as exc:  # noqa: BLE001 - API or bus trouble: the next check retries
                    releaser.log.warning("main_pod_not_started", op_id=views[0].op_id, error=repr(exc))
            event = timed_out(views, now, releaser.settings)
            if event is None or views[0].key in evicted:
                continue
            try:
                await releaser.evict(views, event, publish)
                evicted.add(views[0].key)
            except Exception as exc:  # noqa: BLE001 - API or bus trouble: the next check retries
                releaser.log.warning("gang_eviction_failed", op_id=event.op_id, error=repr(exc))
        await _pause(clock, stop, GANG_CHECK_INTERVAL_S)


async def _pause(clock: Clock, stop: asyncio.Event, seconds: float) -> None:
    waits = [asyncio.ensure_future(clock.sleep(seconds)), asyncio.ensure_future(stop.wait())]
    _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
