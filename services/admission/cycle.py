"""One scheduling cycle over a snapshot, admitting as many ops as fit (not one head per cycle).

1. Finish cache hits.
2. Walk the queues in hand-off order (queue priority, then name); in each, pop ops in their total
   order and admit those that fit within quota. An op that fits only by borrowing is set aside; one
   that fits nowhere ever is rejected; one that must wait is kept, and after LOOKAHEAD such ops (or a
   full queue) the queue is left for this cycle (bounded work: O((admitted + LOOKAHEAD) log n)).
3. Admit the set-aside borrowers, in queue order then op order, while the cohort can lend.
Each decision is assumed in state and snapshot at once; the caller publishes.
"""
from __future__ import annotations

from datetime import datetime

from proto.events import Event, OperationAdmitted, OperationRejected, OperationSucceeded
from proto.naming import pod_name
from services.admission.policies.admit import ADMIT, BORROW, UNFITTABLE, Verdict, evaluate
from services.admission.queues import Book
from services.admission.snapshot import Snapshot
from services.admission.state import AdmissionState, OpRecord, Status

CACHE_HIT_REASON = "cache_hit"
LOOKAHEAD = 16


def decide(state: AdmissionState, book: Book, now: datetime, default_namespace: str) -> list[Event]:
    decisions: list[Event] = _finish_cache_hits(state, now)
    snap = Snapshot.build(state, book)
    borrowers: list[OpRecord] = []
    for queue in book.order:
        decisions += _walk_queue(state, snap, queue, borrowers, now, default_namespace)
    rank = {name: i for i, name in enumerate(book.order)}
    for op in sorted(borrowers, key=lambda o: (rank[o.queue], o.key)):
        verdict = evaluate(op, snap, allow_borrow=True)
        decision = _decision(op, verdict, snap, now, default_namespace)
        if decision is None:
            _keep_waiting(state, op, verdict)
        else:
            state.apply(decision)
            decisions.append(decision)
    return decisions


def _walk_queue(state: AdmissionState, snap: Snapshot, queue: str, borrowers: list[OpRecord],
                now: datetime, namespace: str) -> list[Event]:
    out: list[Event] = []
    kept: list[tuple[OpRecord, Verdict]] = []
    set_aside = 0
    while len(kept) + set_aside < LOOKAHEAD:
        op = state.pop_next(queue)
        if op is None:
            break
        verdict = evaluate(op, snap, allow_borrow=False)
        decision = _decision(op, verdict, snap, now, namespace)
        if decision is not None:
            state.apply(decision)  # assume: the slot is taken before the publish
            out.append(decision)
        elif verdict.outcome == BORROW:
            borrowers.append(op)
            set_aside += 1
        else:
            kept.append((op, verdict))
            if verdict.queue_blocked:
                break
    for op, verdict in kept:
        if any(r.code == "quota_lent_out" for r in verdict.reasons):
            snap.starved.add(queue)  # its cohort lends nothing more until this op runs
        _keep_waiting(state, op, verdict)
    return out


def _decision(op: OpRecord, verdict: Verdict, snap: Snapshot, now: datetime, namespace: str) -> Event | None:
    if verdict.outcome == UNFITTABLE and snap.book.config.reject_unfittable:
        return OperationRejected(op_id=op.op_id, at=now, attempt=op.attempt, reason="unfittable",
                                 message="; ".join(dict.fromkeys(r.message for r in verdict.reasons)))
    if verdict.outcome not in (ADMIT, BORROW) or (verdict.outcome == BORROW and not verdict.flavors):
        return None  # waiting, or the "fits only by borrowing" marker of the first pass
    op.flavors = dict(verdict.flavors)
    snap.assume(op, verdict.node)
    queue = snap.book.queues[op.queue]
    return OperationAdmitted(
        op_id=op.op_id, at=now, attempt=op.attempt, spec=op.spec, queue=op.queue,
        namespace=queue.namespace or namespace, pod_name=pod_name(op.op_id, op.attempt),
        flavors=verdict.flavors, node_selector=verdict.node_selector, tolerations=verdict.tolerations,
        borrowing=verdict.outcome == BORROW)


def _keep_waiting(state: AdmissionState, op: OpRecord, verdict: Verdict) -> None:
    op.blocked = verdict.reasons
    state.requeue(op)


def _finish_cache_hits(state: AdmissionState, now: datetime) -> list[Event]:
    out: list[Event] = []
    while state.cache_hits:
        op = state.ops[state.cache_hits.pop()]
        if op.status == Status.PENDING:
            event = OperationSucceeded(op_id=op.op_id, at=now, attempt=op.attempt, reason=CACHE_HIT_REASON)
            state.apply(event)
            out.append(event)
    return out
