"""The one order inside a queue: higher (effective) priority first; then, in a queue that shares fairly
(``ordering: fair-by-user``, the default), the op's *fair rank*; then the earlier time it (re-)entered
its queue; then its op id. A ``fifo`` queue ranks every op 0: priority, then time, then id.

The fair rank interleaves requesters round-robin (the requester of an op is its ``requested_by``; an op
without one counts as the requester ``anonymous``). It is given once, when the op enters its queue (it is
submitted, or waits again for another attempt), by ``FairRanks.entered``: one more than the requester's
youngest op still waiting in that queue, and never below the queue's *round* (the lowest rank any op
waiting there holds). So a requester's own ops keep their order (0, 1, 2, ...), and one who arrives while
another's burst of 1,000 waits gets the round's rank: its first op goes right after the burst's first,
not after all 1,000. A rank never changes while its op waits (a heap keeps the order in O(log n) per op),
and ``FairRanks`` is kept by the fold's transitions (``entered``/``left``), so a restarted admission
that folds the stream again gives the same ranks. The same counts bound the ops a requester may have
waiting in a queue (``maxPendingPerUser``: ``FairRanks.waiting``).

Why a rank fixed at entry and not "its place among its requester's waiting ops" recomputed as ops leave:
with that, each time the burst's head is admitted its next op becomes rank 0 again and, submitted earlier,
goes before the other requester's rank-0 op, so a queue that admits one op at a time would still serve the
whole burst first; and it would re-rank up to n ops per admission.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime

ANONYMOUS = "anonymous"  # the requester of an op (or a command) that names none

FAIR, FIFO = "fair-by-user", "fifo"  # a queue's ``ordering`` (``proto.queues.Queue``)


def sort_key(priority: float, rank: int, since: datetime | float, op_id: str) -> tuple:
    """The order: a smaller key goes first. ``rank`` is the fair rank (0 in a ``fifo`` queue)."""
    return (-priority, rank, since, op_id)


def requester_of(requested_by: str | None) -> str:
    return requested_by or ANONYMOUS


@dataclass
class _Backlog:
    """One requester's ops waiting in one queue."""

    waiting: int = 0
    last_rank: int = -1  # the rank of its youngest waiting op


@dataclass
class _QueueRanks:
    backlogs: dict[str, _Backlog] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)  # waiting op -> its rank
    _low: list[tuple[int, str]] = field(default_factory=list)  # (rank, op id), lazily deleted: the round

    def round(self) -> int:
        while self._low and self.ranks.get(self._low[0][1]) != self._low[0][0]:
            heapq.heappop(self._low)
        return self._low[0][0] if self._low else 0

    def rank(self, op_id: str, rank: int) -> None:
        """``op_id`` waits with ``rank``."""
        self.ranks[op_id] = rank
        heapq.heappush(self._low, (rank, op_id))

    def unrank(self, op_id: str) -> bool:
        """``op_id`` no longer waits (False: it did not); the heap drops stale entries past a bound."""
        if self.ranks.pop(op_id, None) is None:
            return False
        if len(self._low) > 2 * len(self.ranks) + 64:  # stale entries of ops that left: bounded memory
            self._low = [(rank, i) for i, rank in self.ranks.items()]
            heapq.heapify(self._low)
        return True


class FairRanks:
    """Per queue and requester: how many of its ops wait there, and the rank its next op gets."""

    def __init__(self) -> None:
        self.queues: dict[str, _QueueRanks] = {}

    def entered(self, queue: str, requester: str, op_id: str, keep: int | None = None) -> int:
        """``op_id`` waits in ``queue`` from now: its fair rank (the same op entering twice keeps its rank;
        ``keep``: the rank it had, for an op put back where it was when a decision about it is forgotten)."""
        q = self.queues.setdefault(queue, _QueueRanks())
        if op_id in q.ranks:
            return q.ranks[op_id]
        backlog = q.backlogs.setdefault(requester, _Backlog())
        rank = max(q.round(), backlog.last_rank + 1) if keep is None else keep
        backlog.waiting += 1
        backlog.last_rank = max(backlog.last_rank, rank)
        q.rank(op_id, rank)
        return rank

    def left(self, queue: str, requester: str, op_id: str) -> None:
        """``op_id`` no longer waits in ``queue`` (admitted, or ended before it ran)."""
        q = self.queues.get(queue)
        if q is None or not q.unrank(op_id):
            return
        backlog = q.backlogs[requester]
        backlog.waiting -= 1
        if backlog.waiting <= 0:
            del q.backlogs[requester]  # its next op starts at the round
        if not q.ranks:
            del self.queues[queue]

    def waiting(self, queue: str, requester: str) -> int:
        q = self.queues.get(queue)
        backlog = q.backlogs.get(requester) if q is not None else None
        return backlog.waiting if backlog is not None else 0
