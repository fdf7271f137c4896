"""The cohort tree of the configuration in force: queues are leaves, cohorts inner nodes (Kueue's hierarchical
cohorts, ``pkg/cache/scheduler/resource_node.go``).

Accepts a validated ``QueuesConfig`` (``rules.queues_file.check``: no cycle, parents declared) and the queues'
compiled quota lines. A queue's ``cohort`` that no ``cohorts`` entry declares is a root without quota; a queue
without a cohort is a root of its own. Per node and quota key (resource, flavor) it computes, once:

- ``subtree``: the node's own nominal plus, from each child, what the child lets its parent use
  (child subtree − child local);
- ``local``: the part of the subtree the node keeps for itself, never lent up: subtree − min(subtree −
  ``guaranteed``, ``lendingLimit``) (at least 0), Kueue's ``localQuota`` with opsched's ``guaranteed`` field;
- ``borrowing_limit``: how far above its subtree quota the node may go with quota from its parent (None: no limit).

Usage and what is available are computed from it by ``policies.quota`` (the rule lives there, in one place).
"""
from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from opsched.proto.queues import FlavorQuota, QueuesConfig, ResourceQuota
from opsched.proto.resources import amount

Key = tuple[str, str]  # (resource, flavor): one quota line


class Node(NamedTuple):
    """A queue (a leaf) or a cohort: their names may coincide (an undeclared cohort named as a queue)."""

    name: str
    cohort: bool = False

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Line:
    """One node's quota of one key, compiled."""

    nominal: float = 0.0  # its own
    borrowing_limit: float | None = None
    lending_limit: float | None = None
    guaranteed: float = 0.0


@dataclass
class Tree:
    parent: dict[Node, Node | None] = field(default_factory=dict)
    children: dict[Node, list[Node]] = field(default_factory=dict)  # in configuration order
    lines: dict[Node, dict[Key, Line]] = field(default_factory=dict)
    subtree: dict[Node, dict[Key, float]] = field(default_factory=dict)
    local: dict[Node, dict[Key, float]] = field(default_factory=dict)
    declared: set[str] = field(default_factory=set)  # cohorts the configuration declares (the others: bare roots)

    @property
    def nested(self) -> bool:
        """The configuration declares cohorts (``cohorts:``): the tree may be more than flat cohorts (paths and
        heights then matter; without declarations every cohort is a root of queues, as before)."""
        return bool(self.declared)

    def path(self, queue: str) -> list[Node]:
        """The queue, then its cohorts up to the root."""
        node: Node | None = Node(queue)
        out: list[Node] = []
        while node is not None:
            out.append(node)
            node = self.parent.get(node)
        return out

    def root_of(self, queue: str) -> Node:
        return self.path(queue)[-1]

    def top(self, node: Node) -> Node:
        """The root above ``node`` (itself for a root)."""
        parent = self.parent.get(node)
        while parent is not None:
            node, parent = parent, self.parent.get(parent)
        return node

    def queues_under(self, node: Node) -> list[str]:
        if not node.cohort:
            return [node.name]
        return [q for child in self.children.get(node, []) for q in self.queues_under(child)]

    def cohorts(self) -> Iterator[Node]:
        """Every cohort, parents before children."""
        roots = [n for n, p in self.parent.items() if p is None and n.cohort]
        stack = list(reversed(roots))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed([c for c in self.children.get(node, []) if c.cohort]))

    def height(self, node: Node) -> int:
        """The distance to its furthest leaf (Kueue's getNodeHeight): 0 for a queue or a cohort with nothing under it;
        a cohort of queues only, 1."""
        return max((1 + self.height(c) for c in self.children.get(node, [])), default=0)

    def borrowing_limit(self, node: Node, key: Key) -> float | None:
        line = self.lines.get(node, {}).get(key)
        return line.borrowing_limit if line is not None else None


def build(config: QueuesConfig) -> Tree:
    tree = Tree()
    tree.declared = {c.name for c in config.cohorts}
    for c in config.cohorts:
        node = Node(c.name, cohort=True)
        parent = Node(c.parent, cohort=True) if c.parent else None
        tree.parent[node] = parent
        tree.lines[node] = _lines(c.resources)
        if parent is not None:
            tree.children.setdefault(parent, []).append(node)
    for q in config.queues:
        node = Node(q.name)
        parent = Node(q.cohort, cohort=True) if q.cohort else None
        tree.parent[node] = parent
        tree.lines[node] = _lines(q.resources)
        if parent is not None:
            tree.parent.setdefault(parent, None)  # an undeclared cohort: a root without quota
            tree.lines.setdefault(parent, {})
            tree.children.setdefault(parent, []).append(node)
    for node, parent in tree.parent.items():
        if parent is None:
            _accumulate(tree, node)
    return tree


def _accumulate(tree: Tree, node: Node) -> None:
    """Kueue's ``updateCohortResourceNode`` + ``accumulateFromChild``, children first."""
    subtree = {key: line.nominal for key, line in tree.lines[node].items()}
    for child in tree.children.get(node, []):
        _accumulate(tree, child)
        for key, quota in tree.subtree[child].items():
            subtree[key] = subtree.get(key, 0.0) + quota - tree.local[child].get(key, 0.0)
    tree.subtree[node] = subtree
    local: dict[Key, float] = {}
    for key, total in subtree.items():
        line = tree.lines[node].get(key, Line())
        lendable = total - line.guaranteed
        if line.lending_limit is not None:
            lendable = min(lendable, line.lending_limit)
        local[key] = max(0.0, total - max(0.0, lendable))
    tree.local[node] = local


def _lines(resources: list[ResourceQuota]) -> dict[Key, Line]:
    out: dict[Key, Line] = {}
    for rq in resources:
        num = functools.partial(amount, rq.resource)
        for f in rq.flavors:
            out[(rq.resource, f.name)] = _line(num, f)
    return out


def _line(num, f: FlavorQuota) -> Line:
    return Line(nominal=num(f.nominal),
                borrowing_limit=num(f.borrowing_limit) if f.borrowing_limit is not None else None,
                lending_limit=num(f.lending_limit) if f.lending_limit is not None else None,
                guaranteed=num(f.guaranteed) if f.guaranteed is not None else 0.0)
