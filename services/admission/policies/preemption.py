"""Preemption: which running ops to take room from so that a waiting op fits (Kueue's rules).

Candidates: ops of the same queue with a lower priority (or, with LowerOrNewerEqualPriority, the
same priority and submitted later), and — reclaiming lent quota — ops of other queues of the cohort tree
that run on borrowed quota (policy LowerPriority or Any). Never: ops with `preemptible: false` (which
never borrow either: ``policies.quota``), ops already being preempted, ops preempted less than the
cooldown ago, ops running for less than their queue's minRuntime. Priorities
compared are effective ones: the preemptor's aged priority now, a victim's priority when it was
admitted.

Reclaim walks down the cohort tree (Kueue's ``classical/hierarchical_preemption.go`` and
``candidate_generator.go``): a victim's queue, and every cohort between it and the lowest cohort it shares with
the preemptor, must use more than its subtree quota of a key the preemptor needs (subtrees within their quota are
pruned). A victim is of the ``advantage`` tier when the preemptor's request fits the subtree quota of some node on
its own side of that shared cohort (its queue, or a cohort above it: the quota the victim's side uses is the
preemptor side's), and the preemptor may then borrow; else of the ``without_borrowing`` tier: the preemptor must
then fit without borrowing (Kueue's ReclaimWithoutBorrowing; its BorrowWithinCohort is not done). Both take the
priorities the queue's reclaimWithinCohort allows. Flat cohorts: advantage means the request fits the preemptor's
own nominal. Order: advantage, then without_borrowing, then ops of its own queue; within a tier the lowest
priority, then the most recently admitted. Take them greedily on a copy of the snapshot until the op
fits, then drop every victim it fits without (walking back).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from datetime import datetime

from opsched.proto.queries import PendingReason
from opsched.proto.reasons import PREEMPTION_LIFTS, Preemption, Reason, pending
from opsched.services.admission.model.cohorts import Node
from opsched.services.admission.model.queues import Book, Key
from opsched.services.admission.model.records import OpRecord
from opsched.services.admission.policies.admit import ADMIT, BORROW, evaluate
from opsched.services.admission.policies.quota import local_available, node_usage
from opsched.services.admission.state.snapshot import Snapshot
from opsched.services.admission.state.views import QueueView

RESOLVABLE = PREEMPTION_LIFTS  # the reasons taking running ops away could lift (proto.reasons)
MAX_CANDIDATES = 64
# victim tiers, in the order they are taken (Kueue's HierarchicalReclaim, ReclaimWithoutBorrowing, WithinCQ)
ADVANTAGE, WITHOUT_BORROWING, WITHIN = "advantage", "without_borrowing", "within"
TIERS = {ADVANTAGE: 0, WITHOUT_BORROWING: 1, WITHIN: 2}


@dataclass(frozen=True)
class Victim:
    op: OpRecord
    reason: str  # "within_queue" or "reclaim"
    tier: str = WITHIN
    paths: str = ""  # nested cohorts: "; preemptor path /org/ml/a; preemptee path /org/infra/b" (for the message)


def waiting_for(victims: Iterable[str]) -> PendingReason:
    """What a preemptor waits for: its victims (op ids) whose pods are not gone yet."""
    ids = sorted(victims)
    return pending(Reason.WAITING_FOR_VICTIMS, count=len(ids), victims=", ".join(ids))


def worth_trying(reason_codes: list[str]) -> bool:
    return bool(reason_codes) and all(code in RESOLVABLE for code in reason_codes)


def candidates(op: OpRecord, priority: float, view: QueueView, snap: Snapshot, now: datetime) -> list[Victim]:
    out: list[Victim] = []
    sides: dict[tuple, tuple[str, str] | None] = {}  # (victim queue, keys) -> (tier, paths): one tree walk each
    for v in _eligible(op, priority, view, snap.book):
        if _protected(v.op, snap.book, now):
            continue
        tiered = _reclaim_tier(op, priority, v, snap, sides) if v.reason == Preemption.RECLAIM else v
        if tiered is not None:
            out.append(tiered)
    out.sort(key=lambda v: (TIERS[v.tier], v.op.admitted_priority,
                            -(v.op.admitted_at.timestamp() if v.op.admitted_at else 0.0), v.op.op_id))
    return out[:MAX_CANDIDATES]


def _reclaim_tier(op: OpRecord, priority: float, victim: Victim, snap: Snapshot,
                  sides: dict[tuple, tuple[str, str] | None]) -> Victim | None:
    """The reclaim candidate with its tier, or None when its subtree is within its quota (pruned) or it holds
    nothing the preemptor needs (its priority the queue's reclaimWithinCohort already allowed)."""
    keys = tuple((r, f) for r, f in victim.op.flavors.items()
                 if op.request.get(r, 0.0) > 0 and (r, f) in snap.book.quotas.get(op.queue, {}))
    memo = (victim.op.queue, keys)
    if memo not in sides:
        sides[memo] = _side(op, victim.op.queue, list(keys), snap)
    found = sides[memo]
    if found is None:
        return None
    tier, paths = found
    return Victim(victim.op, victim.reason, tier, paths)


def _side(op: OpRecord, queue: str, keys: list[Key], snap: Snapshot) -> tuple[str, str] | None:
    """(tier, paths) of reclaiming from ``queue`` for ``op``; None when pruned or nothing needed is held there."""
    book, usage = snap.book, snap.usage
    tree = book.tree
    mine, theirs = tree.path(op.queue), tree.path(queue)
    shared = next((n for n in mine if n in theirs), None)
    if not keys or shared is None:
        return None
    over = lambda n: any(node_usage(tree, usage, n, k) > tree.subtree[n].get(k, 0.0) + 1e-9 for k in keys)  # noqa: E731
    if not all(over(n) for n in theirs[:theirs.index(shared)]):
        return None  # Kueue's IsWithinNominalInResources pruning
    side = mine[:mine.index(shared)]
    advantage = all(_fits_subtree(book, usage, side, k, op.request[k[0]]) for k in keys)
    paths = f"; preemptor path {_slashed(mine)}; preemptee path {_slashed(theirs)}" if tree.nested else ""
    return (ADVANTAGE if advantage else WITHOUT_BORROWING), paths


def _fits_subtree(book: Book, usage, side: list[Node], key: Key, amount: float) -> bool:
    """Does ``amount`` fit the subtree quota of some node of ``side`` (the preemptor's queue, then its cohorts up to
    the child of the shared cohort), passing up at each level what its local part cannot hold? Kueue's
    hierarchical advantage (QuantitiesFitInQuota along the path): once it fits a level, it has it above too."""
    tree = book.tree
    for node in side:
        if node_usage(tree, usage, node, key) + amount <= tree.subtree[node].get(key, 0.0) + 1e-9:
            return True
        amount = max(0.0, amount - local_available(tree, usage, node, key))
    return False


def _slashed(path: list[Node]) -> str:
    return "/" + "/".join(n.name for n in reversed(path))


def possible(op: OpRecord, view: QueueView, book: Book) -> bool:
    """Could some running op ever be a victim of ``op`` (its protection by time having run out)?"""
    return any(v.op.preemptible and v.op.preempted_by is None
               for v in _eligible(op, float(op.priority), view, book))


def _eligible(op: OpRecord, priority: float, view: QueueView, book: Book) -> Iterator[Victim]:
    """Running ops of the op's queue and cohort that the policies allow it to take room from (found
    through each queue's active ops by priority: a full queue of equals costs nothing)."""
    policy = book.queues[op.queue].preemption
    for member in book.members(op.queue):
        queue = view.admitted_at(member)
        if queue is None:
            continue
        if member == op.queue:
            yield from _within_queue(op, priority, policy.within_queue, queue, view)
            continue
        reclaim = policy.reclaim_within_cohort
        for p, ops in list(queue.items()) if reclaim != "Never" else ():
            if reclaim == "Any" or p < priority:
                yield from (Victim(view.record(v), Preemption.RECLAIM, WITHOUT_BORROWING) for v in ops
                            if view.record(v).borrowing)


def _within_queue(op: OpRecord, priority: float, policy: str, queue: Mapping[float, Set[str]],
                  view: QueueView) -> Iterator[Victim]:
    for p, ops in list(queue.items()) if policy != "Never" else ():
        if p < priority:
            yield from (Victim(view.record(v), Preemption.WITHIN_QUEUE) for v in ops if v != op.op_id)
        elif p == priority and policy == "LowerOrNewerEqualPriority":
            mine = (op.submitted_at, op.op_id)
            yield from (Victim(view.record(v), Preemption.WITHIN_QUEUE) for v in ops
                        if (view.record(v).submitted_at, v) > mine)


def _protected(victim: OpRecord, book: Book, now: datetime) -> bool:
    if not victim.preemptible or victim.preempted_by is not None:
        return True
    queue = book.queues.get(victim.queue)
    if queue is None:
        return False
    rules = queue.preemption
    if victim.preempted_at is not None and (now - victim.preempted_at).total_seconds() < rules.cooldown_seconds:
        return True
    started = victim.running_since or victim.admitted_at
    return started is not None and (now - started).total_seconds() < rules.min_runtime_seconds


def plan(op: OpRecord, snap: Snapshot, victims: list[Victim]) -> list[Victim] | None:
    """The smallest set found greedily (then minimised) that lets ``op`` fit, or None."""
    if not victims:
        return None  # nothing to simulate: no copy of the snapshot
    sim = snap.copy()
    chosen: list[Victim] = []
    for victim in victims:
        sim.release(victim.op)
        chosen.append(victim)
        if _fits(op, sim, chosen):
            break
    else:
        return None
    for victim in list(reversed(chosen)):
        trial = snap.copy()
        rest = [v for v in chosen if v is not victim]
        for other in rest:
            trial.release(other.op)
        if _fits(op, trial, rest):
            chosen = rest
    return chosen


def _fits(op: OpRecord, sim: Snapshot, chosen: list[Victim]) -> bool:
    """Fits once ``chosen`` are gone; borrowing only when no victim was reclaimed without advantage."""
    verdict = evaluate(op, sim, allow_borrow=True)
    reclaiming = any(v.tier == WITHOUT_BORROWING for v in chosen)
    return verdict.outcome == ADMIT or (verdict.outcome == BORROW and not reclaiming)
