"""Answers to `why` and `queues` from live state: ranked pending reasons, position, usage per flavor; `why` of any
op it knows also gives its name and history (``rules.op_history``), live, ended, or rejected before it was an op."""
from __future__ import annotations

from datetime import datetime

from opsched.proto.queries import (
    CohortStatus,
    CohortUsage,
    FlavorUsage,
    PendingReason,
    PoolStatus,
    QueuesAnswer,
    QueueStatus,
    WhyAnswer,
)
from opsched.proto.reasons import Reason, dependency_name, pending
from opsched.rules.node_pools import waiting_for_node
from opsched.services.admission.fragmentation import fragmentation
from opsched.services.admission.model.pools import PoolReach
from opsched.services.admission.model.queue_stops import held
from opsched.services.admission.model.queues import Book, Usage
from opsched.services.admission.policies.admit import ADMIT, BORROW, evaluate
from opsched.services.admission.policies.preemption import waiting_for
from opsched.services.admission.policies.quota import borrowed, node_usage
from opsched.services.admission.state.admission_state import AdmissionState, OpRecord, Status, snapshot_of


def why(state: AdmissionState, book: Book, op_id: str, now: datetime | None = None) -> WhyAnswer:
    op = state.ops.get(op_id)
    if op is None:
        return _not_held(state, op_id)
    answer = WhyAnswer(op_id=op_id, found=True, status=op.status.name.lower(), queue=op.queue,
                       ignored=list(op.spec.ignored), name=op.spec.name or "",
                       history=list(op.history.timeline.entries), history_dropped=op.history.timeline.dropped)
    if op.status.terminal:  # how it ended (an op that left memory: its summary says, ``opsched why`` reads it)
        answer.end_reason, answer.end_message = op.reason, op.handler_failure or op.reason_message
    if op.status == Status.PENDING:
        answer.reasons = _gate_reasons(op)
        stop = state.stops.in_force.get(op.queue)
        if stop is not None:  # its gates aside, its queue admits nothing now
            answer.reasons.append(held(stop))
    elif op.status == Status.QUEUED:
        answer.position, answer.queued_total = _position(state, book, op, now)
        answer.reasons = _queued_reasons(state, book, op, answer.position, now)
    elif op.status == Status.ON_HOLD:
        answer.reasons = [pending(Reason.ON_HOLD, why=op.reason_message or op.reason)]
    elif op.status == Status.RETRYING:
        answer.reasons = [pending(Reason.RETRYING, attempt=op.attempt, failure=op.reason)]
    elif op.status.active:
        answer.reasons = _active_reasons(op)
    return answer


def _active_reasons(op: OpRecord) -> list[PendingReason]:
    """Why an admitted op is not running yet, or is about to stop: being preempted, its new nodes not come, a
    dependency of its pods missing."""
    if op.preempted_by is not None:  # "": no preemptor, its queue was drained
        return [pending(Reason.BEING_PREEMPTED, preemptor=op.preempted_by or f"the drain of queue {op.queue}")]
    if op.provisioning and op.provisioning_since is not None:
        return [waiting_for_node(op.provisioning, op.provisioning_since, op.provisioning_expected_s,
                                 op.provisioning_timeout_s)]
    if op.history.waiting_for is not None and op.history.waiting_since is not None:
        return [pending(Reason.WAITING_FOR_DEPENDENCY, dependency=dependency_name(op.history.waiting_for),
                        since=op.history.waiting_since, detail=op.history.waiting_detail)]
    return []


def _not_held(state: AdmissionState, op_id: str) -> WhyAnswer:
    """Why of an op not in memory: ended and left (its summary in the ops bucket tells the rest: ``opsched why``
    reads it), rejected before it was an op (its queue, name, reason and the one entry of its history), or unknown."""
    gone = state.fold.gone.get(op_id)  # it ended and left memory: its summary is in the ops bucket
    if gone is not None:
        return WhyAnswer(op_id=op_id, found=True, status=gone.label)
    ended = state.fold.strays.end_of(op_id)  # rejected before it was an op (e.g. its spec refused on decode)
    if ended is not None and ended.status is not None:
        return WhyAnswer(op_id=op_id, found=True, status=ended.status.label, queue=ended.queue, name=ended.name,
                         end_reason=ended.reason, end_message=ended.message,
                         history=[ended.entry] if ended.entry is not None else [])
    return WhyAnswer(op_id=op_id, found=False, reasons=[pending(Reason.UNKNOWN_OP)])


def _gate_reasons(op: OpRecord) -> list[PendingReason]:
    if op.cost_known and op.cache_known:
        ready = "its estimate and cache answer are in" if op.caching else "its estimate is in (caching is off)"
        return [pending(Reason.NEXT_CYCLE, ready=ready, step="queues")]
    out = []
    if not op.cost_known:
        out.append(pending(Reason.WAITING_COST_ESTIMATE))
    if not op.cache_known and op.history.cache_hit_of is None:
        out.append(pending(Reason.WAITING_CACHE))
    return out


