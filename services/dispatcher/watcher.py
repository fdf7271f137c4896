"""Watch the pods opsched created and publish what happens to them.

A thread runs list+watch (the official client blocks) and hands each event to the event loop,
which publishes it with ``Nats-Msg-Id = <op>.<type>.<attempt>`` (a re-list after a restart
re-reports states; JetStream and the admission fold both drop the duplicates).
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

from kubernetes import watch
from kubernetes.client import CoreV1Api, V1Pod
from kubernetes.client.rest import ApiException

from proto import codec
from proto.events import Event, OperationFailed
from services.dispatcher.podspec import SELECTOR
from services.dispatcher.podstatus import event_for, op_of
from services.runtime.clock import Clock

Publish = Callable[[Event], Awaitable[None]]
WATCH_TIMEOUT_S = 60


class PodWatcher:
    def __init__(self, core: CoreV1Api, publish: Publish, clock: Clock, log) -> None:
        self.core = core
        self.publish = publish
        self.clock = clock
        self.log = log
        self.reported: dict[str, str] = {}  # pod name -> type of the last event published
        self.stopping: set[str] = set()  # pods this dispatcher is deleting on purpose
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="pod-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                rv = self._list()
                self._watch(rv)
            except ApiException as exc:
                if exc.status != 410:
                    self.log.warning("pod_watch_failed", status=exc.status, error=str(exc.reason))
                    self._stop.wait(1.0)
            except Exception as exc:  # noqa: BLE001 - API unreachable: retry
                self.log.warning("pod_watch_failed", error=repr(exc))
                self._stop.wait(1.0)

    def _list(self) -> str:
        pods = self.core.list_pod_for_all_namespaces(label_selector=SELECTOR)
        for pod in pods.items:
            self._observe("MODIFIED", pod)
        return pods.metadata.resource_version

    def _watch(self, rv: str) -> None:
        w = watch.Watch()
        for item in w.stream(self.core.list_pod_for_all_namespaces, label_selector=SELECTOR,
                             resource_version=rv, timeout_seconds=WATCH_TIMEOUT_S):
            if self._stop.is_set():
                w.stop()
                return
            self._observe(item["type"], item["object"])

    def _observe(self, kind: str, pod: V1Pod) -> None:
        name = pod.metadata.name
        event = self._deleted(pod) if kind == "DELETED" else event_for(pod, self.clock.now())
        if kind == "DELETED":
            self.stopping.discard(name)
        if event is None or self.reported.get(name) == codec.type_of(event):
            return
        if self._hand_over(event):
            self.reported[name] = codec.type_of(event)

    def _deleted(self, pod: V1Pod) -> Event | None:
        """A pod deleted by someone else before it ended: the attempt failed."""
        name = pod.metadata.name
        ident = op_of(pod)
        if ident is None or name in self.stopping or self.reported.get(name) in ("succeeded", "failed"):
            return None
        op_id, attempt = ident
        return OperationFailed(op_id=op_id, at=self.clock.now(), attempt=attempt, pod_name=name,
                               node=pod.spec.node_name, reason="PodDeleted",
                               message="the pod was deleted before it finished")

    def _hand_over(self, event: Event) -> bool:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self.publish(event), self._loop)
        try:
            future.result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - not published: the next re-list retries it
            self.log.warning("publish_failed", op_id=event.op_id, error=repr(exc))
            return False
        return True
