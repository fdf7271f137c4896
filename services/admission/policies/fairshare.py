"""Queue hand-off order: queue priority, then name; or, for cohorts with fair sharing on, the
queue with the lowest weighted dominant-resource share first (share = max over the cohort's
resources of usage / the cohort's nominal total, divided by the queue's weight; decayed past usage
counts too when ``historyWeight`` > 0). With nested cohorts the share is flat over the whole tree: the queues under
its root, the nominal totals including the cohorts' own quota (Kueue's hierarchical fair sharing is not done)."""
from __future__ import annotations

from collections.abc import Mapping

from opsched.services.admission.model.queues import Book, Key
from opsched.services.admission.state.snapshot import Snapshot
from opsched.services.admission.state.views import QueueView


def queue_order(book: Book, snap: Snapshot, view: QueueView) -> list[str]:
    if not book.config.fair_sharing.enabled:
        return list(book.order)
    return sorted(book.order, key=lambda q: (share_of(book, snap, view, q), q))


def share_of(book: Book, snap: Snapshot, view: QueueView, queue: str) -> float:
    weight = book.config.fair_sharing.history_weight
    return share(book, snap, queue, view.usage_history() if weight else None, weight)


def share(book: Book, snap: Snapshot, queue: str, history: Mapping[str, Mapping[Key, float]] | None = None, history_weight: float = 0.0) -> float:
    """Weighted dominant-resource share of ``queue`` within its cohort (0 when it sets no quota)."""
    totals: dict[tuple[str, str], float] = {}
    for member in book.members(queue):
        for key, line in book.quotas.get(member, {}).items():
            totals[key] = totals.get(key, 0.0) + line.nominal
    root = book.tree.root_of(queue)
    for node in book.tree.cohorts():  # nested cohorts' own quota counts in their tree's totals
        if book.tree.top(node) == root:
            for key, cohort_line in book.tree.lines.get(node, {}).items():
                totals[key] = totals.get(key, 0.0) + cohort_line.nominal
    past = (history or {}).get(queue, {})
    dominant = 0.0
    for key, total in totals.items():
        if total <= 0:
            continue
        used = snap.usage[queue].get(key, 0.0) + history_weight * past.get(key, 0.0)
        dominant = max(dominant, used / total)
    return dominant / book.queues[queue].weight