def _queued_reasons(state: AdmissionState, book: Book, op: OpRecord, position: int,
                    now: datetime | None) -> list[PendingReason]:
    victims = state.nominated.get(op.op_id)
    if victims:
        return [waiting_for(victims)]
    verdict = evaluate(op, snapshot_of(state, book, now), allow_borrow=True)
    reasons = list(verdict.reasons)
    if verdict.outcome in (ADMIT, BORROW) and op.blocked:
        reasons = list(op.blocked)  # the last cycle knew more (e.g. a cohort lender waiting)
    elif verdict.outcome in (ADMIT, BORROW):
        reasons.append(pending(Reason.NEXT_CYCLE, ready="fits now", step="admits"))
    if position > 1:
        reasons.append(pending(Reason.QUEUE_POSITION, ahead=position - 1, queue=op.queue))
    return reasons


def _position(state: AdmissionState, book: Book, op: OpRecord, now: datetime | None) -> tuple[int, int]:
    """1-based position among the queued ops of its queue, in the queue's own order (``model.ordering``:
    effective priority, fair rank, time, id), as its cycle pops them (a scan: this answers a query, it is not
    the hot path)."""
    queued = [o for o in state.ops.values() if o.queue == op.queue and o.status == Status.QUEUED]
    return state.queues.position(op, queued, now or op.since), len(queued)


def _stop_status(state: AdmissionState, queue: str) -> dict:
    stop = state.stops.in_force.get(queue)
    if stop is None:
        return {}
    draining = (sum(1 for op_id in state.usage.active.get(queue, ()) if state.ops[op_id].preempted_by is not None)
                if stop.stop_policy == "HoldAndDrain" else 0)
    return dict(stop_policy=stop.stop_policy, stopped_by=stop.by, stopped_at=stop.at, stop_comment=stop.comment,
                draining=draining)


def queues(state: AdmissionState, book: Book, now: datetime | None = None) -> QueuesAnswer:
    snap = snapshot_of(state, book, now)
    out = []
    for name in book.order:
        q = book.queues[name]
        usage = [FlavorUsage(resource=r, flavor=f, used=snap.usage[name].get((r, f), 0.0), nominal=line.nominal,
                             borrowed=borrowed(book, snap.usage, name, (r, f)),
                             borrowing_limit=line.borrowing_limit)
                 for (r, f), line in book.quotas[name].items()]
        path = [n.name for n in book.tree.path(name)[1:]] if book.tree.nested else []
        out.append(QueueStatus(name=name, cohort=q.cohort, cohort_path=path, running=snap.running[name],
                               concurrency=q.concurrency,
                               services=snap.services[name], max_services=q.services.max_services,
                               pending=state.queues.waiting(name), cost_used=snap.cost_used[name],
                               cost_quota=q.cost_quota, usage=usage, **_stop_status(state, name)))
    waiting = (o for o in state.ops.values() if not (o.status.active or o.status.terminal))
    return QueuesAnswer(queues=out, default_queue=book.default_queue, source=book.source,
                        fragmentation=fragmentation(snap.capacity, book, waiting), cohorts=_cohorts(book, snap.usage),
                        stopped_unconfigured=sorted(q for q in state.stops.in_force if q not in book.queues),
                        pools=_pools(state, snap.capacity.pools))


def _pools(state: AdmissionState, pools: tuple[PoolReach, ...]) -> list[PoolStatus]:
    """Each pool's nodes (and those leaving) as the snapshot counts them, and the new nodes admitted ops wait for."""
    out = []
    for p in pools:
        waiting = [op for op_id in state.usage.active_ids() if (op := state.ops[op_id]).provisioning.get(p.pool.name)
                   and op.agent == p.agent]
        since = [op.provisioning_since for op in waiting if op.provisioning_since is not None]
        out.append(PoolStatus(pool=p.pool.name, flavor=p.flavor.name, agent=p.agent, nodes=p.existing,
                              leaving=p.leaving, min_nodes=p.pool.min_nodes, max_nodes=p.pool.max_nodes,
                              awaited=sum(op.provisioning[p.pool.name] for op in waiting),
                              oldest_since=min(since, default=None), budget_blocked_until=p.blocked_until))
    return out


def _cohorts(book: Book, usage: Usage) -> list[CohortStatus]:
    """Each declared cohort's quota and usage per key, parents first (undeclared, flat cohorts are not listed)."""
    tree = book.tree
    out = []
    for node in tree.cohorts():
        if node.name not in tree.declared:
            continue
        lines = tree.lines.get(node, {})
        rows = []
        for key, subtree in sorted(tree.subtree[node].items()):
            used = node_usage(tree, usage, node, key)
            line = lines.get(key)
            rows.append(CohortUsage(resource=key[0], flavor=key[1], used=used, subtree=subtree,
                                    nominal=line.nominal if line else 0.0, borrowed=max(0.0, used - subtree),
                                    borrowing_limit=line.borrowing_limit if line else None))
        parent = tree.parent.get(node)
        out.append(CohortStatus(name=node.name, parent=parent.name if parent else None, usage=rows))
    return out
