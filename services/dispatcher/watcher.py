"""Watch the pods opsched created and publish what happens to their attempts.

A thread runs list+watch (the official client blocks) and hands each event to the event loop,
which publishes it with ``Nats-Msg-Id = <op>.<type>.<attempt>`` (a re-list after a restart
re-reports states; JetStream and the admission fold both drop the duplicates).

Pods are grouped by attempt (labels op id + attempt); ``gang.assess`` says what an attempt means.
A deleted pod is kept (``gone``) until its whole attempt is gone and the event that means is published
(a failed publish is retried at the next re-list, and each time the server ends a watch, at least every
minute), so a preempted attempt is reported once its last pod is deleted. When an attempt fails, the rest of its gang is released
(annotated, then deleted with the grace period) so that it frees its GPUs. When the last pod of a gang is gone (its ttl, a
stop, cleanPodPolicy All), its rendezvous Service and hostfile ConfigMap are deleted (``unwind``).

Preemptions asked for but not yet reported are remembered (seeded from the stream at start): if a
list finds none of their pods, they were all deleted while nobody watched, and they are reported.

A watcher follows one namespace (the dispatcher runs one per queue namespace: its RBAC grants no more), or
every namespace when ``namespace`` is None; it only remembers preemptions of pods in its namespace.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kubernetes.client import CoreV1Api

from opsched.proto import codec, subjects
from opsched.proto.events import (
    Event,
    OperationFailed,
    OperationPreempted,
    OperationSucceeded,
    OperationTimedOut,
    PreemptRequested,
)
from opsched.rules.naming import pod_name
from opsched.rules.podspec import ANNOTATION_EVICTED, SELECTOR
from opsched.services.dispatcher.gang import (
    GANG_FAILED,
    GANG_FINISHED,
    AttemptKey,
    PodView,
    all_gone,
    assess,
)
from opsched.services.dispatcher.kobjects import PODS, Pod
from opsched.services.dispatcher.listwatch import ListWatch
from opsched.services.dispatcher.podstatus import view_of
from opsched.services.dispatcher.podtrace import headers_of
from opsched.services.runtime.clock import Clock

Publish = Callable[..., Awaitable[Any]]  # (event), or (event, headers=...): the pods' trace context
Free = Callable[[list[PodView], dict[str, str]], Awaitable[Any]]  # release pods: (pods, annotations)
Unwind = Callable[[str, str], Awaitable[Any]]  # delete a gang's rendezvous: (namespace, main pod name)


class PodWatcher(ListWatch):
    name = "pod_watch"
    forbidden = ("grant the dispatcher a Role on pods in each queue namespace and list them in "
                 "OPSCHED_POD_NAMESPACES (deploy/base/22-queue-namespace-*.yaml)")
    decoders = PODS

    def __init__(self, core: CoreV1Api, publish: Publish, clock: Clock, log, free: Free | None = None,
                 namespace: str | None = None, unwind: Unwind | None = None) -> None:
        super().__init__(log, clock)
        self.core = core
        self.namespace = namespace
        if namespace is not None:
            self.name = f"pod_watch_{namespace}"
        self.publish = publish
        self.free = free
        self.unwind = unwind
        self.lock = threading.Lock()  # the thread and the loop (handlers, gang checks) share what follows
        self.attempts: dict[AttemptKey, dict[str, PodView]] = {}  # pods seen, per attempt
        self.reported: dict[AttemptKey, str] = {}  # attempt -> type of the last event published
        self.preempting: dict[AttemptKey, PreemptRequested] = {}  # asked for, not yet reported
        self.objects: dict[tuple[str, str], Pod] = {}  # (namespace, name) -> the pod as last seen; for expiry

    def list_call(self):
        return self.core.list_pod_for_all_namespaces if self.namespace is None else self.core.list_namespaced_pod

    def watch_kwargs(self) -> dict:
        if self.namespace is None:
            return {"label_selector": SELECTOR}
        return {"label_selector": SELECTOR, "namespace": self.namespace}

    def follows(self, namespace: str) -> bool:
        return self.namespace is None or self.namespace == namespace

    # ---- pods -----------------------------------------------------------------------------------
    def observe(self, kind: str, pod: Pod) -> None:
        with self.lock:
            if kind == "DELETED":
                self.objects.pop((pod.metadata.namespace or "", pod.metadata.name), None)
            else:
                self.objects[(pod.metadata.namespace or "", pod.metadata.name)] = pod
        view = view_of(pod, gone=kind == "DELETED")
        if view is not None:
            self.apply(view)

    def apply(self, view: PodView) -> None:
        """Record one pod's state and publish what its attempt now means (at most once per type)."""
        with self.lock:
            pods = self.attempts.setdefault(view.key, {})
            pods[view.name] = view
            views = list(pods.values())
            reported = self.reported.get(view.key)
        event = assess(views, reported, self.clock.now())
        published = event is None or codec.type_of(event) == reported or self._report(view.key, event, views)
        if published and all_gone(views):  # nothing more can happen to this attempt: forget it
            with self.lock:
                known = self.attempts.pop(view.key, None) is not None
                self.reported.pop(view.key, None)
            if known and self.unwind is not None and any(v.gang_size > 1 for v in views):  # its rendezvous goes too
                self.run_on_loop(self.unwind(view.namespace, pod_name(*view.key)), f"rendezvous of {view.op_id}")

    def _report(self, key: AttemptKey, event: Event, views: list[PodView]) -> bool:
        """Publish the attempt's event; False if that failed (the attempt is kept: a re-list retries)."""
        headers = headers_of(views)  # the op's trace, carried on (tracing on)
        publishing = self.publish(event, headers=headers) if headers else self.publish(event)
        if not self.run_on_loop(publishing, f"op {event.op_id}"):
            return False
        with self.lock:
            if key in self.attempts:
                self.reported[key] = codec.type_of(event)
            if isinstance(event, OperationPreempted):
                self.preempting.pop(key, None)
        if isinstance(event, (OperationFailed, OperationTimedOut)):
            self._free_rest(views, GANG_FAILED)
        elif isinstance(event, OperationSucceeded):
            self._free_rest(views, GANG_FINISHED)  # admission frees the quota now: so must the workers
        return True

    def _free_rest(self, views: list[PodView], why: str) -> None:
        """An ended gang frees its GPUs: its pods still starting or running are released."""
        rest = [v for v in views if not v.gone and not v.deleting and v.phase not in ("Succeeded", "Failed")]
        if rest and self.free is not None:
            self.run_on_loop(self.free(rest, {ANNOTATION_EVICTED: why}), f"gang of {rest[0].op_id}")

    def listed(self, items: list[Pod], resource_version: str) -> None:
        """After a (re-)list: pods known but no longer listed were deleted meanwhile."""
        listed = {(p.metadata.namespace or "", p.metadata.name) for p in items}
        with self.lock:
            self.objects = {key: pod for key, pod in self.objects.items() if key in listed}
            vanished = [v for pods in self.attempts.values() for v in pods.values()
                        if not v.gone and (v.namespace, v.name) not in listed]
        for view in vanished:
            self.apply(dataclasses.replace(view, gone=True))
        self.resumed()
        self._report_orphan_preemptions(items)

    def resumed(self) -> None:
        """Attempts all gone whose last event could not be published: try again."""
        with self.lock:
            unpublished = [next(iter(pods.values())) for pods in self.attempts.values() if all_gone(pods.values())]
        for view in unpublished:
            self.apply(view)

    # ---- preemptions ----------------------------------------------------------------------------
    def expect_preemption(self, request: PreemptRequested) -> None:
        with self.lock:
            self.preempting[(request.op_id, request.attempt)] = request

    def preemption_reported(self, key: AttemptKey) -> None:
        with self.lock:
            self.preempting.pop(key, None)

    def seed_preemptions(self, requested: Iterable[PreemptRequested],
                         reported: Iterable[OperationPreempted]) -> None:
        """The preemptions on the stream whose ``preempted`` is not."""
        done = {(e.op_id, e.attempt) for e in reported}
        for request in requested:
            if (request.op_id, request.attempt) not in done and self.follows(request.namespace):
                self.expect_preemption(request)

    async def seed(self, bus) -> None:
        """Preemptions asked for and not yet reported (best effort: else only new ones are followed)."""
        try:
            requested = await _read_events(bus, "preempt_requested")
            reported = await _read_events(bus, "preempted")
        except Exception as exc:  # noqa: BLE001
            self.log.warning("preemptions_not_seeded", error=repr(exc))
            return
        self.seed_preemptions([e for e in requested if isinstance(e, PreemptRequested)],
                              [e for e in reported if isinstance(e, OperationPreempted)])

    def _report_orphan_preemptions(self, items: list[Pod]) -> None:
        keys = {view.key for view in map(view_of, items) if view is not None}
        with self.lock:
            orphans = [r for k, r in self.preempting.items() if k not in keys and k not in self.attempts]
        for r in orphans:
            event = OperationPreempted(op_id=r.op_id, at=self.clock.now(), attempt=r.attempt,
                                       preemptor=r.preemptor, reason=r.reason, message=r.message)
            self._report((r.op_id, r.attempt), event, [])

    # ---- for the reconciler and the gang checks ------------------------------------------------------
    def pod_objects(self) -> list[Pod] | None:
        """Every pod it follows that is on the API server, as last seen (a snapshot); None unless ``synced``
        (never listed yet, or re-listing after an error): then only a list can tell."""
        with self.lock:
            return list(self.objects.values()) if self.synced else None

    def gangs(self) -> list[list[PodView]]:
        """The pods of every attempt of more than one pod (a snapshot)."""
        with self.lock:
            return [list(pods.values()) for pods in self.attempts.values()
                    if any(v.gang_size > 1 for v in pods.values())]


async def _read_events(bus, kind: str) -> list[Event]:
    events = []
    for data in await bus.read_all(subjects.OPS_STREAM, subjects.events_of(kind)):
        try:
            events.append(codec.decode_event(data))
        except codec.DecodeError:
            continue  # garbage on the stream is not ours to judge here
    return events
