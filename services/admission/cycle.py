"""One scheduling cycle over a snapshot, admitting as many ops as fit (not one head per cycle).

The cycle decides on the snapshot the usage cache keeps (``state.usage_cache.UsageCache.current``) and asks
the policies (``policies``), which see only that snapshot and a read-only view of the running ops
(``state.views.QueueView``). ``Cycle.run`` takes these steps, in this order:

1. Un-park every queue whose back-off or budget window ended (``QueueManager.due``). Ask every active op of a
   queue an admin drained (``queue_stops``) to go, once (``_drain``: ``preempt_requested``, reason
   ``queue_drained``, no preemptor).
2. With fair sharing on, let the usage history decay to now and add the snapshot's usage.
3. End the ops a service gave up on, or whose event admission could not fold (rejected, or failed if they had
   started), before anything may admit them (``_end_handler_failures``).
4. Fail the active ops of agents silent past ``lostAfterSeconds`` (``AgentLost``), and ask for a cycle at the
   next agent deadline (``_agents_lost``).
5. Finish cache hits: succeeded with the original's outputs (``_finish_cache_hits``).
6. Ops whose gates cleared (cost estimate in, and a cache miss for an op that uses the cache): held for approval,
   or queued (``_cleared``).
7. Publish the retry decisions of failed attempts: `retry_scheduled` with its back-off, or `failure_final` (``_failures``).
8. Nominated preemptors: one whose victims are gone is evaluated first, on the room held for it, before anyone
   else can take it; one whose victims still run keeps waiting (``_nominated``).
9. Walk the queues in hand-off order (queue priority, then name; with fair sharing the lowest share first);
   a queue held or drained by an admin is skipped (nothing of it is admitted), and so is a parked one
   (``parking.skip``). In each, pop ops in their (aged) order and admit those that
   fit within quota; one that fits only by borrowing is set aside; one no node could ever fit is rejected; one
   that must wait may preempt (a few plans per cycle), else is kept. After LOOKAHEAD such ops, or a full
   queue, the queue is left for this cycle (bounded work: O((admitted + LOOKAHEAD) log n)); a queue where
   nothing was decided is parked (``_walk_queue``).
10. Admit the set-aside borrowers, in queue order then op order (with fair sharing the queue with the lowest
    share first), while the cohort can lend (``_admit_borrowers``).
11. Return the decisions. Each was assumed in state and snapshot when made; the caller publishes them.
"""
from __future__ import annotations

import os
from datetime import datetime

from opsched.proto.events import (
    Event,
    FailureFinal,
    OperationAdmitted,
    OperationFailed,
    OperationOnHold,
    OperationRejected,
    OperationSucceeded,
    PreemptRequested,
    RetryScheduled,
)
from opsched.proto.lifecycle import CACHE_HIT_REASON
from opsched.proto.queue_stops import QueueStopSet
from opsched.proto.reasons import Failure, Preemption, Reason, Refusal
from opsched.rules import connections
from opsched.rules.failures import is_infrastructure, why_final
from opsched.rules.naming import pod_name, pod_names
from opsched.rules.pod_security import carried, run_policy
from opsched.rules.templating import TemplateError
from opsched.services.admission import parking
from opsched.services.admission.model import agents
from opsched.services.admission.model.queues import Book
from opsched.services.admission.policies import aging, approval, budgets, preemption
from opsched.services.admission.policies.admit import (
    ADMIT,
    BORROW,
    UNFITTABLE,
    WAIT,
    Verdict,
    evaluate,
)
from opsched.services.admission.policies.fairshare import queue_order, share_of
from opsched.services.admission.policies.quota import lowest_fitting_height
from opsched.services.admission.policies.retries import retry_delay
from opsched.services.admission.rendering import INVALID_TEMPLATE, rendered
from opsched.services.admission.state.admission_state import AdmissionState, OpRecord, Status, snapshot_of
from opsched.services.admission.state.snapshot import same
from opsched.services.runtime.sealing import UNSEALABLE_ENV, Sealer, Unsealable

UNKNOWN_CONNECTION = Refusal.UNKNOWN_CONNECTION  # a connection the configuration no longer declares for the op
VERIFY = os.environ.get("OPSCHED_VERIFY_SNAPSHOT") == "1"  # tests: compare the tracked snapshot with a build
LOOKAHEAD = 16
PREEMPTION_PLANS_PER_CYCLE = 4


