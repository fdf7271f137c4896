"""Cluster facts the dispatcher observes and publishes, so admission knows capacity per flavor
without a Kubernetes client. One subject per node; the stream keeps only the latest per node."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from proto.spec import Wire


class ClusterEvent(Wire, tag_field="type", kw_only=True):
    node: str
    at: datetime
    agent: str = ""  # whose cluster the node is in ("": the default agent's)


class NodeObserved(ClusterEvent, tag="node_observed", kw_only=True):
    labels: dict[str, str] = {}
    allocatable: dict[str, str] = {}
    taints: list[dict[str, Any]] = []
    schedulable: bool = True  # Ready and not cordoned


class NodeRemoved(ClusterEvent, tag="node_removed", kw_only=True):
    pass


CLUSTER_EVENTS: tuple[type[ClusterEvent], ...] = (NodeObserved, NodeRemoved)
