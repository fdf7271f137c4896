"""What the simulated autoscaler does on each pass, as a pure decision: no API, no clock (``now`` is given).

It copies cluster-autoscaler's semantics for the queue configuration's node pools (``proto.queues.NodePool``):

* **Scale up.** A pod ``Pending`` with ``PodScheduled=False/Unschedulable`` and no node goes to the first pool whose
  new node would take it: the node's labels (the pool's membership labels, ``rules.node_pools.membership``) hold the
  pod's nodeSelector, the pod tolerates the pool's blocking taints, and one empty node fits its requests. The pool's
  unschedulable pods are first-fit into the room of its live nodes, then of the nodes already on their way, then into
  new node shapes; the new ones are capped at ``maxNodes`` and at the simulated cloud's ``stock`` (both counting
  existing and pending nodes), and each comes ``provisioningSeconds`` from now.
* **Scale down.** A node of a pool that has run no pod (not ended) for ``scaleDownUnneededSeconds`` is tainted
  ``ToBeDeletedByClusterAutoscaler=<unix time>:NoSchedule`` while the pool keeps at least ``minNodes`` live nodes;
  on a later pass it is deleted if still empty, or untainted if a pod was bound to it meanwhile.
* **minNodes.** A pool with fewer nodes (existing and pending) than ``minNodes`` gets the rest at once.
* **Names.** ``<pool>-<n>``, a counter per pool that never goes back (seeded from the nodes that exist).

Required node affinity is not read (opsched's pods carry only preferred affinity onto pool nodes).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from opsched.proto.queues import QueuesConfig
from opsched.proto.resources import amount, effective, requested
from opsched.rules import node_pools
from opsched.services.admission.model.nodes import NodeInfo, tolerates

TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"  # cluster-autoscaler's key (one of node_pools.LEAVING_TAINTS)
POOL_LABEL = "opsched.io/node-pool"  # informational, on the simulated nodes; membership is node_pools' rule
_TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Pool:
    """One node pool as the autoscaler grows it: what a new node is, and its limits."""

    name: str
    labels: dict[str, str]  # membership labels: a node of the pool carries them all
    allocatable: dict[str, float]  # one new node (amounts, ``proto.resources.amount``)
    taints: tuple[dict[str, Any], ...] = ()
    min_nodes: int = 0
    max_nodes: int = 1
    provisioning_seconds: float = 300.0
    unneeded_seconds: float = 600.0
    quantities: dict[str, str] = field(default_factory=dict)  # allocatable as written (what a new node reports)


def pools_from(config: QueuesConfig, agent: str = node_pools.DEFAULT_AGENT,
               defaults: dict[str, str] | None = None) -> list[Pool]:
    """The pools of ``agent``'s cluster in a queue configuration, in its order. ``defaults``: what a new node offers
    of a resource its pool's ``allocatable`` does not name (the simulated kubelet's cpu, memory, pods)."""
    out = []
    for flavor, pool in node_pools.pools_of(config):
        if agent not in node_pools.agents_of(config, flavor):
            continue
        quantities = {**(defaults or {}), **{r: str(q) for r, q in pool.allocatable.items()}}
        out.append(Pool(name=pool.name, labels=node_pools.membership(flavor, pool),
                        allocatable={r: amount(r, q) for r, q in quantities.items()},
                        taints=tuple(pool.taints), min_nodes=pool.min_nodes, max_nodes=pool.max_nodes,
                        provisioning_seconds=pool.provisioning_seconds,
                        unneeded_seconds=pool.scale_down_unneeded_seconds,
                        quantities=quantities))
    return out


@dataclass(frozen=True)
class PodView:
    """What the autoscaler reads of a pod."""

    key: str  # namespace/name
    node: str = ""  # spec.nodeName ("" unbound)
    phase: str = "Pending"
    unschedulable: bool = False  # PodScheduled=False with reason Unschedulable
    selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    requests: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, pod: dict[str, Any]) -> PodView:
        """From a pod as the API server returns it (camelCase dict)."""
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        unschedulable = any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                            and c.get("reason") == "Unschedulable" for c in status.get("conditions") or [])

        def amounts(c: dict[str, Any]) -> dict[str, float]:
            res = c.get("resources") or {}
            return requested(res.get("limits") or {}, res.get("requests") or {})

        return cls(key=f"{meta.get('namespace', '')}/{meta['name']}", node=spec.get("nodeName") or "",
                   phase=status.get("phase") or "Pending", unschedulable=unschedulable,
                   selector=dict(spec.get("nodeSelector") or {}), tolerations=tuple(spec.get("tolerations") or []),
                   requests=effective(map(amounts, spec.get("containers") or []),
                                      map(amounts, spec.get("initContainers") or [])))

    @property
    def waiting(self) -> bool:
        return self.phase == "Pending" and not self.node and self.unschedulable

    @property
    def holds_node(self) -> bool:
        return bool(self.node) and self.phase not in _TERMINAL


@dataclass(frozen=True)
class NodeView:
    """What the autoscaler reads of a node."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, Any], ...] = ()
    allocatable: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, node: dict[str, Any]) -> NodeView:
        alloc = {}
        for resource, qty in ((node.get("status") or {}).get("allocatable") or {}).items():
            try:
                alloc[resource] = amount(resource, qty)
            except ValueError:
                continue
        return cls(node["metadata"]["name"], dict(node["metadata"].get("labels") or {}),
                   tuple((node.get("spec") or {}).get("taints") or []), alloc)

    @property
    def marked(self) -> bool:
        """Tainted for deletion by this autoscaler."""
        return any(t.get("key") == TO_BE_DELETED_TAINT for t in self.taints)


