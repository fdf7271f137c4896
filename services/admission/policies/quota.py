"""Quota with Kueue's cohort semantics, per (resource, flavor), over a tree of cohorts (``model.cohorts``).

Each queue's nominal quota splits into a guaranteed part (never lent) and a lendable part that
joins its cohort's pool. A queue uses its guaranteed part first, then the pool; it borrows when its
usage goes above its nominal. ``borrowingLimit`` caps how far above nominal it may go.
A queue without a cohort is a cohort of one: it fits exactly when usage stays within nominal. An op that is not
preemptible never borrows (KAI's rule): it fits only within its queue's nominal, so no op holds borrowed quota that
its lender could not reclaim.

Cohorts nest (Kueue's hierarchical cohorts, ``resource_node.go``): a cohort's quota is its own nominal plus what
its children let it use; its usage is what its children use beyond the part each keeps for itself. What a node may
still take (``available``) is its own unused local part plus what its parent may still give it, capped at each level
by that level's ``borrowingLimit``: **borrowing walks up** to the root. One deliberate difference from Kueue: an
over-admitted parent (quota removed under running ops) never takes away a child's unused local part (Kueue lets its
``available`` go negative). With flat cohorts this is exactly the one-level rule: own unused guaranteed + the pool's
free part, capped at nominal + borrowingLimit − used.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from opsched.proto.reasons import Reason, message
from opsched.services.admission.model.cohorts import Node, Tree
from opsched.services.admission.model.queues import Book, Key, Usage


class Fit(Enum):
    FITS = "fits"  # within the queue's nominal quota
    BORROWS = "borrows"  # fits only with quota borrowed from the cohort
    NO = "no"


@dataclass(frozen=True)
class QuotaCheck:
    fit: Fit
    used: float
    nominal: float
    available: float  # the most this queue could take now (own free + what the cohort can lend)
    reason: str = ""
    code: Reason | None = None  # why not (``Fit.NO``): the reason ``reason`` is the message of

    @property
    def lent_out(self) -> bool:
        """Within its own nominal, but that quota is in use by cohort borrowers."""
        return self.code == Reason.QUOTA_LENT_OUT


def check(book: Book, usage: Usage, queue: str, key: Key, amount: float, nominal_only: bool = False) -> QuotaCheck:
    """Does ``amount`` more of ``key`` fit ``queue``'s quota? ``nominal_only``: the op may not borrow (it is not
    preemptible: quota it borrowed could never be reclaimed), so in a cohort it fits only within the nominal."""
    line = book.quotas[queue][key]
    used = usage.get(queue, {}).get(key, 0.0)
    after = used + amount
    available = available_to(book, usage, queue, key)
    within = after <= line.nominal + 1e-9
    cohort = book.queues[queue].cohort
    if nominal_only and not within and cohort:
        never = "" if amount <= line.nominal + 1e-9 else (
            "; it asks more than the whole nominal, so it never fits here: make it preemptible, or use a queue with "
            "more nominal quota")
        return QuotaCheck(Fit.NO, used, line.nominal, available, code=Reason.NONPREEMPTIBLE_OVER_NOMINAL,
                          reason=message(Reason.NONPREEMPTIBLE_OVER_NOMINAL, queue=queue, resource=key[0],
                                         flavor=key[1], cohort=cohort, used=used, amount=amount,
                                         nominal=line.nominal, never=never))
    if amount <= available + 1e-9:
        return QuotaCheck(Fit.FITS if within else Fit.BORROWS, used, line.nominal, available)
    if within:
        return QuotaCheck(Fit.NO, used, line.nominal, available, code=Reason.QUOTA_LENT_OUT, reason=message(
            Reason.QUOTA_LENT_OUT, resource=key[0], flavor=key[1], amount=amount, nominal=line.nominal, free=available))
    return QuotaCheck(Fit.NO, used, line.nominal, available, _why_not(book, usage, queue, key, used, line, amount),
                      Reason.QUOTA_EXHAUSTED)


def node_usage(tree: Tree, usage: Usage, node: Node, key: Key) -> float:
    """A queue's usage; a cohort's: what its children use beyond the local part each keeps (Kueue's bubbling)."""
    if not node.cohort:
        return usage.get(node.name, {}).get(key, 0.0)
    return sum(max(0.0, node_usage(tree, usage, child, key) - tree.local[child].get(key, 0.0))
               for child in tree.children.get(node, []))


def local_available(tree: Tree, usage: Usage, node: Node, key: Key) -> float:
    """The node's unused local part: quota only its subtree sees (Kueue's ``LocalAvailable``)."""
    return max(0.0, tree.local[node].get(key, 0.0) - node_usage(tree, usage, node, key))


def available(tree: Tree, usage: Usage, node: Node, key: Key) -> float:
    """How much more of ``key`` the subtree of ``node`` may use now (Kueue's ``available``): at a root, its subtree
    quota less its usage; below, its unused local part plus what its parent may give, no more than what it stores in
    the parent (subtree − local) less what it uses there, plus its ``borrowingLimit``."""
    subtree = tree.subtree[node].get(key, 0.0)
    parent = tree.parent.get(node)
    if parent is None:
        return subtree - node_usage(tree, usage, node, key)
    return local_available(tree, usage, node, key) + max(0.0, _from_parent(tree, usage, node, parent, key))


def _from_parent(tree: Tree, usage: Usage, node: Node, parent: Node, key: Key) -> float:
    up = available(tree, usage, parent, key)
    cap = _borrow_cap(tree, usage, node, key)
    return up if cap is None else min(up, cap)


def _borrow_cap(tree: Tree, usage: Usage, node: Node, key: Key) -> float | None:
    """The most ``node`` may still take from its parent under its borrowingLimit (None: no limit)."""
    limit = tree.borrowing_limit(node, key)
    if limit is None:
        return None
    local = tree.local[node].get(key, 0.0)
    stored = tree.subtree[node].get(key, 0.0) - local
    return stored - max(0.0, node_usage(tree, usage, node, key) - local) + limit


def available_to(book: Book, usage: Usage, queue: str, key: Key) -> float:
    """The most ``queue`` could take of ``key`` now (own free + what its cohorts can lend, up to the root)."""
    return max(0.0, available(book.tree, usage, Node(queue), key))


def lowest_fitting_height(book: Book, usage: Usage, queue: str, need: dict[Key, float]) -> int:
    """The height (``Tree.height``) of the lowest node up ``queue``'s path whose subtree quota fits the request: 0
    within the queue's own, 1 within a cohort of queues, ... (Kueue's FindHeightOfLowestSubtreeThatFits): a sibling's
    quota before a grandparent's. Flat: 1 for every borrower. What a level's unused local part holds is not passed
    up; none fits: the root's height."""
    tree = book.tree
    left = dict(need)
    path = tree.path(queue)
    for node in path:
        if all(node_usage(tree, usage, node, k) + v <= tree.subtree[node].get(k, 0.0) + 1e-9 for k, v in left.items()):
            return tree.height(node)
        left = {k: max(0.0, v - local_available(tree, usage, node, k)) for k, v in left.items()}
    return tree.height(path[-1])


def _why_not(book: Book, usage: Usage, queue: str, key: Key, used: float, line, amount: float) -> str:
    """The level that binds: a borrowing limit on the way up (the lowest one the request, less what each level
    holds locally, breaks), or the root that cannot lend enough."""
    tree = book.tree
    path = tree.path(queue)
    nested = len(path) > 2 or path[-1].name in tree.declared
    borrowing = cohort = ""
    need = amount
    if len(path) == 1:
        borrowing = "; no cohort to borrow from"
    for node in path[:-1]:
        need = max(0.0, need - local_available(tree, usage, node, key))
        cap = _borrow_cap(tree, usage, node, key)
        if cap is not None and need > cap + 1e-9:
            limit = tree.borrowing_limit(node, key)
            assert limit is not None
            borrowing = f"; borrowing limit {_n(limit)}" + (f" of cohort {node} reached" if node.cohort else " reached")
            break
    else:
        if len(path) > 1:
            above = [str(n) for n in path[1:]]
            cohort = (" and the cohort cannot lend enough" if not nested else
                      f" and cohort {above[0]} cannot lend enough" if len(above) == 1 else
                      f" and the cohorts {' → '.join(above)} cannot lend enough")
    return message(Reason.QUOTA_EXHAUSTED, resource=key[0], flavor=key[1], used=used, nominal=line.nominal,
                   amount=amount, borrowing=borrowing, cohort=cohort)


def borrowed(book: Book, usage: Usage, queue: str, key: Key) -> float:
    line = book.quotas[queue][key]
    return max(0.0, usage.get(queue, {}).get(key, 0.0) - line.nominal)


def _n(x: float) -> str:
    return f"{x:g}"
