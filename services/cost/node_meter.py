"""What nodes cost: each node from its creation to its removal, whether or not it ran anything. The nodes come from
the cluster stream (``node_observed``, ``node_removed``: a removal carries the node's last fact, so it alone can be
charged); a removal is charged once (``node_cost_recorded``, its op id the node's token), at the node's hourly price
(``rules.pricing.node_hourly``), split pro rata of what ran on it (``occupancy``). The nodes still open have a spend
so far (``open_spend``), for ``opsched cost`` and the pool budgets. Pure: time and prices come from the caller."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from opsched.proto.cluster import ClusterEvent, NodeObserved, NodeRemoved
from opsched.proto.events import NodeCostRecorded
from opsched.proto.prices import Prices
from opsched.proto.resources import accelerators
from opsched.rules.node_pools import token_of
from opsched.rules.pricing import node_hourly
from opsched.services.cost.amounts import bounded
from opsched.services.cost.occupancy import Occupancy

NodeKey = tuple[str, str]  # agent, node
PoolOf = Callable[[str, dict[str, str]], str]  # (agent, labels) -> the queue configuration's pool ("": none)


@dataclass(frozen=True)
class NodeSpend:
    """One node's cost over an interval, split by use (``busy + stranded + idle == amount``)."""

    node: str
    agent: str
    pool: str
    price_pool: str
    seconds: float
    amount: float
    gpu_hours: float
    busy: float
    stranded: float
    idle: float


def gpus_of(allocatable: dict[str, str]) -> int:
    """The node's whole accelerator devices (a quantity that does not parse counts none)."""
    try:
        return sum(accelerators(allocatable).values())
    except ValueError:
        return 0


@dataclass
class NodeMeter:
    occupancy: Occupancy
    nodes: dict[NodeKey, NodeObserved] = field(default_factory=dict)  # the open nodes: their last fact
    first_seen: dict[NodeKey, datetime] = field(default_factory=dict)  # when created is unknown: the first fact
    charged: set[str] = field(default_factory=set)  # the tokens of the nodes charged (folded from the op stream)

    def observe(self, e: ClusterEvent) -> None:
        """Fold a cluster fact (replayed on start, then live)."""
        key = (e.agent, e.node)
        if isinstance(e, NodeObserved):
            self.nodes[key] = e
            self.first_seen.setdefault(key, e.at)
        elif isinstance(e, NodeRemoved):
            self.nodes.pop(key, None)

    def fold(self, e: NodeCostRecorded) -> None:
        self.charged.add(e.op_id)
        self.first_seen.pop((e.agent, e.node), None)

    def created_of(self, e: NodeObserved | NodeRemoved) -> datetime | None:
        """The node's creation: its own, else the last fact's, else when it was first seen (None: never seen)."""
        key = (e.agent, e.node)
        last = self.nodes.get(key)
        return e.created or (last.created if last else None) or self.first_seen.get(key)

    def charge(self, removed: NodeRemoved, pool_of: PoolOf, prices: Prices) -> NodeCostRecorded | None:
        """The charge of a removed node; None when its creation is unknown or it was charged already."""
        created = self.created_of(removed)
        if created is None:
            return None
        token = token_of(removed.agent, removed.node, created)
        if token in self.charged:
            return None
        last = self.nodes.get((removed.agent, removed.node))
        labels = removed.labels or (last.labels if last else {})
        allocatable = removed.allocatable or (last.allocatable if last else {})
        spend = self.spend(removed.node, removed.agent, labels, allocatable, created, removed.at, pool_of, prices)
        return NodeCostRecorded(
            op_id=token, at=removed.at, node=removed.node, agent=removed.agent, pool=spend.pool,
            price_pool=spend.price_pool, created=created, seconds=spend.seconds, amount=spend.amount,
            currency=prices.currency, gpu_hours=spend.gpu_hours, busy=spend.busy, stranded=spend.stranded,
            idle=spend.idle)

    def spend(self, node: str, agent: str, labels: dict[str, str], allocatable: dict[str, str], created: datetime,
              until: datetime, pool_of: PoolOf, prices: Prices) -> NodeSpend:
        """What ``node`` cost from ``created`` to ``until``, split by what ran on it."""
        price_pool, hourly = node_hourly(prices, labels, allocatable)
        seconds = max(0.0, (until - created).total_seconds())
        hours = seconds / 3600.0
        amount = bounded(round(bounded(hourly, "node hourly price") * hours, 6), "node charge")
        gpus = gpus_of(allocatable)
        split = self.occupancy.split(node, created, until, gpus)
        busy = stranded = 0.0
        if split.total > 0:
            busy = round(amount * split.busy / split.total, 6)
            stranded = round(amount * split.stranded / split.total, 6)
        idle = max(0.0, round(amount - busy - stranded, 6))
        return NodeSpend(node=node, agent=agent, pool=pool_of(agent, labels), price_pool=price_pool,
                         seconds=round(seconds, 6), amount=amount, gpu_hours=round(gpus * hours, 6),
                         busy=busy, stranded=stranded, idle=idle)

    def open_spend(self, now: datetime, pool_of: PoolOf, prices: Prices, since: datetime | None = None
                   ) -> list[NodeSpend]:
        """Each open node's spend from its creation (or ``since``, if later: a budget window's start) to ``now``
        (a node whose creation is unknown: none)."""
        out: list[NodeSpend] = []
        for (agent, node), fact in sorted(self.nodes.items()):
            created = self.created_of(fact)
            if created is not None:
                start = max(created, since) if since is not None else created
                out.append(self.spend(node, agent, fact.labels, fact.allocatable, start, max(now, start),
                                      pool_of, prices))
        return out