class Cycle:
    def __init__(self, state: AdmissionState, book: Book, now: datetime, namespace: str,
                 sealer: Sealer | None = None) -> None:
        self.state, self.book, self.now, self.namespace = state, book, now, namespace
        self.sealer = sealer or Sealer(None)  # the op's env values are rendered opened, recorded sealed
        self.fold, self.queues, self.usage = state.fold, state.queues, state.usage
        if self.queues.scoped_book is not book:
            self.queues.configure_scopes(book, {q.name: book.tree.root_of(q.name).name  # a whole tree's usage
                                                for q in book.config.queues if q.cohort})
        self.snap = self.usage.current(book, now)
        self.snap.stopped = state.stops.in_force
        if VERIFY:
            differences = same(self.snap, snapshot_of(state, book, now))
            assert not differences, f"tracked snapshot drifted: {differences}"
        self.decisions: list[Event] = []
        self.plans_left = PREEMPTION_PLANS_PER_CYCLE

    def run(self) -> list[Event]:
        """The steps of the module's docstring, numbered alike."""
        self.queues.due(self.now)  # 1
        self._drain()
        fair = self.book.config.fair_sharing
        if fair.enabled:  # 2
            self.usage.history.advance(self.now, self.snap.usage, fair.half_life_seconds)
        self._end_handler_failures()  # 3
        self._agents_lost()  # 4
        self._finish_cache_hits()  # 5
        self._cleared()  # 6
        self._failures()  # 7
        self._nominated()  # 8
        borrowers: list[OpRecord] = []
        for queue in queue_order(self.book, self.snap, self.usage):  # 9
            if queue in self.snap.stopped:
                continue  # held by an admin: its ops wait (``queue_held``); its quota stays lendable
            if not parking.skip(self.state, queue, self.now):
                self._walk_queue(queue, borrowers)
            elif queue in self.queues.starved:
                self.snap.starved.add(queue)  # still waiting for its lent quota
        self._admit_borrowers(borrowers)  # 10
        return self.decisions  # 11

    def _drain(self) -> None:
        """Every active op of a drained queue not yet asked to go is preempted (an admin's action: services and
        ops that are not preemptible too, whatever their cooldown or minRuntime). Each goes back to its queue
        (a preemption is not a retry) and waits there until the queue is resumed."""
        for queue, stop in self.state.stops.in_force.items():
            if stop.stop_policy != "HoldAndDrain":
                continue
            for op_id in sorted(self.usage.active.get(queue, ())):
                op = self.fold.ops[op_id]
                if op.preempted_by is None:
                    self._emit(_drained(op, stop, self.now))

    def _agents_lost(self) -> None:
        """Active ops of an agent silent past its lostAfterSeconds: their attempt failed (``AgentLost``, an
        infrastructure failure: the retry rules queue them again, for an agent that answers). Pods it still runs
        are released by its dispatcher when it returns (their attempt is over)."""
        deadline = agents.next_deadline(self.book, self.fold.heartbeats, self.now)
        if deadline is not None and deadline not in self.queues.timers:
            self.queues.timers.append(deadline)  # a cycle then, heartbeat or not
        lost = agents.silent(self.book, self.fold.heartbeats, self.now, lost=True)
        if not lost:
            return
        for op in [o for o in self.usage.active_ops() if o.agent in lost]:  # the active ones only, never all
            event = OperationFailed(op_id=op.op_id, at=self.now, attempt=op.attempt, pod_name=op.pod_name,
                                    reason=Failure.AGENT_LOST, message=f"agent {op.agent} silent since "
                                    f"{lost[op.agent]:%H:%M:%S}: its dispatcher stopped sending heartbeats")
            self.state.apply(event)
            self.decisions.append(event)

    def _admit_borrowers(self, borrowers: list[OpRecord]) -> None:
        """Queue order, then op order; with fair sharing, always the queue with the lowest share now."""
        rank = {name: i for i, name in enumerate(self.book.order)}
        height = {o.op_id: self._borrow_height(o) for o in borrowers} if self.book.tree.nested else {}
        pending = sorted(borrowers, key=lambda o: (height.get(o.op_id, 1), rank[o.queue], o.key))
        while pending:
            if self.book.config.fair_sharing.enabled:
                shares = {q: share_of(self.book, self.snap, self.usage, q) for q in {o.queue for o in pending}}
                op = min(pending, key=lambda o: (shares[o.queue], o.queue, o.key))
            else:
                op = pending[0]
            pending.remove(op)
            verdict = evaluate(op, self.snap, allow_borrow=True)
            if not self._decide(op, verdict):
                self._keep_waiting(op, verdict)

    def _borrow_height(self, op: OpRecord) -> int:
        """Nested cohorts: a borrower whose request fits a lower subtree goes first (``quota.lowest_fitting_height``),
        measured on the flavors it would be admitted with now."""
        verdict = evaluate(op, self.snap, allow_borrow=True)
        need = {(r, f): op.request.get(r, 0.0) for r, f in verdict.flavors.items()}
        return lowest_fitting_height(self.book, self.snap.usage, op.queue, need) if need else 1

    def priority(self, op: OpRecord) -> float:
        q = self.book.queues.get(op.queue)
        if q is None:
            return float(op.priority)
        return aging.effective(op.priority, op.since, self.now, q.aging.per_minute, q.aging.cap)

    def _cleared(self) -> None:
        """Ops whose gates just cleared: held for approval (an event) or queued (no event needed)."""
        while self.queues.cleared:
            op = self.fold.ops[self.queues.cleared.pop(0)]
            if op.status != Status.PENDING:
                continue
            hold = approval.hold_reason(op, self.book)
            if hold is None:
                self.fold.enqueue_cleared(op, self.now)
            else:
                self._emit(OperationOnHold(op_id=op.op_id, at=self.now, attempt=op.attempt,
                                           reason=hold[0], message=hold[1]))

    def _failures(self) -> None:
        """Each failed attempt the fold decided on gets its decision on the wire, once: ``retry_scheduled`` (with its
        back-off) or ``failure_final`` (the op's end). One whose decision is on the stream already (replayed) has
        moved on, or is marked decided: skipped."""
        while self.queues.failures:
            op = self.fold.ops[self.queues.failures.pop(0)]
            if op.status == Status.RETRYING:
                infra = is_infrastructure(op.reason)
                delay = retry_delay(self.book.config.retry_backoff, op.retries_used, infra)
                self._emit(RetryScheduled(op_id=op.op_id, at=self.now, attempt=op.attempt, retry_after_s=delay,
                                          reason=op.reason, retries_used=op.retries_used))
            elif op.failure_undecided:
                max_retries = op.spec.termination.max_retries
                self._emit(FailureFinal(op_id=op.op_id, at=self.now, attempt=op.attempt, reason=op.reason,
                                        message=why_final(op.reason, max_retries, op.retries_used),
                                        retries_used=op.retries_used, max_retries=max_retries))

    def _end_handler_failures(self) -> None:
        """Ops a service gave up on (``handler_failed``), or an event of which admission could not fold
        (``fold_failed``: failed if it had started), end with the reason, before anything else may admit
        them; one whose end could not be published is published again (already assumed), once stored never."""
        while self.queues.ending:
            op = self.fold.ops.get(self.queues.ending.pop(0))
            if op is None or not op.handler_failure or (op.status.terminal and not _end_unpublished(op)):
                continue
            failed = op.status == Status.FAILED or (not op.status.terminal and op.end_reason and op.status.active)
            kind = OperationFailed if failed else OperationRejected
            event = kind(op_id=op.op_id, at=self.now, attempt=op.attempt, reason=op.end_reason or Reason.HANDLER_FAILED,
                         message=op.handler_failure)
            if not op.status.terminal:
                self.state.apply(event)
            self.decisions.append(event)

    def _emit(self, event: Event) -> None:
        self.state.apply(event)
        self.decisions.append(event)

    def _nominated(self) -> None:
        nominated = self.fold.nominated
        for op_id in sorted(nominated, key=lambda i: self.fold.ops[i].key):
            op, victims = self.fold.ops[op_id], nominated[op_id]
            if op.status != Status.QUEUED:
                self.fold.drop_nomination(op_id)
            elif victims:
                op.blocked = [preemption.waiting_for(victims)]
            else:
                self.fold.release_ghosts(op_id)  # the room held for it is its to take now
                if not self._decide(op, evaluate(op, self.snap, allow_borrow=True)):
                    self.fold.drop_nomination(op_id)  # still no room: back to the normal order

    def _walk_queue(self, queue: str, borrowers: list[OpRecord]) -> None:
        kept: list[tuple[OpRecord, Verdict]] = []
        set_aside = decided = 0
        while len(kept) + set_aside < LOOKAHEAD:
            op = self.queues.pop_next(queue, self.now)
            if op is None:
                break
            if op.op_id in self.fold.nominated:
                kept.append((op, Verdict(WAIT, op.blocked)))
                continue
            verdict = evaluate(op, self.snap, allow_borrow=False)
            if self._decide(op, verdict):
                decided += 1
                continue
            if verdict.outcome == BORROW:
                borrowers.append(op)
                set_aside += 1
                continue
            decided += self._maybe_preempt(op, verdict)
            kept.append((op, verdict))
            if verdict.queue_blocked:
                break
        starved = any(r.code == Reason.QUOTA_LENT_OUT for _, verdict in kept for r in verdict.reasons)
        if starved:
            self.snap.starved.add(queue)  # its cohort lends nothing more until this op runs
        self.queues.set_starved(queue, starved)
        for op, verdict in kept:
            self._keep_waiting(op, verdict)
        if not decided and not set_aside:
            parking.park(self.state, self.book, queue, kept, self.now)

    def _maybe_preempt(self, op: OpRecord, verdict: Verdict) -> bool:
        """Plan a preemption for ``op`` when its reasons allow; True when victims were asked to go."""
        if self.plans_left <= 0 or not preemption.worth_trying([r.code for r in verdict.reasons]):
            return False
        priority = float(op.priority)  # base priority: aging orders the queue, it never preempts
        candidates = preemption.candidates(op, priority, self.usage, self.snap, self.now)
        if not candidates:
            return False  # nothing to simulate: not counted against the cycle's plans
        self.plans_left -= 1
        victims = preemption.plan(op, self.snap, candidates)
        if not victims:
            return False
        for victim in victims:
            event = _preempt(victim, op, priority, self.now)
            self.state.apply(event)
            self.decisions.append(event)
        verdict.reasons = [preemption.waiting_for(v.op.op_id for v in victims)]
        return True

    def _decide(self, op: OpRecord, verdict: Verdict) -> bool:
        """Admit or reject ``op`` if the verdict says so; True when a decision was made."""
        event = self._decision(op, verdict)
        if event is None:
            return False
        self.state.apply(event)  # assume: the slot is taken before the publish
        self.decisions.append(event)
        return True

    def _decision(self, op: OpRecord, verdict: Verdict) -> Event | None:
        if verdict.outcome == UNFITTABLE and self.book.config.reject_unfittable:
            return OperationRejected(op_id=op.op_id, at=self.now, attempt=op.attempt, reason=Reason.UNFITTABLE,
                                     message="; ".join(dict.fromkeys(r.message for r in verdict.reasons)))
        if verdict.outcome not in (ADMIT, BORROW) or (verdict.outcome == BORROW and not verdict.flavors):
            return None  # waiting, or the "fits only by borrowing" marker of the first pass
        try:  # checked at submit and resume, so it renders; were it not to, no pod runs braces
            written = self.sealer.unseal(op.spec)
            spec = rendered(op.op_id, written, op.queue, self.book.config, namespace=self.namespace,
                            created_at=op.submitted_at, requested_by=op.requested_by, compiled_at=self.now,
                            cloning_kind=op.history.relation, original_uuid=op.history.original_op_id)
            spec = op.spec if spec is written else self.sealer.seal(spec)
        except Unsealable as exc:
            return OperationRejected(op_id=op.op_id, at=self.now, attempt=op.attempt, reason=UNSEALABLE_ENV,
                                     message=f"cannot render the op's env: {exc}")
        except TemplateError as exc:
            return OperationRejected(op_id=op.op_id, at=self.now, attempt=op.attempt, reason=INVALID_TEMPLATE,
                                     message=f"cannot render the op's templates: {exc}")
        pods, unusable = connections.admitted_fields(spec, self.book.config, op.queue)
        if unusable:  # checked at submit; the configuration changed since
            return OperationRejected(op_id=op.op_id, at=self.now, attempt=op.attempt, reason=UNKNOWN_CONNECTION,
                                     message="; ".join(unusable))
        op.flavors, op.assumed_nodes = dict(verdict.flavors), verdict.nodes  # counted when applied
        queue = self.book.queues[op.queue]
        allowed = run_policy(self.book.config, op.queue, self.namespace)  # what the dispatcher checks it against
        assert allowed is not None  # the op's queue is in the book
        namespace, policy = allowed
        return OperationAdmitted(
            op_id=op.op_id, at=self.now, attempt=op.attempt, spec=spec, queue=op.queue,
            namespace=namespace, pod_name=pod_name(op.op_id, op.attempt),
            flavors=verdict.flavors, node_selector=verdict.node_selector, tolerations=verdict.tolerations,
            borrowing=verdict.outcome == BORROW, effective_priority=self.priority(op),
            pending_timeout_s=queue.pending_timeout_seconds, **carried(policy), preferred_hosts=verdict.hosts,
            agent=verdict.agent, estimate=verdict.estimate, pool=verdict.pool, provisioning=verdict.provisioning,
            provisioning_timeout_s=verdict.provisioning_timeout_s,
            provisioning_expected_s=verdict.provisioning_expected_s, **pods)

    def _keep_waiting(self, op: OpRecord, verdict: Verdict) -> None:
        op.blocked = verdict.reasons
        if any(r.code == Reason.POOL_BUDGET for r in verdict.reasons):
            for spent in self.state.fold.pool_budgets.blocked.values():
                if spent.resets_at > self.now and spent.resets_at not in self.queues.timers:
                    self.queues.timers.append(spent.resets_at)  # a cycle when the pool may add nodes again
        if any(r.code == budgets.CODE for r in verdict.reasons):
            reset = budgets.next_reset(self.book.config.budgets, op.queue, op.spec.project, self.now)
            if reset is not None and reset not in self.queues.timers:
                self.queues.timers.append(reset)  # a cycle when the window starts again
        self.queues.requeue(op, self.now)

    def _finish_cache_hits(self) -> None:
        while self.queues.cache_hits:
            op = self.fold.ops[self.queues.cache_hits.pop()]
            if op.status == Status.PENDING:
                outputs = dict(op.cache_outputs)  # the original's, as its cache_hit carried them
                event = OperationSucceeded(op_id=op.op_id, at=self.now, attempt=op.attempt, reason=CACHE_HIT_REASON,
                                           outputs=outputs)
                self.state.apply(event)
                self.decisions.append(event)


