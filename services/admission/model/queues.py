"""The queue configuration in force, compiled for the cycle: quotas as numbers, cohorts, flavors.

What people write, and its validation, is ``rules.queues_file``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from opsched.proto.queues import Flavor, Queue, QueuesConfig
from opsched.proto.resources import amount
from opsched.rules.queues_file import DEFAULT_FLAVOR, QueuesConfigError, check
from opsched.services.admission.model.cohorts import Tree, build

Key = tuple[str, str]  # (resource, flavor): one quota line
Usage = dict[str, dict[Key, float]]  # queue -> key -> used


@dataclass(frozen=True)
class QuotaLine:
    nominal: float
    borrowing_limit: float | None  # None: unlimited
    lendable: float  # how much of nominal the cohort may use


@dataclass
class Book:
    config: QueuesConfig
    source: str = "default"
    queues: dict[str, Queue] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # hand-off order: queue priority, then name
    flavors: dict[str, Flavor] = field(default_factory=dict)
    quotas: dict[str, dict[tuple[str, str], QuotaLine]] = field(default_factory=dict)
    flavor_order: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # queue -> resource -> flavors
    cohorts: dict[str, list[str]] = field(default_factory=dict)  # cohort -> the queues naming it
    tree: Tree = field(default_factory=Tree)  # queues and cohorts, nested (``model.cohorts``)
    priority_classes: dict[str, int] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [q.name for q in self.config.queues]

    @property
    def default_queue(self) -> str:
        return self.config.default_queue

    def members(self, queue: str) -> list[str]:
        """The queues sharing quota with ``queue``: every queue under its root cohort (itself alone without one)."""
        return self.tree.queues_under(self.tree.root_of(queue))


def compile_book(config: QueuesConfig, source: str = "default") -> Book:
    """Validate a configuration and compile it; raises QueuesConfigError listing every problem."""
    check(config)
    book = Book(config=config, source=source)
    book.queues = {q.name: q for q in config.queues}
    book.order = [q.name for q in sorted(config.queues, key=lambda q: (-q.priority, q.name))]
    book.flavors = {f.name: f for f in config.flavors}
    book.priority_classes = {c.name: c.value for c in config.priority_classes}
    for q in config.queues:
        book.quotas[q.name], book.flavor_order[q.name] = _quota_lines(q)
        if q.cohort:
            book.cohorts.setdefault(q.cohort, []).append(q.name)
    book.tree = build(config)
    return book


def _quota_lines(q: Queue) -> tuple[dict[tuple[str, str], QuotaLine], dict[str, list[str]]]:
    lines: dict[tuple[str, str], QuotaLine] = {}
    order: dict[str, list[str]] = {}
    for rq in q.resources:
        order[rq.resource] = [f.name for f in rq.flavors]
        num = functools.partial(amount, rq.resource)  # GiB for shared GPU memory
        for f in rq.flavors:
            nominal = num(f.nominal)
            guaranteed = num(f.guaranteed) if f.guaranteed is not None else 0.0
            lendable = nominal - guaranteed
            if f.lending_limit is not None:
                lendable = min(lendable, num(f.lending_limit))
            borrow = num(f.borrowing_limit) if f.borrowing_limit is not None else None
            lines[(rq.resource, f.name)] = QuotaLine(nominal, borrow, max(0.0, lendable))
    return lines, order


__all__ = ["DEFAULT_FLAVOR", "Book", "Key", "QuotaLine", "QueuesConfigError", "Usage", "compile_book"]
