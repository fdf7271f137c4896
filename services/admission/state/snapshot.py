"""What one cycle decides on: running counts (of them, services), cost in use, quota usage and free node capacity,
aggregated from the active ops (bounded by what runs, never by the pending depth).

The usage cache (``usage_cache``) keeps one snapshot up to date as ops start and end, so a cycle does
not rebuild it: only a node change rebuilds it, once. ``same`` compares it with a fresh build."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from opsched.proto.queue_stops import QueueStopSet
from opsched.rules import node_pools
from opsched.services.admission.model import agents, placement
from opsched.services.admission.model.node_affinity import Terms, required_terms
from opsched.services.admission.model.nodes import NodeInfo, selects
from opsched.services.admission.model.pools import PoolReach
from opsched.services.admission.model.queues import Book, Usage
from opsched.services.admission.model.records import Ghost, OpRecord
from opsched.services.admission.state.capacity import Capacity
from opsched.services.admission.state.pool_budgets import PoolBudgets
from opsched.services.admission.state.spend import Spend


@dataclass
class Snapshot:
    book: Book
    capacity: Capacity
    now: datetime | None = None
    running: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    services: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # of ``running``: service ops
    cost_used: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    usage: Usage = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    starved: set[str] = field(default_factory=set)  # queues with ops waiting for their own lent quota
    placed: dict[str, list[str]] = field(default_factory=dict)  # op -> node of each pod (as assumed)
    unplaced: set[str] = field(default_factory=set)  # active ops no node had room for (nodes went away)
    batch_running: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    spend: Spend = field(default_factory=Spend)  # actual spend per budget window (shared, read-only)
    committed: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)  # expected of active ops
    silent: dict[str, datetime] = field(default_factory=dict)  # agents that get no new ops now -> last heartbeat
    stopped: dict[str, QueueStopSet] = field(default_factory=dict)  # queues held or drained (``queue_stops``)

    @classmethod
    def of(cls, book: Book, nodes: dict[str, NodeInfo], active: Iterable[OpRecord],
           ghosts: dict[str, list[Ghost]], spend: Spend, now: datetime | None = None,
           pool_budgets: PoolBudgets | None = None) -> "Snapshot":
        """Built afresh from the nodes (and the nodes the pools may still add), the active ops and the room held for
        preemptors."""
        snap = cls(book, Capacity.of(nodes, reaches(book, nodes, pool_budgets or PoolBudgets(), now)), now,
                   spend=spend)
        unplaced: list[OpRecord] = []
        for op in active:
            snap._count(op, +1)
            if op.node and len(op.pods) == 1:
                snap.placed[op.op_id] = [op.node]
                snap.capacity.take(op.node, op.pods[0])
            else:
                unplaced.append(op)
        for op in sorted(unplaced, key=lambda o: o.key):
            nodes_of = snap.capacity.place(op.pods, selector_of(op), tolerations_of(op), affinity_of(op),
                                           placement.rule_of(book, op.flavors))
            snap.assume(op, nodes_of or [], counted=True)
        for held in ghosts.values():
            for ghost in held:
                snap.hold(ghost, +1)
        return snap

    def hold(self, ghost: Ghost, sign: int) -> None:
        """Room a preempted victim left, held for its preemptor (as if the victim still ran)."""
        self.running[ghost.queue] += sign
        if ghost.service:
            self.services[ghost.queue] += sign
        self.cost_used[ghost.queue] += sign * ghost.estimate
        for resource, flavor in ghost.flavors.items():
            self.usage[ghost.queue][(resource, flavor)] += sign * ghost.request.get(resource, 0.0)
        if ghost.node and len(ghost.pods) == 1:
            (self.capacity.take if sign > 0 else self.capacity.give_back)(ghost.node, ghost.pods[0])

    def _count(self, op: OpRecord, sign: int) -> None:
        self.running[op.queue] += sign
        if op.service:
            self.services[op.queue] += sign
        if op.spec.batch:
            self.batch_running[op.spec.batch] += sign
        self.cost_used[op.queue] += sign * op.estimate
        self._commit(op, sign)
        for resource, flavor in op.flavors.items():
            self.usage[op.queue][(resource, flavor)] += sign * op.request.get(resource, 0.0)

    def _commit(self, op: OpRecord, sign: int) -> None:
        """What an active op is expected to spend, counted against its queue's and project's budgets."""
        for key in op.scopes:
            money, gpu = self.committed.get(key, (0.0, 0.0))
            self.committed[key] = (money + sign * op.estimate, gpu + sign * op.gpu_hours)

    def assume(self, op: OpRecord, nodes: list[str] | None = None, counted: bool = False) -> None:
        """Count an op that became active (its flavors set on the record), where its pods are: its
        node, else where the cycle that admitted it placed them, else first-fit now."""
        if not counted:
            self._count(op, +1)
        if op.node and len(op.pods) == 1:
            nodes = [op.node]
        elif nodes is None and self.capacity.knows(op.agent):
            nodes = self.capacity.place(op.pods, selector_of(op), tolerations_of(op), affinity_of(op),
                                        placement.rule_of(self.book, op.flavors))
        self.placed[op.op_id] = list(nodes or [])
        self.capacity.take_all(nodes, op.pods)
        if not nodes and op.pods and self.capacity.knows(op.agent):
            self.unplaced.add(op.op_id)

    def locate(self, op: OpRecord) -> None:
        """An active op's node became known: its pod is there, not where it was assumed."""
        if len(op.pods) != 1 or op.op_id not in self.placed:
            return
        for node, pod in zip(self.placed[op.op_id], op.pods):
            self.capacity.give_back(node, pod)
        self.placed[op.op_id] = [op.node] if op.node else []
        self.capacity.take_all(self.placed[op.op_id], op.pods)

    def release(self, op: OpRecord) -> None:
        """Take an active op out (to simulate preempting it)."""
        self._count(op, -1)
        self.unplaced.discard(op.op_id)
        for node, pod in zip(self.placed.pop(op.op_id, []), op.pods):
            self.capacity.give_back(node, pod)

    def copy(self) -> "Snapshot":
        """A copy to simulate on (preemption plans take ops out of it): every count is copied; the queue book,
        the spend and the stopped queues are shared (a cycle never changes them), and so is the capacity's fixed
        part."""
        usage: Usage = defaultdict(lambda: defaultdict(float))
        for queue, used in self.usage.items():
            usage[queue] = defaultdict(float, used)
        return Snapshot(self.book, self.capacity.copy(), self.now, running=defaultdict(int, self.running),
                        services=defaultdict(int, self.services),
                        cost_used=defaultdict(float, self.cost_used), usage=usage, starved=set(self.starved),
                        placed={op_id: list(nodes) for op_id, nodes in self.placed.items()},
                        unplaced=set(self.unplaced), batch_running=defaultdict(int, self.batch_running),
                        spend=self.spend, committed=dict(self.committed), silent=dict(self.silent),
                        stopped=self.stopped)