def _end_unpublished(op: OpRecord) -> bool:
    """The op's end (rejected or failed) is assumed, and not yet seen on the stream."""
    return op.status in (Status.REJECTED, Status.FAILED) and op.status.name.lower() not in op.history.kinds


def _preempt(victim: preemption.Victim, op: OpRecord, priority: float, now: datetime) -> PreemptRequested:
    v = victim.op
    why = "reclaims quota lent to" if victim.reason == Preemption.RECLAIM else "outranks"
    return _preempt_request(v, now, op.op_id, victim.reason,
                            f"{op.op_id} (queue {op.queue}, priority {priority:g}) {why} {v.op_id} "
                            f"(queue {v.queue}, priority {v.admitted_priority:g}){victim.paths}")


def _drained(v: OpRecord, stop: QueueStopSet, now: datetime) -> PreemptRequested:
    comment = f": {stop.comment}" if stop.comment else ""
    return _preempt_request(v, now, "", Preemption.QUEUE_DRAINED,
                            f"queue {v.queue} drained by {stop.by or '?'} at {stop.at:%Y-%m-%d %H:%M:%S}{comment}")


def _preempt_request(v: OpRecord, now: datetime, preemptor: str, reason: str, message: str) -> PreemptRequested:
    """The request to preempt ``v``'s current attempt (its pods, where they are), by ``preemptor`` ("": no op)."""
    return PreemptRequested(op_id=v.op_id, at=now, attempt=v.attempt, pod_names=pod_names(v.op_id, v.attempt, v.spec),
                            namespace=v.namespace or "", preemptor=preemptor, reason=reason, agent=v.agent,
                            message=message)


def decide(state: AdmissionState, book: Book, now: datetime, default_namespace: str,
           sealer: Sealer | None = None) -> list[Event]:
    return Cycle(state, book, now, default_namespace, sealer).run()
