"""Cluster facts the dispatcher observes and publishes, so admission knows capacity per flavor
without a Kubernetes client. One subject per node; the stream keeps only the latest per node."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from opsched.proto.spec import Wire


class ClusterEvent(Wire, tag_field="type", kw_only=True):
    node: str
    at: datetime
    agent: str = ""  # whose cluster the node is in ("": the default agent's)


class NodeObserved(ClusterEvent, tag="node_observed", kw_only=True):
    labels: dict[str, str] = {}
    allocatable: dict[str, str] = {}
    taints: list[dict[str, Any]] = []
    schedulable: bool = True  # Ready and not cordoned
    created: datetime | None = None  # the node's metadata.creationTimestamp (None: reported before it was carried)


class NodeRemoved(ClusterEvent, tag="node_removed", kw_only=True):
    """The node is gone. It carries the node's last fact, so that its removal alone can be charged (the stream keeps
    one message per node: its ``node_observed`` is replaced by this)."""

    created: datetime | None = None
    labels: dict[str, str] = {}
    allocatable: dict[str, str] = {}


class AgentHeartbeat(ClusterEvent, tag="agent_heartbeat", kw_only=True):
    """A named agent's dispatcher is alive (every ``OPSCHED_AGENT_HEARTBEAT_S``, on ``cluster.agent.<agent>``: the
    stream keeps the latest). One silent past its ``heartbeatTimeoutSeconds`` gets no new ops; its running ops are
    reported lost past ``lostAfterSeconds`` (``services.admission.policies.agents``)."""

    node: str = ""  # no node: the agent itself


CLUSTER_EVENTS: tuple[type[ClusterEvent], ...] = (NodeObserved, NodeRemoved, AgentHeartbeat)
