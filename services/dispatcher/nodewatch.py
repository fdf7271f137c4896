"""Watch the nodes and publish what admission needs to know about them: capacity per flavor.

A thread runs list+watch (the official client blocks; msgspec decodes what it answers) and hands each changed fact to the event
loop, which publishes it on ``cluster.node.<name>`` (the OPSCHED_CLUSTER stream keeps the latest
per node). Kubelets rewrite their node every few seconds (heartbeat times in the conditions), so
only a change of labels, allocatable, taints or schedulability is published. The facts already on
the stream seed the comparison: a restart republishes nothing that did not change.

``Nats-Msg-Id`` = ``node.<name>.<resourceVersion>.<fact digest>``: replicas that see the same
version of a node publish it once, and a fact that flips back (cordon, uncordon) within the
duplicate window is still a new message.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any

from kubernetes.client import CoreV1Api

from opsched.proto import codec, subjects
from opsched.proto.cluster import ClusterEvent, NodeObserved, NodeRemoved
from opsched.services.dispatcher.kobjects import NODES, Node, Taint
from opsched.services.dispatcher.listwatch import ListWatch
from opsched.services.runtime.clock import Clock

Publish = Callable[..., Awaitable[Any]]  # Bus.publish(message, *, subject=..., msg_id=...)
Outgoing = tuple[ClusterEvent, str]  # the event and its Nats-Msg-Id


# ---- pure: a node → its fact, and what to publish -----------------------------------------------

def observed(node: Node, at: datetime, agent: str = "") -> NodeObserved:
    status, spec = node.status, node.spec
    return NodeObserved(
        node=node.metadata.name, at=at, agent=agent,
        labels=dict(node.metadata.labels or {}),
        allocatable=dict((status.allocatable if status else None) or {}),
        taints=[_taint(t) for t in (spec.taints if spec else None) or []],
        schedulable=is_schedulable(node),
        created=node.metadata.creation_timestamp,
    )


def removed(last: NodeObserved | None, name: str, at: datetime, agent: str = "") -> NodeRemoved:
    """The removal of ``name``, carrying its last fact (``last``: None when none is known), so that the removal
    alone can be charged: the stream keeps one message per node, and this one replaces its ``node_observed``."""
    if last is None:
        return NodeRemoved(node=name, at=at, agent=agent)
    return NodeRemoved(node=name, at=at, agent=agent, created=last.created, labels=dict(last.labels),
                       allocatable=dict(last.allocatable))


def _taint(taint: Taint) -> dict[str, str]:
    return {"key": taint.key, "value": taint.value or "", "effect": taint.effect}


def is_schedulable(node: Node) -> bool:
    """Ready and not cordoned."""
    conditions = (node.status.conditions if node.status else None) or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    return ready and not (node.spec is not None and node.spec.unschedulable)


def fact_of(event: NodeObserved) -> str:
    """A digest of what admission cares about: not the time, not heartbeats."""
    body = [event.labels, event.allocatable, event.taints, event.schedulable]
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class NodeFacts:
    """The fact last published per node of its agent's cluster; decides what to publish next (no I/O, no
    threads)."""

    def __init__(self, agent: str = "") -> None:
        self.agent = agent
        self.published: dict[str, str] = {}  # node name -> digest of its last published fact
        self.last: dict[str, NodeObserved] = {}  # node name -> its last published fact (a removal carries it)

    def seed(self, events: Iterable[ClusterEvent]) -> None:
        """Start from what the stream holds (in stream order): its own agent's facts."""
        for event in events:
            if event.agent == self.agent:
                self.mark(event)

    def _mid(self, name: str, rest: str) -> str:
        return f"node.{self.agent + '.' if self.agent else ''}{name}.{rest}"

    def mark(self, event: ClusterEvent) -> None:
        """``event`` is now stored."""
        if isinstance(event, NodeObserved):
            self.published[event.node] = fact_of(event)
            self.last[event.node] = event
        else:
            self.published.pop(event.node, None)
            self.last.pop(event.node, None)

    def on_node(self, kind: str, node: Node, at: datetime) -> Outgoing | None:
        name, rv = node.metadata.name, node.metadata.resource_version or ""
        if kind == "DELETED":  # the deleted object is the node's last state
            return removed(observed(node, at, self.agent), name, at, self.agent), self._mid(name, f"removed.{rv}")
        event = observed(node, at, self.agent)
        fact = fact_of(event)
        if self.published.get(name) == fact:
            return None
        return event, self._mid(name, f"{rv}.{fact[:16]}")

    def gone(self, listed: Iterable[str], rv: str, at: datetime) -> list[Outgoing]:
        """Nodes published as present that a fresh list no longer holds."""
        missing = sorted(set(self.published) - set(listed))
        return [(removed(self.last.get(name), name, at, self.agent), self._mid(name, f"removed.{rv}"))
                for name in missing]


# ---- the thread -----------------------------------------------------------------------------------

class NodeWatcher(ListWatch):
    name = "node_watch"
    forbidden = "grant the dispatcher get, list and watch on nodes (deploy/base/20-rbac.yaml)"
    decoders = NODES

    def __init__(self, core: CoreV1Api, publish: Publish, clock: Clock, log, agent: str = "") -> None:
        super().__init__(log, clock)
        self.core = core
        self.publish = publish
        self.facts = NodeFacts(agent)  # touched by the thread only, once started

    async def seed(self, bus) -> None:
        """Read the latest fact per node from the stream (best effort: else everything is new)."""
        try:
            data = await bus.read_all(subjects.CLUSTER_STREAM, subjects.CLUSTER_ALL)
            self.facts.seed(codec.decode_cluster(d) for d in data)
        except Exception as exc:  # noqa: BLE001 - republishing unchanged facts is harmless
            self.log.warning("node_facts_not_seeded", error=repr(exc))

    def list_call(self):
        return self.core.list_node

    def listed(self, items: list[Node], resource_version: str) -> None:
        names = [n.metadata.name for n in items]
        for event, mid in self.facts.gone(names, resource_version, self.clock.now()):
            self._hand_over(event, mid)

    def observe(self, kind: str, node: Node) -> None:
        out = self.facts.on_node(kind, node, self.clock.now())
        if out is not None:
            self._hand_over(*out)

    def _hand_over(self, event: ClusterEvent, mid: str) -> None:
        coro = self.publish(event, subject=subjects.node(event.node, event.agent), msg_id=mid)
        if self.run_on_loop(coro, f"node {event.node}"):
            self.facts.mark(event)
            self.log.info(codec.type_of(event), node=event.node)