@dataclass(frozen=True)
class NodeToAdd:
    at: float  # when it comes (``now + provisioningSeconds``)
    pool: str
    name: str


@dataclass
class Actions:
    add: list[NodeToAdd] = field(default_factory=list)
    taint: list[str] = field(default_factory=list)
    untaint: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)


def taint_for_deletion(unix_now: int) -> dict[str, str]:
    """cluster-autoscaler's taint on a node it is about to delete (the value: when, in unix seconds)."""
    return {"key": TO_BE_DELETED_TAINT, "value": str(unix_now), "effect": "NoSchedule"}


def member(pool: Pool, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in pool.labels.items())


def takes(pool: Pool, pod: PodView) -> bool:
    """Would a new empty node of the pool take the pod: selector, taints, requests."""
    node_labels = {**pool.labels, POOL_LABEL: pool.name}
    return (all(node_labels.get(k) == v for k, v in pod.selector.items())
            and tolerates(NodeInfo(pool.name, node_labels, {}, list(pool.taints), True), list(pod.tolerations))
            and _fits(pod.requests, dict(pool.allocatable)))


def _fits(request: dict[str, float], free: dict[str, float]) -> bool:
    return all(value <= free.get(resource, 0.0) + 1e-9 for resource, value in request.items() if value > 0)


def _take(request: dict[str, float], free: dict[str, float]) -> None:
    for resource, value in request.items():
        free[resource] = free.get(resource, 0.0) - value


