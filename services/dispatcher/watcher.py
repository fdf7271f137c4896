"""Watch the pods opsched created and publish what happens to them.

A thread runs list+watch (the official client blocks) and hands each event to the event loop,
which publishes it with ``Nats-Msg-Id = <op>.<type>.<attempt>`` (a re-list after a restart
re-reports states; JetStream and the admission fold both drop the duplicates).
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable

from kubernetes.client import CoreV1Api, V1Pod

from proto import codec
from proto.events import Event, OperationFailed
from services.dispatcher.listwatch import ListWatch
from services.dispatcher.podspec import SELECTOR
from services.dispatcher.podstatus import event_for, op_of
from services.runtime.clock import Clock

Publish = Callable[[Event], Awaitable[None]]


class PodWatcher(ListWatch):
    name = "pod_watch"

    def __init__(self, core: CoreV1Api, publish: Publish, clock: Clock, log) -> None:
        super().__init__(log)
        self.core = core
        self.publish = publish
        self.clock = clock
        self.reported: dict[str, str] = {}  # pod name -> type of the last event published
        self.stopping: set[str] = set()  # pods this dispatcher is deleting on purpose

    def list_call(self):
        return self.core.list_pod_for_all_namespaces

    def watch_kwargs(self) -> dict:
        return {"label_selector": SELECTOR}

    def observe(self, kind: str, pod: V1Pod) -> None:
        name = pod.metadata.name
        event = self._deleted(pod) if kind == "DELETED" else event_for(pod, self.clock.now())
        if kind == "DELETED":
            self.stopping.discard(name)
        if event is None or self.reported.get(name) == codec.type_of(event):
            return
        if self.run_on_loop(self.publish(event), f"op {event.op_id}"):
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
