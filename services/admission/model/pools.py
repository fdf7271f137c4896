"""A node pool as admission sees it at snapshot time (``PoolReach``): its real nodes, the ones leaving, how many it may
still add, and the shape of a new one — the virtual nodes ``state.capacity`` adds, named ``~<agent>/<pool>/<i>``."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from opsched.proto.queues import Flavor, NodePool
from opsched.proto.resources import amount as quantity_of
from opsched.rules.node_pools import shape_labels
from opsched.services.admission.model import agents, placement
from opsched.services.admission.model.nodes import NodeInfo


@dataclass(frozen=True)
class PoolReach:
    """One pool at snapshot time: its nodes that exist (``existing``, leaving ones included), how many of those are
    leaving, how many it may still add (``reach``), and until when its budget stops it adding any."""

    agent: str
    flavor: Flavor
    pool: NodePool
    existing: int = 0
    leaving: int = 0
    reach: int = 0
    blocked_until: datetime | None = None
    blocked_window: str = ""  # the window of the spent budget: day, week, month

    def shape(self, i: int | str = "shape") -> NodeInfo:
        """A new node of the pool, empty (``i``: which of its virtual nodes)."""
        labels = {**shape_labels(self.flavor, self.pool), **agents.selector(self.agent)}
        return NodeInfo(virtual_name(self.agent, self.pool.name, i), labels, allocatable_of(self.pool),
                        list(self.pool.taints), True, virtual_pool=self.pool.name)


def virtual_name(agent: str, pool: str, i: int | str) -> str:
    """A virtual node's name: deterministic, and never a real node's (``~`` is not allowed in those)."""
    return f"{placement.VIRTUAL}{agent}/{pool}/{i}"


def allocatable_of(pool: NodePool) -> dict[str, float]:
    out = {}
    for resource, qty in pool.allocatable.items():
        try:
            out[resource] = quantity_of(resource, qty)
        except ValueError:  # refused when the configuration is loaded (``rules.queues_file``)
            continue
    return out