class Autoscaling:
    """The decisions of successive passes; it remembers only when each node became empty and the name counters."""

    def __init__(self, pools: list[Pool], stock: dict[str, int] | None = None) -> None:
        self.pools = pools
        self.stock = dict(stock or {})
        self.empty_since: dict[str, float] = {}
        self.counters: dict[str, int] = {}

    def plan(self, now: float, pods: list[PodView], nodes: list[NodeView], pending: list[NodeToAdd]) -> Actions:
        """This pass's actions, given the pods and nodes that exist and the adds still on their way."""
        actions = Actions()
        present = {n.name for n in nodes}
        self.empty_since = {k: v for k, v in self.empty_since.items() if k in present}  # gone: forgotten
        held: dict[str, list[PodView]] = {}
        for pod in pods:
            if pod.holds_node:
                held.setdefault(pod.node, []).append(pod)
        claimed: set[str] = set()
        for pool in self.pools:
            mine = [n for n in nodes if member(pool, n.labels)]
            coming = [p for p in pending if p.pool == pool.name]
            self._seed_counter(pool, mine, coming)
            waiting = sorted((p for p in pods if p.waiting and p.key not in claimed and takes(pool, p)),
                             key=lambda p: p.key)
            claimed.update(p.key for p in waiting)
            adds, needed = self._scale_up(now, pool, waiting, mine, coming, held)
            actions.add += adds
            self._scale_down(now, pool, mine, held, needed, actions)
        return actions

    def _seed_counter(self, pool: Pool, mine: list[NodeView], coming: list[NodeToAdd]) -> None:
        pattern = re.compile(rf"^{re.escape(pool.name)}-(\d+)$")
        seen = [int(m[1]) + 1 for m in (pattern.match(n) for n in [*(x.name for x in mine), *(c.name for c in coming)])
                if m]
        self.counters[pool.name] = max([self.counters.get(pool.name, 0), *seen])

    def _name(self, pool: Pool) -> str:
        n = self.counters.get(pool.name, 0)
        self.counters[pool.name] = n + 1
        return f"{pool.name}-{n}"

    def _scale_up(self, now: float, pool: Pool, waiting: list[PodView], mine: list[NodeView],
                  coming: list[NodeToAdd], held: dict[str, list[PodView]]) -> tuple[list[NodeToAdd], set[str]]:
        """The adds, and the live nodes a waiting pod will take (kube-scheduler retries it with a back-off of up to
        10 s: such a node is needed, not idle)."""
        bins: list[tuple[str, dict[str, float]]] = []
        for node in mine:
            if node.marked or node_pools.leaving(list(node.taints)):
                continue
            free = dict(node.allocatable or pool.allocatable)
            for pod in held.get(node.name, []):
                _take(pod.requests, free)
            bins.append((node.name, free))
        bins += [("", dict(pool.allocatable)) for _ in coming]
        new: list[tuple[str, dict[str, float]]] = []
        needed: set[str] = set()
        for pod in waiting:
            found = next(((n, b) for n, b in [*bins, *new] if _fits(pod.requests, b)), None)
            if found is None:
                found = ("", dict(pool.allocatable))
                new.append(found)
            name, room = found
            _take(pod.requests, room)
            if name:
                needed.add(name)
        existing = len(mine) + len(coming)
        cap = pool.max_nodes - existing
        if pool.name in self.stock:
            cap = min(cap, self.stock[pool.name] - existing)
        count = max(len(new), pool.min_nodes - existing)
        count = max(0, min(count, cap))
        delay = pool.provisioning_seconds if new else 0.0  # minNodes come at once
        return [NodeToAdd(now + delay, pool.name, self._name(pool)) for _ in range(count)], needed

    def _scale_down(self, now: float, pool: Pool, mine: list[NodeView], held: dict[str, list[PodView]],
                    needed: set[str], actions: Actions) -> None:
        live = sum(1 for n in mine if not n.marked)
        for node in sorted(mine, key=lambda n: n.name):
            if held.get(node.name) or node.name in needed:
                self.empty_since[node.name] = now  # idle, if at all, from the last pass that needed it
                if node.marked and held.get(node.name):
                    actions.untaint.append(node.name)
                continue
            since = self.empty_since.setdefault(node.name, now)
            if node.marked:
                actions.delete.append(node.name)
                self.empty_since.pop(node.name, None)
            elif now - since >= pool.unneeded_seconds and live > pool.min_nodes:
                actions.taint.append(node.name)
                live -= 1
