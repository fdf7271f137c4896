"""Free cluster capacity from the nodes the dispatcher reports (part of the snapshot): can some node take
this op now, and could any node ever take it? Free capacity per node = allocatable - ops placed there - ops admitted
but not yet placed (assigned first-fit in this snapshot).

A flavor's node pool (``proto.queues.NodePool``) adds the nodes it may still add (``PoolReach.reach``) as virtual
nodes of the pool's shape, named ``~<agent>/<pool>/<i>``: an op placed there is admitted and waits for its node
(``Verdict.provisioning``). Real nodes are always preferred (``placement.choose``); a leaving node offers no room."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opsched.proto.resources import is_accelerator
from opsched.services.admission.model import agents, placement
from opsched.services.admission.model import gpu_sharing as sharing
from opsched.services.admission.model.node_affinity import Terms, key_of
from opsched.services.admission.model.nodes import NodeInfo, allows
from opsched.services.admission.model.pools import PoolReach


@dataclass
class Capacity:
    """Free capacity per node. The nodes are fixed for its lifetime (a node change builds a new one),
    so the nodes matching a selector are worked out once; ``open`` names the nodes with some free
    accelerator, so placing an accelerator request on a full cluster looks only at those."""

    nodes: dict[str, NodeInfo]
    free: dict[str, dict[str, float]] = field(default_factory=dict)
    open: set[str] = field(default_factory=set)
    shared: dict[str, list[float]] = field(default_factory=dict)  # GiB of GPU memory each shared pod asks, per node
    _matching: dict[tuple, tuple[list[str], set[str]]] = field(default_factory=dict)
    _ever: dict[tuple, bool] = field(default_factory=dict)
    _agents: set[str] | None = None  # the agents with nodes (worked out once: the nodes are fixed)
    pools: tuple[PoolReach, ...] = ()  # the node pools, with the virtual nodes they add among ``nodes``
    _reported: set[str] | None = None  # the agents with real nodes

    @classmethod
    def of(cls, nodes: dict[str, NodeInfo], pools: Sequence[PoolReach] = ()) -> "Capacity":
        every = dict(nodes)
        for p in pools:
            for i in range(p.reach):
                virtual = p.shape(i)
                every[virtual.name] = virtual
        cap = cls(every, {n: dict(info.allocatable) for n, info in every.items()}, pools=tuple(pools))
        cap.open = {n for n in every if _has_free_accelerator(cap.free[n])}
        return cap

    def copy(self) -> "Capacity":
        """What is free copied; the nodes and what was worked out from them alone shared (they are fixed)."""
        return Capacity(self.nodes, {node: dict(free) for node, free in self.free.items()}, set(self.open),
                        {node: list(asks) for node, asks in self.shared.items()}, self._matching, self._ever,
                        self._agents, self.pools, self._reported)

    def reported(self, agent: str) -> bool:
        """Whether ``agent``'s dispatcher has reported real nodes (virtual ones aside)."""
        if self._reported is None:
            self._reported = {n.labels.get(agents.AGENT_LABEL, "") for n in self.nodes.values() if not n.virtual_pool}
        return agent in self._reported

    def pools_for(self, selector: dict[str, str], tolerations: list[dict[str, Any]],
                  affinity: Terms | None = None) -> list[PoolReach]:
        """The pools whose new nodes the selector, the required node affinity and the tolerations allow."""
        return [p for p in self.pools if allows(p.shape(), selector, tolerations, affinity)]

    def ever_gang(self, pods: list[dict[str, float]], selector: dict[str, str], tolerations: list[dict[str, Any]],
                  affinity: Terms | None = None) -> bool:
        """Could the gang ever be placed at once: on every matching node empty, and each matching pool grown to
        ``maxNodes``. True when no pool matches (a gang on fixed nodes is judged pod by pod, as before)."""
        pools = self.pools_for(selector, tolerations, affinity)
        if not pools:
            return True
        key = ("gang", tuple(tuple(sorted(p.items())) for p in pods), tuple(sorted(selector.items())),
               repr(tolerations), key_of(affinity))
        known = self._ever.get(key)
        if known is None:
            known = self._ever[key] = self._gang_fits_grown(pods, selector, tolerations, affinity, pools)
        return known

    def _gang_fits_grown(self, pods: list[dict[str, float]], selector: dict[str, str],
                         tolerations: list[dict[str, Any]], affinity: Terms | None, pools: list[PoolReach]) -> bool:
        """The gang placed at once on every node empty, with each of ``pools`` grown to its ``maxNodes``: a node
        leaving is gone by then, and its pool may add one in its place."""
        every = {n: info for n, info in self.nodes.items() if not info.virtual_pool and not info.leaving}
        for p in pools:
            for i in range(max(0, p.pool.max_nodes - (p.existing - p.leaving))):
                virtual = p.shape(i)
                every[virtual.name] = virtual
        empty = Capacity({n: NodeInfo(i.name, i.labels, i.allocatable, i.taints, True, virtual_pool=i.virtual_pool)
                          for n, i in every.items()}, {n: dict(i.allocatable) for n, i in every.items()})
        return empty._place_on(empty._match(selector, tolerations, affinity)[0], pods, placement.FIRST_FIT) is not None

    @property
    def known(self) -> bool:
        return bool(self.nodes)

    def knows(self, agent: str) -> bool:
        """Whether ``agent``'s dispatcher has reported nodes, or its pools may add some (before that, capacity does
        not bind its ops)."""
        if self._agents is None:
            self._agents = {n.labels.get(agents.AGENT_LABEL, "") for n in self.nodes.values()}
        return agent in self._agents

    def candidates(self, selector: dict[str, str], tolerations: list[dict[str, Any]],
                   affinity: Terms | None = None) -> list[NodeInfo]:
        return [self.nodes[name] for name in self._match(selector, tolerations, affinity)[0]]

    def _match(self, selector: dict[str, str], tolerations: list[dict[str, Any]],
               affinity: Terms | None) -> tuple[list[str], set[str]]:
        """Schedulable nodes the selector and the required node affinity pick and whose taints are
        tolerated: by name, and as a set."""
        key = (tuple(sorted(selector.items())), repr(tolerations), key_of(affinity))
        found = self._matching.get(key)
        if found is None:
            names = sorted(n.name for n in self.nodes.values() if n.offers_room and allows(n, selector, tolerations,
                                                                                              affinity))
            found = self._matching[key] = (names, set(names))
        return found

    def _ordered(self, pods: list[dict[str, float]], selector: dict[str, str],
                 tolerations: list[dict[str, Any]], affinity: Terms | None) -> list[str]:
        """The candidate nodes worth trying, by name: only open ones when every pod needs an accelerator."""
        names, members = self._match(selector, tolerations, affinity)
        if pods and all(_wants_accelerator(p) for p in pods) and len(self.open) < len(names):
            return sorted(n for n in self.open if n in members)
        return names

    def ever(self, request: dict[str, float], selector: dict[str, str], tolerations: list[dict[str, Any]],
             affinity: Terms | None = None) -> bool:
        """Could any node take it, were it empty and schedulable (a cordoned node may come back), or a new node of
        a pool (even one at maxNodes: one of its nodes may empty)?"""
        key = (tuple(sorted(request.items())), tuple(sorted(selector.items())), repr(tolerations), key_of(affinity))
        known = self._ever.get(key)
        if known is None:
            shapes = [p.shape() for p in self.pools]
            known = self._ever[key] = any(_fits(n.allocatable, request) and sharing.fits([], sharing.ask_of(request),
                                                                                         sharing.cards_of(n.allocatable))
                                          for n in [*self.nodes.values(), *shapes]
                                          if allows(n, selector, tolerations, affinity))
        return known

    def place(self, pods: list[dict[str, float]], selector: dict[str, str], tolerations: list[dict[str, Any]],
              affinity: Terms | None = None, rule: placement.Rule = placement.Rule()) -> list[str] | None:
        """A node for every pod (all or nothing; which of those it fits: ``rule.policy``), or None. A gang with a
        topology key goes within one domain when one can take it all (the tightest first under binpack)."""
        candidates = self._ordered(pods, selector, tolerations, affinity)
        if rule.topology and len(pods) > 1:
            resource = placement.accelerator_of(max(pods, key=lambda p: sum(p.values())))
            for domain in placement.domains(candidates, rule.topology, lambda n: self.nodes[n].labels, resource,
                                            lambda n: self.free[n], rule.policy):
                nodes = self._place_on(domain, pods, rule.policy)
                if nodes is not None:
                    return nodes
        return self._place_on(candidates, pods, rule.policy)

    def _place_on(self, candidates: list[str], pods: list[dict[str, float]], policy: str) -> list[str] | None:
        scratch: dict[str, dict[str, float]] = {}  # nodes this placement already used
        asks: dict[str, list[float]] = {}  # GPU memory this placement already put on them
        out = []

        def free(n: str) -> dict[str, float]:
            return scratch.get(n) or self.free[n]
        for pod in pods:
            shares = sharing.ask_of(pod) > 0
            node = placement.choose(candidates, pod, policy, lambda n: _fits(free(n), pod) and (
                not shares or self._room(n, free(n), pod, asks.get(n, []))), free)
            if node is None:
                return None
            left = scratch.setdefault(node, dict(self.free[node]))
            for resource, amount in pod.items():
                if resource in left:
                    left[resource] -= amount
            asks.setdefault(node, []).append(sharing.ask_of(pod))
            out.append(node)
        return out

    def _room(self, node: str, free: dict[str, float], pod: dict[str, float], more: Sequence[float] = ()) -> bool:
        """Room for ``pod`` on ``node``: its free resources, and one card for its shared GPU memory."""
        if not _fits(free, pod):
            return False
        ask = sharing.ask_of(pod)
        return ask <= 0 or sharing.fits([*self.shared.get(node, []), *more], ask,
                                        sharing.cards_of(self.nodes[node].allocatable))

    def ever_all(self, pods: list[dict[str, float]], selector: dict[str, str],
                 tolerations: list[dict[str, Any]], affinity: Terms | None = None) -> bool:
        return all(self.ever(pod, selector, tolerations, affinity) for pod in pods)

    def take_all(self, nodes: list[str] | None, pods: list[dict[str, float]]) -> None:
        for node, pod in zip(nodes or [], pods):
            self.take(node, pod)

    def give_back(self, node: str | None, request: dict[str, float]) -> None:
        self._change(node, request, +1)

    def take(self, node: str | None, request: dict[str, float]) -> None:
        self._change(node, request, -1)

    def _change(self, node: str | None, request: dict[str, float], sign: int) -> None:
        if node is None or node not in self.free:
            return
        free = self.free[node]
        for resource, amount in request.items():
            if resource in free:
                free[resource] += sign * amount
        ask = sharing.ask_of(request)
        if ask > 0:
            placed = self.shared.setdefault(node, [])
            if sign < 0:
                placed.append(ask)
            elif ask in placed:
                placed.remove(ask)
        (self.open.add if _has_free_accelerator(free) else self.open.discard)(node)


def _wants_accelerator(pod: dict[str, float]) -> bool:
    return any(amount > 0 and is_accelerator(resource) for resource, amount in pod.items())


def _has_free_accelerator(free: dict[str, float]) -> bool:
    return any(amount > 1e-9 and is_accelerator(resource) for resource, amount in free.items())


def _fits(free: dict[str, float], request: dict[str, float]) -> bool:
    return all(free.get(resource, 0.0) + 1e-9 >= amount for resource, amount in request.items() if amount > 0)
