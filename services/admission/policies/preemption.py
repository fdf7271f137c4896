"""Preemption: which running ops to take room from so that a waiting op fits (Kueue's rules).

Candidates: ops of the same queue with a lower priority (or, with LowerOrNewerEqualPriority, the
same priority and submitted later), and — reclaiming lent quota — ops of other queues of the cohort
that run on borrowed quota (policy LowerPriority or Any). Never: ops with `preemptible: false` (which
never borrow either: ``policies.quota``), ops already being preempted, ops preempted less than the
cooldown ago, ops running for less than their queue's minRuntime. Order: ops of borrowing queues
first, then lowest priority, then most recently admitted. Take them greedily on a copy of the
snapshot until the op fits, then drop every victim it fits without (walking back). Priorities
compared are effective ones: the preemptor's aged priority now, a victim's priority when it was
admitted.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from datetime import datetime

from opsched.proto.queries import PendingReason
from opsched.proto.reasons import PREEMPTION_LIFTS, Preemption, Reason, pending
from opsched.services.admission.model.queues import Book
from opsched.services.admission.model.records import OpRecord
from opsched.services.admission.policies.admit import ADMIT, BORROW, evaluate
from opsched.services.admission.state.snapshot import Snapshot
from opsched.services.admission.state.views import QueueView

RESOLVABLE = PREEMPTION_LIFTS  # the reasons taking running ops away could lift (proto.reasons)
MAX_CANDIDATES = 64


@dataclass(frozen=True)
class Victim:
    op: OpRecord
    reason: str  # "within_queue" or "reclaim"


def waiting_for(victims: Iterable[str]) -> PendingReason:
    """What a preemptor waits for: its victims (op ids) whose pods are not gone yet."""
    ids = sorted(victims)
    return pending(Reason.WAITING_FOR_VICTIMS, count=len(ids), victims=", ".join(ids))


def worth_trying(reason_codes: list[str]) -> bool:
    return bool(reason_codes) and all(code in RESOLVABLE for code in reason_codes)


def candidates(op: OpRecord, priority: float, view: QueueView, snap: Snapshot, now: datetime) -> list[Victim]:
    out = [v for v in _eligible(op, priority, view, snap.book) if not _protected(v.op, snap.book, now)]
    out.sort(key=lambda v: (v.reason != Preemption.RECLAIM, v.op.admitted_priority,
                            -(v.op.admitted_at.timestamp() if v.op.admitted_at else 0.0), v.op.op_id))
    return out[:MAX_CANDIDATES]


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
                yield from (Victim(view.record(v), Preemption.RECLAIM) for v in ops if view.record(v).borrowing)


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
    verdict = evaluate(op, sim, allow_borrow=True)
    reclaiming = any(v.reason == Preemption.RECLAIM for v in chosen)
    return verdict.outcome == ADMIT or (verdict.outcome == BORROW and not reclaiming)
