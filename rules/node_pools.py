"""Node pools that an autoscaler grows (``proto.queues.NodePool`` behind a flavor): which nodes are a pool's, which
are leaving, and how many more the pool may add. Pure; one rule shared by admission (reachable capacity), the cost
service (what a node cost) and the simulated autoscaler.

A node is of a pool when its labels hold the pool's membership labels (the flavor's ``nodeLabels`` and the pool's
own) and it is in the pool's agent's cluster. A node an autoscaler is about to delete carries a ``NoSchedule`` (or
``NoExecute``) taint of a known key (cluster-autoscaler's ``ToBeDeletedByClusterAutoscaler``, Karpenter's
``karpenter.sh/disrupted``, formerly ``karpenter.sh/disruption``): it still counts toward ``maxNodes`` (the
autoscaler counts it until it is gone) but offers no room."""
from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from opsched.proto.queues import Flavor, NodePool, QueuesConfig

LEAVING_TAINTS = ("ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted", "karpenter.sh/disruption")
LEAVING_EFFECTS = ("NoSchedule", "NoExecute")
DEFAULT_AGENT = ""  # the default agent's nodes (``NodeObserved.agent`` of the dispatcher without OPSCHED_AGENT)


def leaving(taints: list[dict[str, Any]]) -> bool:
    """Is an autoscaler removing the node: a taint of a ``LEAVING_TAINTS`` key with a blocking effect."""
    return any(t.get("key") in LEAVING_TAINTS and t.get("effect") in LEAVING_EFFECTS for t in taints)


def pools_of(config: QueuesConfig) -> list[tuple[Flavor, NodePool]]:
    """Every flavor that has a pool, with it, in the configuration's order."""
    return [(f, f.pool) for f in config.flavors if f.pool is not None]


def membership(flavor: Flavor, pool: NodePool) -> dict[str, str]:
    """The labels a node of the pool carries: the flavor's ``nodeLabels`` and the pool's own."""
    return {**flavor.node_labels, **pool.node_labels}


def shape_labels(flavor: Flavor, pool: NodePool) -> dict[str, str]:
    """The labels a new node of the pool is known to carry, before it exists: its membership labels. Its name (and
    so ``kubernetes.io/hostname``) is unknown until it comes, so no preferred host can be given for it."""
    return membership(flavor, pool)


def agents_of(config: QueuesConfig, flavor: Flavor) -> set[str]:
    """The clusters a flavor's nodes are in: its own agent, else those of the queues whose quota names it, else the
    default agent's ("")."""
    if flavor.agent:
        return {flavor.agent}
    users = {q.agent or DEFAULT_AGENT for q in config.queues
             if any(fq.name == flavor.name for r in q.resources for fq in r.flavors)}
    return users or {DEFAULT_AGENT}


def pool_of(config: QueuesConfig, agent: str, labels: dict[str, str]) -> str:
    """The name of the first pool (in the configuration's order) a node of ``agent``'s cluster with these labels
    belongs to; "" when it is of no pool."""
    for flavor, pool in pools_of(config):
        if agent in agents_of(config, flavor) and all(labels.get(k) == v for k, v in membership(flavor, pool).items()):
            return pool.name
    return ""


def reach(pool: NodePool, existing: int, budget_blocked: bool) -> int:
    """How many nodes the pool may still add: none while its budget is spent, else up to ``maxNodes``. ``existing``
    counts its leaving nodes too (the autoscaler counts them until they are gone)."""
    return 0 if budget_blocked else max(0, pool.max_nodes - existing)


def token_of(agent: str, node: str, created: datetime) -> str:
    """One node's life, as a subject token and op_id (``NodeCostRecorded``): a node name reused later is another."""
    return "node-" + hashlib.sha256(f"{agent}/{node}/{created.isoformat()}".encode()).hexdigest()[:20]
