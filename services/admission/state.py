"""Admission state: every operation's lifecycle, folded from events. Folding is idempotent and
monotonic (a status never moves backwards), so replaying the stream rebuilds it exactly."""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum

from proto.events import (
    CacheHit, CacheMissed, CostEstimated, Event, OperationAdmitted, OperationDispatched,
    OperationFailed, OperationRejected, OperationRunning, OperationStopped, OperationSubmitted,
    OperationSucceeded,
)
from proto.cluster import ClusterEvent, NodeObserved
from proto.resources import requested
from proto.spec import OpSpec
from services.admission.policies.capacity import NodeInfo
from services.admission.policies.ordering import sort_key


class Status(IntEnum):
    PENDING = 0  # waiting for gates (cost estimate, cache answer)
    QUEUED = 1  # gates cleared, waiting for a slot
    ADMITTED = 2
    DISPATCHED = 3
    RUNNING = 4
    SUCCEEDED = 10
    FAILED = 11
    REJECTED = 12
    STOPPED = 13

    @property
    def active(self) -> bool:
        return Status.ADMITTED <= self <= Status.RUNNING

    @property
    def terminal(self) -> bool:
        return self >= Status.SUCCEEDED


@dataclass
class OpRecord:
    op_id: str
    queue: str
    priority: int
    submitted_at: datetime
    spec: OpSpec
    status: Status = Status.PENDING
    attempt: int = 0
    cost_known: bool = False
    cache_known: bool = False
    cache_hit_of: str | None = None
    pod_name: str | None = None
    namespace: str | None = None
    node: str | None = None
    reason: str = ""
    request: dict[str, float] = field(default_factory=dict)
    estimate: float = 0.0
    flavors: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)  # added by admission
    tolerations: list = field(default_factory=list)  # added by admission
    borrowing: bool = False
    blocked: list = field(default_factory=list)  # PendingReason list from the last cycle that looked

    @property
    def key(self) -> tuple:
        return sort_key(self.priority, self.submitted_at, self.op_id)


@dataclass
class QueueState:
    heap: list[tuple] = field(default_factory=list)  # (sort key, op_id) of QUEUED ops, lazily deleted
    active: set[str] = field(default_factory=set)
    waiting: int = 0  # submitted, not yet admitted nor ended (for maxQueued)


class AdmissionState:
    def __init__(self) -> None:
        self.ops: dict[str, OpRecord] = {}
        self.queues: dict[str, QueueState] = {}
        self.cache_hits: list[str] = []  # ops to finish from the cache
        self.nodes: dict[str, NodeInfo] = {}  # the cluster as the dispatcher reports it

    def observe(self, event: ClusterEvent) -> bool:
        if isinstance(event, NodeObserved):
            self.nodes[event.node] = NodeInfo.of(event)
            return True
        return self.nodes.pop(event.node, None) is not None

    def queue(self, name: str) -> QueueState:
        return self.queues.setdefault(name, QueueState())

    def apply(self, event: Event) -> bool:
        """Fold one event. Returns True when the state changed."""
        if isinstance(event, OperationSubmitted):
            return self._submitted(event)
        op = self.ops.get(event.op_id)
        if op is None:
            return False
        if isinstance(event, (CostEstimated, CacheMissed, CacheHit)):
            return self._gate(op, event)
        return self._lifecycle(op, event)

    def _submitted(self, e: OperationSubmitted) -> bool:
        if e.op_id in self.ops:
            return False
        c = e.spec.container.resources
        self.ops[e.op_id] = OpRecord(e.op_id, e.queue, e.priority, e.submitted_at, e.spec,
                                     request=requested(c.limits, c.requests))
        self.queue(e.queue).waiting += 1
        return True

    def _gate(self, op: OpRecord, e: Event) -> bool:
        if op.status != Status.PENDING:
            return False
        if isinstance(e, CostEstimated):
            if op.cost_known:
                return False
            op.cost_known = True
            op.estimate = e.estimate.amount
        elif isinstance(e, CacheMissed):
            if op.cache_known:
                return False
            op.cache_known = True
        elif isinstance(e, CacheHit):
            if op.cache_hit_of is not None:
                return False
            op.cache_hit_of = e.original_op_id
            self.cache_hits.append(op.op_id)
            return True
        if op.cost_known and op.cache_known and op.cache_hit_of is None:
            self._enqueue(op)
        return True

    def _enqueue(self, op: OpRecord) -> None:
        op.status = Status.QUEUED
        heapq.heappush(self.queue(op.queue).heap, (op.key, op.op_id))

    def _lifecycle(self, op: OpRecord, e: Event) -> bool:
        status = _STATUS_OF.get(type(e))
        if status is None or status <= op.status or op.status.terminal:
            return False
        if op.status < Status.ADMITTED:
            self.queue(op.queue).waiting -= 1
        if isinstance(e, OperationAdmitted):
            op.flavors, op.borrowing = dict(e.flavors), e.borrowing
            op.node_selector, op.tolerations = dict(e.node_selector), list(e.tolerations)
        op.status = status
        op.attempt = max(op.attempt, e.attempt)
        for attr in ("pod_name", "namespace", "node"):
            value = getattr(e, attr, None)
            if value:
                setattr(op, attr, value)
        op.reason = getattr(e, "reason", "") or op.reason
        q = self.queue(op.queue)
        if status.active:
            q.active.add(op.op_id)
        else:
            q.active.discard(op.op_id)
        return True

    def unassume(self, op_id: str) -> None:
        """Forget a decision whose publish failed: an admitted op is queued again, a cache hit
        waits to be finished again."""
        op = self.ops[op_id]
        if op.status == Status.ADMITTED:
            self.queue(op.queue).active.discard(op_id)
            self.queue(op.queue).waiting += 1
            self._enqueue(op)
        elif op.status == Status.REJECTED and op.cost_known and op.cache_known:
            self.queue(op.queue).waiting += 1
            self._enqueue(op)
        elif op.status == Status.SUCCEEDED and op.cache_hit_of is not None:
            op.status = Status.PENDING
            self.queue(op.queue).waiting += 1
            self.cache_hits.append(op_id)

    def requeue(self, op: OpRecord) -> None:
        """Put back an op popped by a cycle that could not admit it."""
        heapq.heappush(self.queue(op.queue).heap, (op.key, op.op_id))

    def pop_next(self, queue: str) -> OpRecord | None:
        """The head of a queue's order (skipping entries that are no longer queued)."""
        heap = self.queue(queue).heap
        while heap:
            _, op_id = heapq.heappop(heap)
            op = self.ops[op_id]
            if op.status == Status.QUEUED:
                return op
        return None


_STATUS_OF = {
    OperationAdmitted: Status.ADMITTED,
    OperationDispatched: Status.DISPATCHED,
    OperationRunning: Status.RUNNING,
    OperationSucceeded: Status.SUCCEEDED,
    OperationFailed: Status.FAILED,
    OperationRejected: Status.REJECTED,
    OperationStopped: Status.STOPPED,
}


def active_ops(state: AdmissionState):
    for q in state.queues.values():
        for op_id in q.active:
            yield state.ops[op_id]
