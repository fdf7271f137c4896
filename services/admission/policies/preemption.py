"""Preemption: which running ops to take room from so that a waiting op fits (Kueue's rules).

Candidates: ops of the same queue with a lower priority (or, with LowerOrNewerEqualPriority, the
same priority and submitted later), and — reclaiming lent quota — ops of other queues of the cohort
that run on borrowed quota (policy LowerPriority or Any). Never: ops with `preemptible: false`, ops
already being preempted, ops preempted less than the cooldown ago, ops running for less than their
queue's minRuntime. Order: ops of borrowing queues first, then lowest priority, then most recently
admitted. Take them greedily on a copy of the snapshot until the op fits, then drop every victim it
fits without (walking back). Priorities compared are effective ones: the preemptor's aged priority
now, a victim's priority when it was admitted.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from services.admission.policies.admit import ADMIT, BORROW, evaluate
from services.admission.snapshot import Snapshot
from services.admission.state import AdmissionState, OpRecord, active_ops

RESOLVABLE = {"queue_concurrency", "quota_exhausted", "quota_lent_out", "no_capacity", "cost_quota",
              "cohort_lender_waiting"}
MAX_CANDIDATES = 64


@dataclass(frozen=True)
class Victim:
    op: OpRecord
    reason: str  # "within_queue" or "reclaim"


def worth_trying(reason_codes: list[str]) -> bool:
    return bool(reason_codes) and all(code in RESOLVABLE for code in reason_codes)


def candidates(op: OpRecord, priority: float, state: AdmissionState, snap: Snapshot, now: datetime) -> list[Victim]:
    book = snap.book
    policy = book.queues[op.queue].preemption
    out: list[Victim] = []
    for victim in active_ops(state):
        if victim.op_id == op.op_id or _protected(victim, snap, now):
            continue
        if victim.queue == op.queue:
            lower = victim.admitted_priority < priority
            newer = victim.admitted_priority == priority and (victim.submitted_at, victim.op_id) > (
                op.submitted_at, op.op_id)
            if (policy.within_queue == "LowerPriority" and lower) or (
                    policy.within_queue == "LowerOrNewerEqualPriority" and (lower or newer)):
                out.append(Victim(victim, "within_queue"))
        elif _reclaimable(victim, op, priority, snap):
            out.append(Victim(victim, "reclaim"))
    out.sort(key=lambda v: (v.reason != "reclaim", v.op.admitted_priority,
                            -(v.op.admitted_at.timestamp() if v.op.admitted_at else 0.0), v.op.op_id))
    return out[:MAX_CANDIDATES]


def _reclaimable(victim: OpRecord, op: OpRecord, priority: float, snap: Snapshot) -> bool:
    book = snap.book
    policy = book.queues[op.queue].preemption.reclaim_within_cohort
    if policy == "Never" or not victim.borrowing or victim.queue not in book.members(op.queue):
        return False
    return policy == "Any" or victim.admitted_priority < priority


def _protected(victim: OpRecord, snap: Snapshot, now: datetime) -> bool:
    if not victim.spec.preemptible or victim.preempted_by is not None:
        return True
    queue = snap.book.queues.get(victim.queue)
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
    reclaiming = any(v.reason == "reclaim" for v in chosen)
    return verdict.outcome == ADMIT or (verdict.outcome == BORROW and not reclaiming)
