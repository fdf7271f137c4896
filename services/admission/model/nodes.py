"""The nodes as admission knows them (``NodeInfo``, keyed per agent), and the rules a pod must pass to go on
one: node selector, required node affinity, taints. ``describe`` says what no node offers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opsched.proto.cluster import NodeObserved
from opsched.proto.resources import GPU_MEMORY, GPU_PRODUCT_LABELS, is_accelerator
from opsched.proto.resources import amount as quantity_of
from opsched.rules.node_pools import leaving
from opsched.rules.taints import untolerated
from opsched.services.admission.model import agents
from opsched.services.admission.model.node_affinity import Terms, matches
from opsched.services.admission.model.node_affinity import describe as describe_affinity


@dataclass
class NodeInfo:
    name: str
    labels: dict[str, str]
    allocatable: dict[str, float]
    taints: list[dict[str, Any]]
    schedulable: bool
    leaving: bool = False  # an autoscaler is removing it (``rules.node_pools.leaving``): no new pod goes there
    virtual_pool: str = ""  # a node its pool may still add (``state.capacity``), not one that exists

    @property
    def offers_room(self) -> bool:
        """May a new pod go there: schedulable and not being removed."""
        return self.schedulable and not self.leaving

    @classmethod
    def of(cls, event: NodeObserved) -> "NodeInfo":
        alloc = {}
        for resource, qty in event.allocatable.items():
            try:
                alloc[resource] = quantity_of(resource, qty)
            except ValueError:
                continue
        labels = {**event.labels, **agents.selector(event.agent)}  # the agent: admission's own label
        return cls(agents.node_key(event.agent, event.node), labels, alloc, list(event.taints), event.schedulable,
                   leaving=leaving(event.taints))


def selects(node: NodeInfo, selector: dict[str, str]) -> bool:
    return all(node.labels.get(k) == v for k, v in selector.items())


def allows(node: NodeInfo, selector: dict[str, str], tolerations: list[dict[str, Any]],
           affinity: Terms | None) -> bool:
    """Would kube-scheduler let the pod onto this node: node selector, required node affinity, taints."""
    return selects(node, selector) and matches(node.name, node.labels, affinity) and tolerates(node, tolerations)


def tolerates(node: NodeInfo, tolerations: list[dict[str, Any]]) -> bool:
    return not untolerated(node.taints, tolerations)


def describe(request: dict[str, float], selector: dict[str, str], affinity: Terms | None = None) -> str:
    """'8 x nvidia.com/gpu of product H100' — what no node offers."""
    parts = [f"{amount:g} GiB of {resource} on one card" if resource == GPU_MEMORY else f"{amount:g} x {resource}"
             for resource, amount in request.items() if is_accelerator(resource)]
    parts = parts or [f"{amount:g} {resource}" for resource, amount in request.items()]
    product = next((selector[label] for label in GPU_PRODUCT_LABELS if label in selector), None)
    text = " and ".join(parts)
    if product:
        text += f" of product {product}"
    agent = selector.get(agents.AGENT_LABEL)
    if agent:
        text += f" in agent {agent}'s cluster"
    others = {k: v for k, v in selector.items() if k not in GPU_PRODUCT_LABELS and k != agents.AGENT_LABEL}
    if others:
        text += " on nodes labelled " + ", ".join(f"{k}={v}" for k, v in sorted(others.items()))
    if affinity:
        text += " matching " + describe_affinity(affinity)
    return text
