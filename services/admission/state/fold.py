"""The op-lifecycle fold: every event about an operation (and every node fact and recorded spend)
folded into records, announcing each transition to its followers (``transitions.Transitions``).

Folding is idempotent, and within an attempt a status never moves backwards (``proto.lifecycle``); a
preemption or eviction ends an attempt and queues the op again for the next one. Replaying the stream
rebuilds the records exactly, each op's timeline with them (``rules.op_history``: an entry per event of the
stream that says what happened to it, whichever attempt it is about; a decision assumed before its publish
is in once the stream has it). The fold owns the facts: op records, nodes, spend, and the preemptions in
flight (``nominated``: preemptor -> victims whose pods are not gone yet; ``ghosts``: what gone victims
held, kept for their preemptor). What is derived from them (queue order, usage) belongs to the followers."""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import msgspec

from opsched.proto.cluster import AgentHeartbeat, ClusterEvent, NodeObserved
from opsched.proto.codec import type_of
from opsched.proto.events import (
    BudgetExceeded,
    CacheHit,
    CacheMissed,
    CostEstimated,
    CostRecorded,
    DispatchDelayed,
    Event,
    FailureFinal,
    HandlerFailed,
    NodeCostRecorded,
    OperationAdmitted,
    OperationApproved,
    OperationEvicted,
    OperationFailed,
    OperationOnHold,
    OperationPreempted,
    OperationResumed,
    OperationRunning,
    OperationSubmitted,
    OperationSucceeded,
    PreemptRequested,
    RetryScheduled,
    SpendRolled,
    StopRequested,
)
from opsched.proto.lifecycle import RESUMABLE, STATUS_OF, Status, allowed
from opsched.proto.reasons import Ending, Failure
from opsched.rules.caching import uses_cache
from opsched.rules.failures import BLOCKING_MESSAGES, is_infrastructure, will_retry
from opsched.rules.node_pools import awaited
from opsched.rules.op_history import entry_of
from opsched.services.admission.model.agents import node_key
from opsched.services.admission.model.nodes import NodeInfo
from opsched.services.admission.model.records import Ghost, OpRecord
from opsched.services.admission.state.fold_failures import FoldFailures
from opsched.services.admission.state.fold_preemptions import PreemptionsInFlight
from opsched.services.admission.state.pool_budgets import SCOPE as POOL_SCOPE
from opsched.services.admission.state.pool_budgets import PoolBudgets
from opsched.services.admission.state.retention import Strays, Tombstones
from opsched.services.admission.state.spend import Spend
from opsched.services.admission.state.transitions import Transitions


