"""What one cycle decides on: running counts, cost in use, quota usage and free node capacity,
aggregated from the active ops (bounded by what runs, never by the pending depth)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from services.admission.policies.capacity import Capacity
from services.admission.policies.quota import Usage
from services.admission.queues import Book
from services.admission.state import AdmissionState, OpRecord, active_ops


@dataclass
class Snapshot:
    book: Book
    capacity: Capacity
    running: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    cost_used: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    usage: Usage = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    starved: set[str] = field(default_factory=set)  # queues with ops waiting for their own lent quota

    @classmethod
    def build(cls, state: AdmissionState, book: Book) -> "Snapshot":
        snap = cls(book, Capacity.of(state.nodes))
        unplaced: list[OpRecord] = []
        for op in active_ops(state):
            snap._count(op)
            if op.node:
                snap.capacity.take(op.node, op.request)
            else:
                unplaced.append(op)
        for op in sorted(unplaced, key=lambda o: o.key):
            node = snap.capacity.find(op.request, selector_of(op), tolerations_of(op))
            snap.capacity.take(node, op.request)
        return snap

    def _count(self, op: OpRecord) -> None:
        self.running[op.queue] += 1
        self.cost_used[op.queue] += op.estimate
        for resource, flavor in op.flavors.items():
            self.usage[op.queue][(resource, flavor)] += op.request.get(resource, 0.0)

    def assume(self, op: OpRecord, node: str | None) -> None:
        """Count an op just admitted (its flavors already set on the record)."""
        self._count(op)
        self.capacity.take(node, op.request)


def selector_of(op: OpRecord) -> dict[str, str]:
    return {**op.spec.environment.node_selector, **op.node_selector}


def tolerations_of(op: OpRecord) -> list:
    return list(op.spec.environment.tolerations) + [t for t in op.tolerations
                                                    if t not in op.spec.environment.tolerations]
