"""Cluster capacity from the nodes the dispatcher reports: can some node take this op now, and
could any node ever take it? Free capacity per node = allocatable - ops placed there - ops admitted
but not yet placed (assigned first-fit in this snapshot)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proto.cluster import NodeObserved
from proto.resources import parse_quantity

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass
class NodeInfo:
    name: str
    labels: dict[str, str]
    allocatable: dict[str, float]
    taints: list[dict[str, Any]]
    schedulable: bool

    @classmethod
    def of(cls, event: NodeObserved) -> "NodeInfo":
        alloc = {}
        for resource, qty in event.allocatable.items():
            try:
                alloc[resource] = float(parse_quantity(qty))
            except ValueError:
                continue
        return cls(event.node, dict(event.labels), alloc, list(event.taints), event.schedulable)


def selects(node: NodeInfo, selector: dict[str, str]) -> bool:
    return all(node.labels.get(k) == v for k, v in selector.items())


def tolerates(node: NodeInfo, tolerations: list[dict[str, Any]]) -> bool:
    return all(_tolerated(t, tolerations) for t in node.taints if t.get("effect") in BLOCKING_EFFECTS)


def _tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    for tol in tolerations:
        if tol.get("effect") not in (None, "", taint.get("effect")):
            continue
        if tol.get("operator") == "Exists" and tol.get("key") in (None, "", taint.get("key")):
            return True
        if tol.get("key") == taint.get("key") and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


@dataclass
class Capacity:
    nodes: dict[str, NodeInfo]
    free: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: dict[str, NodeInfo]) -> "Capacity":
        return cls(nodes, {n: dict(info.allocatable) for n, info in nodes.items()})

    @property
    def known(self) -> bool:
        return bool(self.nodes)

    def candidates(self, selector: dict[str, str], tolerations: list[dict[str, Any]]) -> list[NodeInfo]:
        return [n for n in self.nodes.values()
                if n.schedulable and selects(n, selector) and tolerates(n, tolerations)]

    def find(self, request: dict[str, float], selector: dict[str, str],
             tolerations: list[dict[str, Any]]) -> str | None:
        """The first node (by name) with room for the whole request now."""
        for node in sorted(self.candidates(selector, tolerations), key=lambda n: n.name):
            if _fits(self.free[node.name], request):
                return node.name
        return None

    def ever(self, request: dict[str, float], selector: dict[str, str], tolerations: list[dict[str, Any]]) -> bool:
        """Could any node take it, were it empty and schedulable (a cordoned node may come back)?"""
        return any(_fits(n.allocatable, request) for n in self.nodes.values()
                   if selects(n, selector) and tolerates(n, tolerations))

    def place(self, pods: list[dict[str, float]], selector: dict[str, str],
              tolerations: list[dict[str, Any]]) -> list[str] | None:
        """A node for every pod (first-fit, all or nothing), or None."""
        candidates = sorted(self.candidates(selector, tolerations), key=lambda n: n.name)
        scratch = {n.name: dict(self.free[n.name]) for n in candidates}
        out = []
        for pod in pods:
            node = next((n.name for n in candidates if _fits(scratch[n.name], pod)), None)
            if node is None:
                return None
            for resource, amount in pod.items():
                if resource in scratch[node]:
                    scratch[node][resource] -= amount
            out.append(node)
        return out

    def ever_all(self, pods: list[dict[str, float]], selector: dict[str, str],
                 tolerations: list[dict[str, Any]]) -> bool:
        return all(self.ever(pod, selector, tolerations) for pod in pods)

    def take_all(self, nodes: list[str] | None, pods: list[dict[str, float]]) -> None:
        for node, pod in zip(nodes or [], pods):
            self.take(node, pod)

    def give_back(self, node: str | None, request: dict[str, float]) -> None:
        if node is None or node not in self.free:
            return
        for resource, amount in request.items():
            if resource in self.free[node]:
                self.free[node][resource] += amount

    def take(self, node: str | None, request: dict[str, float]) -> None:
        if node is None or node not in self.free:
            return
        for resource, amount in request.items():
            if resource in self.free[node]:
                self.free[node][resource] -= amount


def _fits(free: dict[str, float], request: dict[str, float]) -> bool:
    return all(free.get(resource, 0.0) + 1e-9 >= amount for resource, amount in request.items() if amount > 0)


def describe(request: dict[str, float], selector: dict[str, str]) -> str:
    """'8 x nvidia.com/gpu of product H100' — what no node offers."""
    from proto.resources import GPU_PRODUCT_LABELS, is_accelerator

    parts = [f"{amount:g} x {resource}" for resource, amount in request.items() if is_accelerator(resource)]
    parts = parts or [f"{amount:g} {resource}" for resource, amount in request.items()]
    product = next((selector[label] for label in GPU_PRODUCT_LABELS if label in selector), None)
    text = " and ".join(parts)
    if product:
        text += f" of product {product}"
    others = {k: v for k, v in selector.items() if k not in GPU_PRODUCT_LABELS}
    if others:
        text += " on nodes labelled " + ", ".join(f"{k}={v}" for k, v in sorted(others.items()))
    return text