class OpFold:
    def __init__(self, followers: Sequence[Transitions] = (), tombstones: int = 100_000) -> None:
        self.ops: dict[str, OpRecord] = {}
        self.gone = Tombstones(tombstones)  # the final status of ops that left memory (``retention``)
        self.strays = Strays()  # events about ops not held, to remove from the stream in time
        self.nodes: dict[str, NodeInfo] = {}  # the cluster as the dispatcher reports it
        self.heartbeats: dict[str, datetime] = {}  # named agent -> its dispatcher's last heartbeat
        self.spend = Spend()  # actual cost per budget window (from cost_recorded)
        self.pool_budgets = PoolBudgets()  # node pools whose budget is spent (from budget_exceeded of scope pool)
        self.in_flight = PreemptionsInFlight()  # nominated preemptors and the room held for them
        self.followers: tuple[Transitions, ...] = tuple(followers)
        self.failures = FoldFailures()  # events it could not take
        self.position = 0  # the stream sequence of the last event folded

    # ---- preemptions in flight (``fold_preemptions``) ----
    @property
    def nominated(self) -> dict[str, set[str]]:
        """Preemptor -> victims whose pods are not gone yet."""
        return self.in_flight.nominated

    @property
    def ghosts(self) -> dict[str, list[Ghost]]:
        """Preemptor -> what its gone victims held (held for it)."""
        return self.in_flight.ghosts

    def drop_nomination(self, preemptor: str) -> None:
        self._let_go(self.in_flight.drop(preemptor))

    def release_ghosts(self, preemptor: str) -> None:
        """Let go of the room held for a preemptor (to evaluate it, or because it gave up)."""
        self._let_go(self.in_flight.release(preemptor))

    def _let_go(self, ghosts: list[Ghost]) -> None:
        for ghost in ghosts:
            for f in self.followers:
                f.held(ghost, -1)

    def _hold(self, preemptor: str, ghost: Ghost) -> None:
        self.in_flight.hold(preemptor, ghost)
        for f in self.followers:
            f.held(ghost, +1)

    def _spent(self) -> bool:
        for f in self.followers:
            f.spent()
        return True

    # ---- facts that are not an op's ----
    def observe(self, event: ClusterEvent) -> bool:
        """Fold a node fact. Returns True when the nodes changed (or an agent's heartbeat came: a cycle looks at
        which agents answer)."""
        if isinstance(event, AgentHeartbeat):
            last = self.heartbeats.get(event.agent)
            self.heartbeats[event.agent] = event.at if last is None else max(last, event.at)
            return True
        if isinstance(event, NodeObserved):
            info = NodeInfo.of(event)
            if self.nodes.get(info.name) == info:
                return False
            self.nodes[info.name] = info
        elif self.nodes.pop(node_key(event.agent, event.node), None) is None:
            return False
        for f in self.followers:
            f.nodes_changed()
        return True

    def apply(self, event: Event, seq: int = 0) -> bool:
        """Fold one event (``seq``: its stream sequence; 0 for a decision assumed before its publish).
        Returns True when the state changed. Never raises: an event it cannot take ends its op."""
        try:
            return self._fold(event, seq)
        except Exception as exc:  # noqa: BLE001 - logged, counted, its op ended (``fold_failures``)
            return self.failures.failed(self, event, seq, exc)

    def _fold(self, event: Event, seq: int) -> bool:
        self.position = max(self.position, seq)
        if isinstance(event, SpendRolled) or (isinstance(event, BudgetExceeded) and event.scope == POOL_SCOPE):
            return self._scope_fact(event)
        if isinstance(event, NodeCostRecorded):  # a node's charge, no op's event: its pool's spend only
            return self.spend.record(event, seq) and self._spent()
        if event.op_id not in self.ops and not isinstance(event, OperationSubmitted):
            self.strays.add(event, seq)
        changed = self._apply(event, seq)
        op = self.ops.get(event.op_id)
        if op is not None and seq:
            if seq > op.history.last_seq:  # an event of the stream not folded yet
                op.history.timeline.add(entry_of(event))
            op.history.kinds.add(type_of(event))
            op.history.last_seq = max(op.history.last_seq, seq)
            if op.status.terminal != (op.history.ended_at is not None):
                op.history.ended_at = event.at if op.status.terminal else None  # its ttl runs from its end on the stream
                if op.status.terminal:
                    for f in self.followers:
                        f.ended(op)
        return changed

    def _scope_fact(self, event: SpendRolled | BudgetExceeded) -> bool:
        """An event about a budget scope, no op's: a scope's totals (``rules.spend_totals``), or a node pool's
        budget spent (``pool_budgets``: the pool adds no more nodes, so the snapshot has fewer virtual ones)."""
        if isinstance(event, SpendRolled):
            self.spend.roll(event)
            return self._spent()
        if not self.pool_budgets.fold(event):
            return False
        for f in self.followers:
            f.nodes_changed()
        return True

    def _apply(self, event: Event, seq: int) -> bool:
        if isinstance(event, OperationSubmitted):
            return self._submitted(event)
        if isinstance(event, CostRecorded):
            return self._cost_recorded(event, seq)
        op = self.ops.get(event.op_id)
        if op is None or event.attempt < op.attempt:
            return False  # unknown, or news of an attempt that is over
        return self._apply_to(op, event)

    def _cost_recorded(self, event: CostRecorded, seq: int) -> bool:
        if not self.spend.record(event, seq):  # counts whatever its op and attempt
            return False
        if event.op_id in self.ops:
            self.ops[event.op_id].history.cost += event.amount
        return self._spent()

    def _apply_to(self, op: OpRecord, event: Event) -> bool:
        """An event about ``op``'s current attempt (or a later one), by its type."""
        if isinstance(event, (CostEstimated, CacheMissed, CacheHit)):
            return self._gate(op, event)
        if isinstance(event, PreemptRequested):
            return self.in_flight.requested(op, event, event.preemptor in self.ops)
        if isinstance(event, (OperationPreempted, OperationEvicted, RetryScheduled)):
            return self._attempt_over(op, event)
        if isinstance(event, (OperationOnHold, OperationApproved)):
            return self._approval(op, event)
        if isinstance(event, (OperationFailed, FailureFinal)):
            return self._failed(op, event)
        if isinstance(event, OperationResumed):
            return self._resumed(op, event)
        if isinstance(event, DispatchDelayed):
            return self._delayed(op, event)
        if isinstance(event, HandlerFailed):
            return self._handler_failed(op, event)
        if isinstance(event, StopRequested):  # a second stop of this attempt has nothing to do (``handlers``)
            op.history.stop_requested = event.attempt
            return False
        return self._lifecycle(op, event)

    # ---- leaving memory (``retention``) ----
    def forget(self, op_id: str) -> OpRecord | None:
        """A finished op leaves memory: its final status stays among the tombstones."""
        op = self.ops.get(op_id)
        if op is None or not op.status.terminal:
            return None
        del self.ops[op_id]
        self.spend.settle(op_id)
        self.drop_nomination(op_id)
        self.gone.add(op_id, op.status)
        for f in self.followers:
            f.forgotten(op)
        return op

    def status_of(self, op_id: str) -> Status | None:
        """An op's status, whether it is held or has left memory (None: unknown, or forgotten long ago)."""
        op = self.ops.get(op_id)
        return op.status if op is not None else self.gone.get(op_id)

    # ---- before the queue ----
    def _submitted(self, e: OperationSubmitted) -> bool:
        if e.op_id in self.ops:
            return False
        op = self.ops[e.op_id] = OpRecord.submitted(e)
        op.caching = uses_cache(e)
        op.cache_known = not op.caching  # caching off: the cache answers nothing, its gate is answered here
        self._entered(op)
        return True

    def _gate(self, op: OpRecord, e: Event) -> bool:
        if op.status != Status.PENDING:
            return False
        if isinstance(e, CacheHit):
            return self._cache_hit(op, e)
        if not self._gate_answered(op, e):
            return False
        if op.cost_known and op.cache_known and op.history.cache_hit_of is None:
            for f in self.followers:
                f.gates_cleared(op)  # the cycle queues it, or holds it for approval
        return True

    def _gate_answered(self, op: OpRecord, e: Event) -> bool:
        """A gate's answer taken: the estimate, or a cache miss (False: that gate had answered already)."""
        if isinstance(e, CostEstimated):
            if op.cost_known:
                return False
            op.cost_known, op.estimate, op.duration_s = True, e.estimate.amount, e.duration_s
            op.estimate_pool, op.price_points = e.pool, list(e.points)
            op.history.currency = e.estimate.currency
        elif isinstance(e, CacheMissed):
            if op.cache_known:  # answered already (a stream written before issue 36 has a miss ``disabled`` for
                return False    # an op with caching off: its gate was answered at its ``submitted``)
            op.cache_known = True
        return True

    def _cache_hit(self, op: OpRecord, e: CacheHit) -> bool:
        if op.history.cache_hit_of is not None:
            return False
        op.history.cache_hit_of, op.cache_outputs = e.original_op_id, dict(e.outputs)
        for f in self.followers:
            f.cache_hit(op)
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

    def _enqueue(self, op: OpRecord, now: datetime | None = None) -> None:
        op.status = Status.QUEUED
        for f in self.followers:
            f.queued(op, now)

    def _entered(self, op: OpRecord, restored: bool = False) -> None:
        for f in self.followers:
            f.entered(op, restored)

    # ---- an attempt's life ----
    def _lifecycle(self, op: OpRecord, e: Event) -> bool:
        status = STATUS_OF.get(type(e))
        if status is None or op.status.terminal:
            return False
        if e.attempt == op.attempt and not allowed(op.status, status):
            return False  # within an attempt, only forward
        if op.status < Status.ADMITTED:
            for f in self.followers:
                f.left(op, status == Status.ADMITTED)
        if isinstance(e, OperationAdmitted):
            if op.holds_quota:  # a later attempt admitted while the earlier one still counts: let go of where it was
                self.set_active(op, False)  # (its flavors, agent and estimate change: counted again below, as now)
            self._admitted(op, e)
        if isinstance(e, OperationRunning):
            op.running_since = op.running_since or e.at
            op.provisioning, op.provisioning_since = {}, None  # its nodes came
        if isinstance(e, OperationSucceeded):
            op.history.outputs = dict(e.outputs)
        op.status, op.attempt = status, e.attempt
        op.history.waiting_for = op.history.waiting_since = None  # dispatched (or ended): no longer waiting for a dependency
        self._locate(op, e)
        # an end always says why: its event's reason, else the last one known, else the end itself
        op.reason = getattr(e, "reason", "") or op.reason or (type_of(e) if status.terminal else "")
        message = getattr(e, "message", None)
        if status.terminal and isinstance(message, str) and message:  # ... and its message (``why`` of an ended op)
            op.reason_message = message
        self.set_active(op, status.active)
        return True

    def _locate(self, op: OpRecord, e: Event) -> None:
        """Where ``e`` says the op's pod is (its name, namespace, node); followers hear of a new node."""
        node = getattr(e, "node", None)
        node = node_key(op.agent, node) if node else None  # another agent's cluster may have a node of that name
        located = bool(node) and node != op.node
        for attr, value in (("pod_name", getattr(e, "pod_name", None)), ("namespace", getattr(e, "namespace", None)),
                            ("node", node)):
            if value:
                setattr(op, attr, value)
        if located:
            for f in self.followers:
                f.located(op)  # its pods are where the node says, no longer where assumed

    def _admitted(self, op: OpRecord, e: OperationAdmitted) -> None:
        op.flavors, op.borrowing, op.agent = dict(e.flavors), e.borrowing, e.agent
        op.routed = op.routed or bool(e.agent)
        op.node_selector, op.tolerations = dict(e.node_selector), list(e.tolerations)
        op.admitted_at, op.running_since, op.node, op.preempted_by = e.at, None, None, None
        op.reason_message = ""  # why it waited (an eviction's message) says nothing of how this attempt ends
        op.admitted_priority = e.effective_priority
        op.provisioning, op.provisioning_since = awaited(e.provisioning), (e.at if any(e.provisioning) else None)
        op.provisioning_timeout_s, op.provisioning_expected_s = e.provisioning_timeout_s, e.provisioning_expected_s
        if e.estimate is not None:  # what it was admitted at, on its flavor (an older admitted: its one estimate)
            op.estimate, op.estimate_pool = e.estimate, e.pool
        self.drop_nomination(op.op_id)

    def set_active(self, op: OpRecord, active: bool) -> None:
        """Whether ``op`` holds quota: the one rule for taking and letting go of it (``fold_failures`` too)."""
        if op.holds_quota != active:
            op.holds_quota = active
            if not active and op.running_since is not None:  # it ran: its charge is on its way (``spend``)
                self.spend.expect(op.op_id, op.attempt, op.scopes, op.estimate, op.gpu_hours)
            for f in self.followers:
                (f.activated if active else f.deactivated)(op)
            op.assumed_nodes = None
        if not active:
            for victims in self.nominated.values():
                victims.discard(op.op_id)

    def _failed(self, op: OpRecord, e: OperationFailed | FailureFinal) -> bool:
        """A failed attempt, decided on here and only here: retried (RETRYING) when the failure allows it, else the
        op failed (FAILED). Either way the cycle publishes the decision (``retry_scheduled`` or ``failure_final``):
        nobody else derives it."""
        if isinstance(e, FailureFinal):
            return self._failure_final(op, e)
        if op.status.terminal:
            return False
        if not op.status.active or not will_retry(e.reason, op.spec.termination.max_retries, op.retries_used,
                                                  op.infra_failures):
            if not self._lifecycle(op, e):
                return False
            for f in self.followers:
                f.failure_decided(op)  # final: ``failure_final``
            return True
        if is_infrastructure(e.reason):
            op.infra_failures += 1
        else:
            op.retries_used += 1
        self.set_active(op, False)
        op.status, op.reason, op.node = Status.RETRYING, e.reason, node_key(op.agent, e.node) if e.node else op.node
        op.history.attempts.append((op.attempt, "failed", e.reason))
        for f in self.followers:
            f.failure_decided(op)  # a retry: ``retry_scheduled``
        return True

    def _failure_final(self, op: OpRecord, e: FailureFinal) -> bool:
        """The decision that attempt ``e.attempt``'s failure is final is published (or assumed): not again. It is
        this fold's own (the op failed already); should the fold have decided otherwise, the published one holds."""
        op.final_decided = max(op.final_decided, e.attempt)
        return not op.status.terminal and self._lifecycle(op, e)

    def _attempt_over(self, op: OpRecord, e: OperationPreempted | OperationEvicted | RetryScheduled) -> bool:
        """The attempt is over (taken away, or failed with a retry left): queue the op for the next."""
        expected = Status.RETRYING if isinstance(e, RetryScheduled) else None
        if e.attempt != op.attempt or not (op.status == expected or (expected is None and op.status.active)):
            return False
        if not isinstance(e, RetryScheduled):
            op.history.attempts.append((op.attempt, type_of(e), e.reason))
        if isinstance(e, OperationPreempted) and e.preemptor in self.nominated:
            self._hold(e.preemptor, Ghost(op.queue, dict(op.flavors), dict(op.request), list(op.pods), op.node,
                                          op.estimate, op.service))
        self.set_active(op, False)
        op.queued_at = e.at  # back of the line among equals, as Kueue requeues at eviction time
        if isinstance(e, OperationPreempted):
            op.preempted_at, op.history.preemptions = e.at, op.history.preemptions + 1
        else:
            op.not_before = e.at + timedelta(seconds=e.retry_after_s)  # eviction or retry back-off
            for f in self.followers:
                f.backing_off(op, op.not_before)
        op.attempt += 1
        op.reason = e.reason
        op.reason_message = e.message if isinstance(e, OperationEvicted) else ""
        self._next_attempt(op, e.at)
        return True

    # ---- failures that are not the op's: an outage, a handler that gave up ----
    def _delayed(self, op: OpRecord, e: DispatchDelayed) -> bool:
        """Its dispatch waits for a dependency (the Kubernetes API): ``why`` says so until it moves on."""
        if e.attempt != op.attempt or op.status != Status.ADMITTED or op.history.waiting_for is not None:
            return False
        op.history.waiting_for, op.history.waiting_since, op.history.waiting_detail = e.dependency, e.at, e.message
        return True

    def _handler_failed(self, op: OpRecord, e: HandlerFailed) -> bool:
        """A service gave up on a message the op waited on. An admitted attempt (its dispatch or preemption
        failed) has failed for the infrastructure: retried as the retry policy allows, without using one of
        the op's own retries; any other case (waiting for its gates, a stop, no retry left) ends the op: the
        cycle rejects it. Either way it holds no quota and waits for nothing that will not come."""
        if (e.failed_type not in BLOCKING_MESSAGES or e.attempt != op.attempt or op.status.terminal
                or op.status == Status.RETRYING or op.handler_failure):
            return False
        retry = op.status.active and e.failed_type != "stop_requested" and will_retry(
            Failure.HANDLER_GAVE_UP, op.spec.termination.max_retries, op.retries_used, op.infra_failures)
        if retry:
            op.infra_failures += 1
            self.set_active(op, False)
            op.status, op.reason, op.history.waiting_for = Status.RETRYING, Failure.HANDLER_GAVE_UP, None
            op.history.attempts.append((op.attempt, type_of(e), Failure.HANDLER_GAVE_UP))
            for f in self.followers:
                f.failure_decided(op)
            return True
        op.handler_failure = f"{e.service or 'a service'} gave up on its {e.failed_type} message: {e.error}"
        for f in self.followers:
            f.handler_failed(op)
        return True

    def _resumed(self, op: OpRecord, e: OperationResumed) -> bool:
        """A stopped, failed or timed-out op continues in place as a new attempt."""
        if op.status not in RESUMABLE or e.attempt <= op.attempt:
            return False
        op.history.attempts.append((op.attempt, op.status.name.lower(), op.reason))
        if e.params:
            op.spec = msgspec.structs.replace(op.spec, params={**op.spec.params, **e.params})
        op.attempt, op.reason, op.not_before, op.queued_at = e.attempt, Ending.RESUMED, None, e.at
        self._next_attempt(op, e.at)
        return True

    def _next_attempt(self, op: OpRecord, at: datetime) -> None:
        """Forget where the last attempt ran; the op waits in its queue again."""
        op.pod_name = op.node = op.preempted_by = None
        op.flavors, op.node_selector, op.tolerations, op.borrowing = {}, {}, [], False
        self._entered(op)
        self._enqueue(op, at)

    # ---- a decision whose publish failed ----
    def _unnominate(self, op: OpRecord) -> None:
        """``op`` is no longer a victim of the preemptor it was nominated for."""
        if op.preempted_by is not None:
            victims = self.nominated.get(op.preempted_by)
            if victims is not None:
                victims.discard(op.op_id)
                if not victims and not self.ghosts.get(op.preempted_by):
                    self.drop_nomination(op.preempted_by)
            op.preempted_by = None

    def unassume(self, op_id: str, now: datetime | None = None, kind: type | None = None) -> None:
        """Forget a decision whose publish failed: a requested preemption is forgotten, an admitted
        op is queued again, a cache hit waits to be finished again, a failure's final decision is published again."""
        op = self.ops[op_id]
        if kind is FailureFinal:
            op.final_decided = min(op.final_decided, op.attempt - 1)
            for f in self.followers:
                f.failure_decided(op)  # published by the next cycle
        elif kind is PreemptRequested or (kind is None and op.status.active and op.preempted_by is not None):
            self._unnominate(op)
        elif op.status == Status.ADMITTED:
            self.set_active(op, False)
            self._entered(op, restored=True)
            self._enqueue(op, now)
        elif op.status in (Status.REJECTED, Status.FAILED) and op.handler_failure:
            for f in self.followers:
                f.handler_failed(op)  # its end is published again by the next cycle
        elif op.status == Status.REJECTED and op.cost_known and op.cache_known:
            self._entered(op, restored=True)
            self._enqueue(op, now)
        elif op.status == Status.SUCCEEDED and op.history.cache_hit_of is not None:
            op.status = Status.PENDING
            self._entered(op, restored=True)
            for f in self.followers:
                f.cache_hit(op)
