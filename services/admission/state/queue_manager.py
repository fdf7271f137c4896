"""The queue manager: each queue's pending order (aged heaps, lazily deleted) and waiting count, the
parking of blocked queues with the generations they wait on (``parking``), and the cycle's work lists
(gates just cleared, retries to schedule, cache hits to finish, timers). It follows the fold's
transitions (``transitions``); nothing else changes it but the cycle, through its methods."""
from __future__ import annotations

import math
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from opsched.proto.lifecycle import Status
from opsched.proto.queues import Queue
from opsched.services.admission.model.ordering import FIFO, FairRanks, requester_of
from opsched.services.admission.model.pending_queue import PendingQueue
from opsched.services.admission.model.records import Ghost, OpRecord, Park
from opsched.services.admission.state.transitions import Transitions
from opsched.services.admission.state.worklist import WorkList

EPOCH = datetime.fromtimestamp(0, timezone.utc)
MAX_ACCEPTED = 10_000  # submits accepted and not yet folded, held for the per-user cap (a bound, never reached)
ACCEPTED_FOR = timedelta(seconds=60)  # ... at most this long: a submitted whose publish failed for good is let go


@dataclass
class QueueState:
    pending: PendingQueue = field(default_factory=PendingQueue)  # QUEUED ops, lazily deleted
    waiting: int = 0  # submitted, not yet admitted nor ended (for maxQueued)