def reaches(book: Book, nodes: dict[str, NodeInfo], budgets: PoolBudgets, now: datetime | None) -> list[PoolReach]:
    """Each pool of the configuration, per agent whose cluster it is in: its real nodes (leaving ones included) and
    how many it may still add at ``now`` (``rules.node_pools.reach``)."""
    out = []
    for flavor, pool in node_pools.pools_of(book.config):
        labels = node_pools.membership(flavor, pool)
        spent = budgets.spent(pool.name, now)
        for agent in sorted(node_pools.agents_of(book.config, flavor)):
            members = [n for n in nodes.values() if selects(n, {**labels, **agents.selector(agent)})]
            existing = len(members)
            out.append(PoolReach(agent, flavor, pool, existing, sum(n.leaving for n in members),
                                 node_pools.reach(pool, existing, spent is not None),
                                 spent.resets_at if spent else None, spent.window if spent else ""))
    return out


def pools_key(book: Book, budgets: PoolBudgets, now: datetime | None) -> bytes:
    """What the virtual nodes of a snapshot depend on besides the nodes: the pools declared, and which are stopped
    by their budget at ``now`` (a change builds the snapshot afresh)."""
    pools = node_pools.pools_of(book.config)
    return msgspec.json.encode([[f.name, p, budgets.spent(p.name, now) is not None] for f, p in pools])


def selector_of(op: OpRecord) -> dict[str, str]:
    return {**op.spec.environment.node_selector, **op.node_selector, **agents.selector(op.agent)}


def affinity_of(op: OpRecord) -> Terms | None:
    return required_terms(op.spec.environment.affinity)


def tolerations_of(op: OpRecord) -> list:
    return list(op.spec.environment.tolerations) + [t for t in op.tolerations
                                                    if t not in op.spec.environment.tolerations]


def same(a: Snapshot, b: Snapshot) -> list[str]:
    """Where two snapshots differ (counts, usage, commitments, free capacity); empty when alike."""
    out = []
    for name in ("running", "services", "cost_used", "batch_running"):
        if _nonzero(getattr(a, name)) != _nonzero(getattr(b, name)):
            out.append(f"{name}: {_nonzero(getattr(a, name))} != {_nonzero(getattr(b, name))}")
    ua, ub = ({k: v for k, v in ((k, _nonzero(v)) for k, v in u.items()) if v} for u in (a.usage, b.usage))
    if ua != ub:
        out.append(f"usage: {ua} != {ub}")
    placed_all = not a.unplaced and not b.unplaced  # else first-fit order decides which op found room
    if placed_all and _nonzero(_total(a.capacity.free)) != _nonzero(_total(b.capacity.free)):
        out.append(f"free: {_total(a.capacity.free)} != {_total(b.capacity.free)}")
    committed = {k: (_r(m), _r(g)) for k, (m, g) in a.committed.items() if _r(m) or _r(g)}
    if committed != {k: (_r(m), _r(g)) for k, (m, g) in b.committed.items() if _r(m) or _r(g)}:
        out.append(f"committed: {a.committed} != {b.committed}")
    return out


def _total(free: dict[str, dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for resources in free.values():
        for resource, amount in resources.items():
            out[resource] += amount
    return out


def _nonzero(values: dict) -> dict:
    return {k: _r(v) for k, v in values.items() if _r(v)}


def _r(value: float) -> float:
    return round(value, 6)
