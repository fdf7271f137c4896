"""One scheduling cycle: walk the queues in order and admit as many ops as fit (not one head per cycle).

Each pop is O(log n). Decisions are returned; the caller assumes them in state, publishes them,
and forgets any whose publish failed.
"""
from __future__ import annotations

from datetime import datetime

from proto.events import Event, OperationAdmitted, OperationSucceeded
from services.admission.policies.concurrency import free_slots
from services.admission.queues import QueuesConfig
from services.admission.state import AdmissionState, OpRecord, Status

CACHE_HIT_REASON = "cache_hit"


def pod_name(op_id: str, attempt: int) -> str:
    """Deterministic pod name per op attempt."""
    return f"op-{op_id}-{attempt}"


def decide(state: AdmissionState, config: QueuesConfig, now: datetime, default_namespace: str) -> list[Event]:
    decisions: list[Event] = _finish_cache_hits(state, now)
    for queue in sorted(config.queues, key=lambda q: (-q.priority, q.name)):
        slots = free_slots(queue.concurrency, len(state.queue(queue.name).active))
        while slots > 0:
            op = state.pop_next(queue.name)
            if op is None:
                break
            decision = _admit(op, queue.namespace or default_namespace, now)
            state.apply(decision)  # assume: the slot is taken before the publish
            decisions.append(decision)
            slots -= 1
    return decisions


def _finish_cache_hits(state: AdmissionState, now: datetime) -> list[Event]:
    out: list[Event] = []
    while state.cache_hits:
        op = state.ops[state.cache_hits.pop()]
        if op.status == Status.PENDING:
            event = OperationSucceeded(op_id=op.op_id, at=now, attempt=op.attempt, reason=CACHE_HIT_REASON)
            state.apply(event)
            out.append(event)
    return out


def _admit(op: OpRecord, namespace: str, now: datetime) -> OperationAdmitted:
    return OperationAdmitted(op_id=op.op_id, at=now, attempt=op.attempt, spec=op.spec, queue=op.queue,
                             namespace=namespace, pod_name=pod_name(op.op_id, op.attempt))
