"""Nodes as the dispatcher reports them, and their taints."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from opsched.proto.cluster import NodeObserved, NodeRemoved
from tests.builders.clock import T0
from tests.builders.specs import GPU, GPU_PRODUCT


def node(name: str = "gpu-node-1", *, gpus: int = 0, product: str | None = None, cpu: str = "64",
         memory: str = "256Gi", taints: list[dict[str, Any]] | None = None, schedulable: bool = True,
         labels: dict[str, str] | None = None, resource: str = GPU, at: datetime = T0) -> NodeObserved:
    """A node as the dispatcher reports it: ``node("gpu-a", gpus=2, product="A100")``."""
    node_labels = {**({GPU_PRODUCT: product} if product else {}), **(labels or {})}
    allocatable = {"cpu": cpu, "memory": memory, **({resource: str(gpus)} if gpus else {})}
    return NodeObserved(node=name, at=at, labels=node_labels, allocatable=allocatable,
                        taints=list(taints or []), schedulable=schedulable)


def node_removed(name: str = "gpu-node-1", *, at: datetime = T0) -> NodeRemoved:
    return NodeRemoved(node=name, at=at)


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, Any]:
    return {"key": key, "value": value, "effect": effect}


def first_fit(capacity, request: dict[str, float], selector: dict[str, str], tolerations: list) -> str | None:
    """The node admission would place a one-pod ``request`` on now (first fit by name), or None."""
    placed = capacity.place([request], selector, tolerations)
    return placed[0] if placed else None