class QueueManager(Transitions):
    def __init__(self, ops: dict[str, OpRecord]) -> None:
        self.ops = ops  # the fold's records (read only: to skip entries no longer queued)
        self.queues: dict[str, QueueState] = {}
        self.aging: dict[str, tuple[float, float | None]] = {}  # queue -> (per minute, cap), from the config
        self.fifo: set[str] = set()  # queues whose ordering is ``fifo`` (the others share fairly by requester)
        self.ranks = FairRanks()  # per queue and requester: its waiting ops and their fair ranks
        # submits the leader accepted whose ``submitted`` is not folded yet: op id -> (queue, requester, when)
        self.accepted: OrderedDict[str, tuple[str, str, datetime]] = OrderedDict()
        self.accepted_counts: Counter[tuple[str, str]] = Counter()
        # parking (see services.admission.parking)
        self.gens: dict[str, int] = {}  # what parked queues wait on -> how often it changed
        self.parked: dict[str, Park] = {}  # queues a cycle may skip until a generation they wait on moves
        self.scopes: dict[str, str] = {}  # queue -> its cohort (from the configuration in force)
        self.starved: set[str] = set()  # queues whose ops wait for quota they lent out (cohort stops lending)
        self.scoped_book: object | None = None  # the compiled configuration the scopes come from
        # the cycle's work lists
        self.cleared = WorkList()  # gates just cleared: the cycle queues or holds them
        self.failures = WorkList()  # a failed attempt decided on: the cycle publishes the decision
        self.cache_hits = WorkList()  # ops to finish from the cache
        self.ending = WorkList()  # a service gave up on a message they waited on: the cycle ends them
        self.timers: list[datetime] = []  # back-offs ending: a cycle must run then, event or not

    # ---- queues ----
    def queue(self, name: str) -> QueueState:
        q = self.queues.get(name)
        if q is None:
            q = self.queues[name] = QueueState()
            per_minute, cap = self.aging.get(name, (0.0, 0.0))
            q.pending.per_minute, q.pending.cap = per_minute, math.inf if cap is None else cap
            q.pending.fair = name not in self.fifo
        return q

    def waiting(self, name: str) -> int:
        return self.queue(name).waiting

    def pending_of(self, queue: str, requester: str, now: datetime | None = None) -> int:
        """The ops ``requester`` has waiting in ``queue`` (the fold's count) and submitted there a moment ago
        (accepted, not folded yet, for at most ``ACCEPTED_FOR``): what ``maxPendingPerUser`` bounds."""
        if now is not None:
            while self.accepted and next(iter(self.accepted.values()))[2] <= now - ACCEPTED_FOR:
                self._unaccept(next(iter(self.accepted)))
        return self.ranks.waiting(queue, requester) + self.accepted_counts[(queue, requester)]

    def accept(self, op_id: str, queue: str, requester: str, now: datetime) -> None:
        """The leader accepted a submit (its ``submitted`` is published): counted until the fold sees it."""
        if op_id in self.accepted or op_id in self.ops:
            return
        self.accepted[op_id] = (queue, requester, now)
        self.accepted_counts[(queue, requester)] += 1
        while len(self.accepted) > MAX_ACCEPTED:
            self._unaccept(next(iter(self.accepted)))

    def _unaccept(self, op_id: str) -> None:
        accepted = self.accepted.pop(op_id, None)
        if accepted is not None:
            key = accepted[:2]
            self.accepted_counts[key] -= 1
            if self.accepted_counts[key] <= 0:
                del self.accepted_counts[key]

    def configure_queues(self, queues: Iterable[Queue], now: datetime) -> None:
        """A new queue configuration: each queue's aging and ordering (its waiting ops re-filed if they changed)."""
        queues = list(queues)
        self.configure_aging({q.name: (q.aging.per_minute, q.aging.cap) for q in queues}, now,
                             {q.name for q in queues if q.ordering == FIFO})

    def configure_aging(self, aging: dict[str, tuple[float, float | None]], now: datetime,
                        fifo: set[str] | None = None) -> None:
        self.aging = dict(aging)
        self.fifo = set(self.fifo if fifo is None else fifo)
        for name, q in self.queues.items():
            q.pending.reconfigure(*self.aging.get(name, (0.0, 0.0)), now, fair=name not in self.fifo)

    def requeue(self, op: OpRecord, now: datetime | None = None) -> None:
        """Put back an op popped by a cycle that could not admit it."""
        self.queue(op.queue).pending.push(op.op_id, op.priority, op.since, now, op.fair_rank)

    def position(self, op: OpRecord, queued: list[OpRecord], now: datetime) -> int:
        """1-based position of queued ``op`` among ``queued`` (its queue's queued ops) in the queue's order."""
        pending = self.queue(op.queue).pending
        mine = pending.key(op.op_id, now)
        if mine is None:  # not filed (never so between cycles): last
            return len(queued)
        keys = (pending.key(o.op_id, now) for o in queued if o.op_id != op.op_id)
        return 1 + sum(1 for k in keys if k is not None and k < mine)

    def pop_next(self, queue: str, now: datetime | None = None) -> OpRecord | None:
        """The head of a queue's order (skipping entries that are no longer queued)."""
        pending = self.queue(queue).pending
        now = now or EPOCH
        while (op_id := pending.pop(now)) is not None:
            op = self.ops.get(op_id)
            if op is not None and op.status == Status.QUEUED:
                return op
        return None

    # ---- parking generations ----
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

    # ---- the fold's transitions ----
    def entered(self, op: OpRecord, restored: bool = False) -> None:
        self.queue(op.queue).waiting += 1
        self._unaccept(op.op_id)
        op.fair_rank = self.ranks.entered(op.queue, requester_of(op.requested_by), op.op_id,
                                          op.fair_rank if restored else None)

    def queued(self, op: OpRecord, now: datetime | None) -> None:
        self.queue(op.queue).pending.push(op.op_id, op.priority, op.since, now, op.fair_rank)
        self.parked.pop(op.queue, None)  # something new to look at

    def left(self, op: OpRecord, admitted: bool) -> None:
        self.queue(op.queue).waiting -= 1
        self.ranks.left(op.queue, requester_of(op.requested_by), op.op_id)
        if not admitted:
            self.parked.pop(op.queue, None)  # left its queue (stopped, rejected...): others move up

    def activated(self, op: OpRecord) -> None:
        self._usage_moved(op)

    def deactivated(self, op: OpRecord) -> None:
        self._usage_moved(op)
        self.bump("capacity")
        self.bump("budget")  # what it was expected to spend no longer counts as committed

    def _usage_moved(self, op: OpRecord) -> None:
        self.bump(self.scope_key(op.queue))
        if op.spec.batch:
            self.bump(f"batch:{op.spec.batch}")

    def located(self, op: OpRecord) -> None:
        self.bump("capacity")

    def held(self, ghost: Ghost, sign: int) -> None:
        if sign < 0:  # room held for a preemptor let go: others of the scope, and any op, may fit
            self.bump(self.scope_key(ghost.queue))
            self.bump("capacity")

    def nodes_changed(self) -> None:
        self.bump("capacity")
        self.parked.clear()  # a node can make any op fit, or never fit (rejected): look at every queue

    def spent(self) -> None:
        self.bump("budget")

    def gates_cleared(self, op: OpRecord) -> None:
        self.cleared.append(op.op_id)

    def cache_hit(self, op: OpRecord) -> None:
        self.cache_hits.append(op.op_id)

    def failure_decided(self, op: OpRecord) -> None:
        self.failures.append(op.op_id)

    def handler_failed(self, op: OpRecord) -> None:
        self.ending.append(op.op_id)

    def backing_off(self, op: OpRecord, until: datetime) -> None:
        self.timers.append(until)

    def forgotten(self, op: OpRecord) -> None:
        self.queue(op.queue).pending.discard(op.op_id)
        for work in (self.cleared, self.failures, self.cache_hits, self.ending):
            work.discard(op.op_id)
