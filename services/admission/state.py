"""Admission state: every operation's lifecycle, folded from events. Folding is idempotent, and
within an attempt a status never moves backwards; a preemption or eviction ends an attempt and
queues the op again for the next one. Replaying the stream rebuilds the state exactly."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

import msgspec

from proto.cluster import ClusterEvent, NodeObserved
from proto.events import (
    CacheHit,
    CacheMissed,
    CostEstimated,
    CostRecorded,
    Event,
    OperationAdmitted,
    OperationApproved,
    OperationEvicted,
    OperationFailed,
    OperationOnHold,
    OperationPreempted,
    OperationResumed,
    OperationRunning,
    OperationSubmitted,
    PreemptRequested,
    RetryScheduled,
)
from proto.failures import is_infrastructure, will_retry
from proto.lifecycle import STATUS_OF, Status
from proto.resources import requested
from services.admission.policies.capacity import NodeInfo
from services.admission.records import Ghost, OpRecord, Park, QueueState
from services.admission.spend import Spend
from services.admission.usage_history import UsageHistory

__all__ = ["AdmissionState", "OpRecord", "QueueState", "Status", "active_ops"]


class AdmissionState:
    def __init__(self) -> None:
        self.ops: dict[str, OpRecord] = {}
        self.queues: dict[str, QueueState] = {}
        self.cache_hits: list[str] = []  # ops to finish from the cache
        self.nodes: dict[str, NodeInfo] = {}  # the cluster as the dispatcher reports it
        self.nominated: dict[str, set[str]] = {}  # preemptor -> victims whose pods are not gone yet
        self.ghosts: dict[str, list[Ghost]] = {}  # preemptor -> what its gone victims held (held for it)
        self.cleared: list[str] = []  # gates just cleared: the cycle queues or holds them
        self.retrying: list[str] = []  # a failed attempt to retry: the cycle schedules it
        self.timers: list[datetime] = []  # back-offs ending: a cycle must run then, event or not
        self.aging: dict[str, tuple[float, float | None]] = {}  # queue -> (per minute, cap), from the config
        self.usage_history = UsageHistory()  # for usage-history fair sharing (not replayed: it decays)
        self.spend = Spend()  # actual cost per budget window (from cost_recorded)
        self.gens: dict[str, int] = {}  # what parked queues wait on -> how often it changed (see parking)
        self.parked: dict[str, Park] = {}  # queues a cycle may skip until a generation they wait on moves
        self.scopes: dict[str, str] = {}  # queue -> its cohort (from the configuration in force)
        self.starved: set[str] = set()  # queues whose ops wait for quota they lent out (cohort stops lending)
        self.scoped_book: object | None = None  # the compiled configuration the scopes come from
        self.tracker: Any = NoTracker()  # told of every change of what runs (the cycle's snapshot): a Tracker

    def due(self, now: datetime) -> bool:
        """Has a back-off ended since the last cycle? (Then run one even if nothing happened.)"""
        ended = [t for t in self.timers if t <= now]
        self.timers = [t for t in self.timers if t > now]
        if ended:
            self.parked.clear()  # a back-off or a budget window ended: look at every queue again
        return bool(ended)

    def configure_scopes(self, book: object, cohorts: dict[str, str]) -> None:
        """The queues' cohorts under a new configuration; every queue is looked at again."""
        self.scoped_book, self.scopes = book, dict(cohorts)
        self.parked.clear()

    def scope_key(self, queue: str) -> str:
        return f"scope:{self.scopes.get(queue) or queue}"

    def bump(self, key: str) -> None:
        self.gens[key] = self.gens.get(key, 0) + 1

    def set_starved(self, queue: str, starved: bool) -> None:
        if starved != (queue in self.starved):
            (self.starved.add if starved else self.starved.discard)(queue)
            self.bump(self.scope_key(queue))

    def configure_aging(self, aging: dict[str, tuple[float, float | None]], now: datetime) -> None:
        self.aging = dict(aging)
        for name, q in self.queues.items():
            q.pending.reconfigure(*self.aging.get(name, (0.0, 0.0)), now)

    def observe(self, event: ClusterEvent) -> bool:
        if isinstance(event, NodeObserved):
            info = NodeInfo.of(event)
            if self.nodes.get(event.node) == info:
                return False
            self.nodes[event.node] = info
        elif self.nodes.pop(event.node, None) is None:
            return False
        self.bump("capacity")
        self.tracker.invalidate()
        self.parked.clear()  # a node can make any op fit, or never fit (rejected): look at every queue
        return True

    def queue(self, name: str) -> QueueState:
        q = self.queues.get(name)
        if q is None:
            q = self.queues[name] = QueueState()
            per_minute, cap = self.aging.get(name, (0.0, 0.0))
            q.pending.per_minute, q.pending.cap = per_minute, math.inf if cap is None else cap
        return q

    def apply(self, event: Event) -> bool:
        """Fold one event. Returns True when the state changed."""
        if isinstance(event, OperationSubmitted):
            return self._submitted(event)
        if isinstance(event, CostRecorded):
            recorded = self.spend.record(event)  # counts whatever its op and attempt
            if recorded:
                self.bump("budget")
            return recorded
        op = self.ops.get(event.op_id)
        if op is None or event.attempt < op.attempt:
            return False  # unknown, or news of an attempt that is over
        if isinstance(event, (CostEstimated, CacheMissed, CacheHit)):
            return self._gate(op, event)
        if isinstance(event, PreemptRequested):
            return self._preempt_requested(op, event)
        if isinstance(event, (OperationPreempted, OperationEvicted, RetryScheduled)):
            return self._attempt_over(op, event)
        if isinstance(event, (OperationOnHold, OperationApproved)):
            return self._approval(op, event)
        if isinstance(event, OperationFailed):
            return self._failed(op, event)
        if isinstance(event, OperationResumed):
            return self._resumed(op, event)
        return self._lifecycle(op, event)

    def _submitted(self, e: OperationSubmitted) -> bool:
        if e.op_id in self.ops:
            return False
        pods = [e.spec.container] + [g.container for g in e.spec.replicas for _ in range(g.count)]
        pod_requests = [requested(c.resources.limits, c.resources.requests) for c in pods]
        total: dict[str, float] = {}
        for pod in pod_requests:
            for resource, amount in pod.items():
                total[resource] = total.get(resource, 0.0) + amount
        self.ops[e.op_id] = OpRecord(e.op_id, e.queue, e.priority, e.submitted_at, e.spec,
                                     request=total, pods=pod_requests, requested_by=e.requested_by)
        self.queue(e.queue).waiting += 1
        return True

    def _gate(self, op: OpRecord, e: Event) -> bool:
        if op.status != Status.PENDING:
            return False
        if isinstance(e, CostEstimated):
            if op.cost_known:
                return False
            op.cost_known, op.estimate, op.duration_s = True, e.estimate.amount, e.duration_s
        elif isinstance(e, CacheMissed):
            if op.cache_known:
                return False
            op.cache_known = True
        elif isinstance(e, CacheHit):
            if op.cache_hit_of is not None:
                return False
            op.cache_hit_of, op.cache_outputs = e.original_op_id, dict(e.outputs)
            self.cache_hits.append(op.op_id)
            return True
        if op.cost_known and op.cache_known and op.cache_hit_of is None:
            self.cleared.append(op.op_id)  # the cycle queues it, or holds it for approval
        return True

    def _approval(self, op: OpRecord, e: OperationOnHold | OperationApproved) -> bool:
        if isinstance(e, OperationOnHold):
            if op.status != Status.PENDING:
                return False
            op.status, op.reason, op.reason_message = Status.ON_HOLD, e.reason, e.message
            return True
        if op.approved:
            return False
        op.approved = True
        if op.status == Status.ON_HOLD:
            self._enqueue(op, e.at)
        return True

    def enqueue_cleared(self, op: OpRecord, now: datetime) -> None:
        """Gates cleared and no approval needed: into its queue's order."""
        if op.status == Status.PENDING:
            self._enqueue(op, now)

    def _failed(self, op: OpRecord, e: OperationFailed) -> bool:
        """A failed attempt: retried (not final) when the failure allows it, else the op failed."""
        if op.status.terminal:
            return False
        if not op.status.active or not will_retry(e.reason, op.spec.termination.max_retries, op.retries_used, op.infra_failures):
            return self._lifecycle(op, e)
        if is_infrastructure(e.reason):
            op.infra_failures += 1
        else:
            op.retries_used += 1
        self._set_active(op, False)
        op.status, op.reason, op.node = Status.RETRYING, e.reason, e.node or op.node
        op.attempts.append((op.attempt, "failed", e.reason))
        self.retrying.append(op.op_id)
        return True

    def _enqueue(self, op: OpRecord, now: datetime | None = None) -> None:
        op.status = Status.QUEUED
        self.queue(op.queue).pending.push(op.op_id, op.priority, op.since, now)
        self.parked.pop(op.queue, None)  # something new to look at

    def _lifecycle(self, op: OpRecord, e: Event) -> bool:
        status = STATUS_OF.get(type(e))
        if status is None or op.status.terminal:
            return False
        if e.attempt == op.attempt and status <= op.status:
            return False
        if op.status < Status.ADMITTED:
            self.queue(op.queue).waiting -= 1
            if status != Status.ADMITTED:
                self.parked.pop(op.queue, None)  # left its queue (stopped, rejected...): others move up
        if isinstance(e, OperationAdmitted):
            self._admitted(op, e)
        if isinstance(e, OperationRunning):
            op.running_since = op.running_since or e.at
        op.status, op.attempt = status, e.attempt
        node = getattr(e, "node", None)
        located = bool(node) and node != op.node
        for attr in ("pod_name", "namespace", "node"):
            value = getattr(e, attr, None)
            if value:
                setattr(op, attr, value)
        if located:
            self.bump("capacity")  # the op's pods are where the node says, no longer where assumed
            if op.op_id in self.queue(op.queue).active:
                self.tracker.located(op)
        op.reason = getattr(e, "reason", "") or op.reason
        self._set_active(op, status.active)
        return True

    def _admitted(self, op: OpRecord, e: OperationAdmitted) -> None:
        op.flavors, op.borrowing = dict(e.flavors), e.borrowing
        op.node_selector, op.tolerations = dict(e.node_selector), list(e.tolerations)
        op.admitted_at, op.running_since, op.node, op.preempted_by = e.at, None, None, None
        op.admitted_priority = e.effective_priority
        self.drop_nomination(op.op_id)

    def drop_nomination(self, preemptor: str) -> None:
        self.nominated.pop(preemptor, None)
        self.release_ghosts(preemptor)

    def release_ghosts(self, preemptor: str) -> None:
        """Let go of the room held for a preemptor (to evaluate it, or because it gave up)."""
        for ghost in self.ghosts.pop(preemptor, []):
            self.tracker.held(ghost, -1)
            self.bump(self.scope_key(ghost.queue))
            self.bump("capacity")

    def _set_active(self, op: OpRecord, active: bool) -> None:
        q = self.queue(op.queue)
        if (op.op_id in q.active) != active:
            self._changed_usage(op, active)
            self.tracker.activated(op, active)
            op.assumed_nodes = None
        if active:
            q.active.add(op.op_id)
            q.by_priority.setdefault(op.admitted_priority, set()).add(op.op_id)
        else:
            q.active.discard(op.op_id)
            for priority in [p for p, ops in q.by_priority.items() if op.op_id in ops]:
                q.by_priority[priority].discard(op.op_id)
                if not q.by_priority[priority]:
                    del q.by_priority[priority]
            for victims in self.nominated.values():
                victims.discard(op.op_id)

    def _changed_usage(self, op: OpRecord, active: bool) -> None:
        self.bump(self.scope_key(op.queue))
        if op.spec.batch:
            self.bump(f"batch:{op.spec.batch}")
        if not active:
            self.bump("capacity")
            self.bump("budget")  # what it was expected to spend no longer counts as committed

    def _preempt_requested(self, op: OpRecord, e: PreemptRequested) -> bool:
        if not op.status.active or op.preempted_by is not None:
            return False
        op.preempted_by = e.preemptor
        self.nominated.setdefault(e.preemptor, set()).add(op.op_id)
        return True

    def _attempt_over(self, op: OpRecord, e: OperationPreempted | OperationEvicted | RetryScheduled) -> bool:
        """The attempt is over (taken away, or failed with a retry left): queue the op for the next."""
        expected = Status.RETRYING if isinstance(e, RetryScheduled) else None
        if e.attempt != op.attempt or not (op.status == expected or (expected is None and op.status.active)):
            return False
        if not isinstance(e, RetryScheduled):
            op.attempts.append((op.attempt, codec_type(e), e.reason))
        if isinstance(e, OperationPreempted) and e.preemptor in self.nominated:
            ghost = Ghost(op.queue, dict(op.flavors), dict(op.request), list(op.pods), op.node, op.estimate)
            self.ghosts.setdefault(e.preemptor, []).append(ghost)
            self.tracker.held(ghost, +1)
        self._set_active(op, False)
        op.queued_at = e.at  # back of the line among equals, as Kueue requeues at eviction time
        if isinstance(e, OperationPreempted):
            op.preempted_at, op.preemptions = e.at, op.preemptions + 1
        else:
            op.not_before = e.at + timedelta(seconds=e.retry_after_s)  # eviction or retry back-off
            self.timers.append(op.not_before)
        op.attempt += 1
        op.reason = e.reason
        op.reason_message = e.message if isinstance(e, OperationEvicted) else ""
        op.pod_name = op.node = op.preempted_by = None
        op.flavors, op.node_selector, op.tolerations, op.borrowing = {}, {}, [], False
        self.queue(op.queue).waiting += 1
        self._enqueue(op, e.at)
        return True

    def _resumed(self, op: OpRecord, e: OperationResumed) -> bool:
        """A stopped, failed or timed-out op continues in place as a new attempt."""
        if op.status not in (Status.STOPPED, Status.FAILED, Status.TIMED_OUT) or e.attempt <= op.attempt:
            return False
        op.attempts.append((op.attempt, op.status.name.lower(), op.reason))
        if e.params:
            op.spec = msgspec.structs.replace(op.spec, params={**op.spec.params, **e.params})
        op.attempt, op.reason, op.not_before, op.queued_at = e.attempt, "resumed", None, e.at
        op.pod_name = op.node = op.preempted_by = None
        op.flavors, op.node_selector, op.tolerations, op.borrowing = {}, {}, [], False
        self.queue(op.queue).waiting += 1
        self._enqueue(op, e.at)
        return True

    def unassume(self, op_id: str, now: datetime | None = None, kind: type | None = None) -> None:
        """Forget a decision whose publish failed: a requested preemption is forgotten, an admitted
        op is queued again, a cache hit waits to be finished again."""
        op = self.ops[op_id]
        if kind is PreemptRequested or (kind is None and op.status.active and op.preempted_by is not None):
            if op.preempted_by is not None:
                victims = self.nominated.get(op.preempted_by)
                if victims is not None:
                    victims.discard(op_id)
                    if not victims and not self.ghosts.get(op.preempted_by):
                        self.drop_nomination(op.preempted_by)
                op.preempted_by = None
        elif op.status == Status.ADMITTED:
            self._set_active(op, False)
            self.queue(op.queue).waiting += 1
            self._enqueue(op, now)
        elif op.status == Status.REJECTED and op.cost_known and op.cache_known:
            self.queue(op.queue).waiting += 1
            self._enqueue(op, now)
        elif op.status == Status.SUCCEEDED and op.cache_hit_of is not None:
            op.status = Status.PENDING
            self.queue(op.queue).waiting += 1
            self.cache_hits.append(op_id)

    def requeue(self, op: OpRecord, now: datetime | None = None) -> None:
        """Put back an op popped by a cycle that could not admit it."""
        self.queue(op.queue).pending.push(op.op_id, op.priority, op.since, now)

    def pop_next(self, queue: str, now: datetime | None = None) -> OpRecord | None:
        """The head of a queue's order (skipping entries that are no longer queued)."""
        pending = self.queue(queue).pending
        now = now or datetime.fromtimestamp(0, timezone.utc)
        while (op_id := pending.pop(now)) is not None:
            op = self.ops[op_id]
            if op.status == Status.QUEUED:
                return op
        return None


class NoTracker:
    """Until a cycle keeps a snapshot, nobody needs telling."""

    def invalidate(self) -> None: ...
    def activated(self, op: OpRecord, active: bool) -> None: ...
    def located(self, op: OpRecord) -> None: ...
    def held(self, ghost: Ghost, sign: int) -> None: ...


def codec_type(event: Event) -> str:
    return type(event).__struct_config__.tag  # type: ignore[return-value]


def active_ops(state: AdmissionState):
    for q in state.queues.values():
        for op_id in q.active:
            yield state.ops[op_id]
