"""The waiting ops of one queue, in their order at the current time (``ordering.sort_key``: effective priority,
fair rank, time, id; aging: ``policies.aging.effective``).

The order is kept in O(log n) per operation with two heaps per queue: ops still aging are ordered by
``priority - rate * submitted_at`` (their relative order never changes while both age at the same rate), ops that
reached the cap by ``priority + cap``; an op moves from the first to the second once, when its cap time passes.
Popping compares the two heads at the current time. An op's fair rank (``ordering.FairRanks``) is fixed while it
waits, so it is part of its heap entry; a ``fifo`` queue files every op with rank 0.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from datetime import datetime

from opsched.services.admission.model.ordering import sort_key


@dataclass
class _Entry:
    priority: int
    submitted: float  # epoch seconds
    gen: int
    where: str  # "aging" or "fixed"
    rank: int = 0  # its fair rank (``ordering``); counted only when the queue is fair


@dataclass
class PendingQueue:
    """The waiting ops of one queue in ``ordering.sort_key`` order at the current time."""

    per_minute: float = 0.0
    cap: float = 0.0
    fair: bool = True  # ``ordering: fair-by-user``: the fair rank counts; ``fifo``: every op ranks 0
    _aging: list = field(default_factory=list)  # sort_key(p - r*s, rank, s, op_id) + (gen,)
    _fixed: list = field(default_factory=list)  # sort_key(p + cap or p, rank, s, op_id) + (gen,)
    _caps: list = field(default_factory=list)  # (cap time, op_id, gen)
    _entries: dict[str, _Entry] = field(default_factory=dict)
    _gen: int = 0

    @property
    def rate(self) -> float:  # per second
        return self.per_minute / 60.0

    def __len__(self) -> int:
        return len(self._entries)

    def ids(self) -> list[str]:
        return sorted(self._entries)

    def push(self, op_id: str, priority: int, submitted_at: datetime, now: datetime | None = None,
             rank: int = 0) -> None:
        """File an op (``submitted_at``: when it entered the queue; ``rank``: its fair rank); the cap
        migration happens when popping, so ``now`` is only a shortcut."""
        self._gen += 1
        s = submitted_at.timestamp()
        not_capped = now is None or s + self.cap / max(self.rate, 1e-12) > now.timestamp()
        aging = self.rate > 0 and self.cap > 0 and not_capped
        entry = _Entry(priority, s, self._gen, "aging" if aging else "fixed", rank)
        self._entries[op_id] = entry
        order = rank if self.fair else 0
        if aging:
            heapq.heappush(self._aging, sort_key(priority - self.rate * s, order, s, op_id) + (entry.gen,))
            heapq.heappush(self._caps, (s + self.cap / self.rate, op_id, entry.gen))
        else:
            fixed = priority + (self.cap if self.rate > 0 else 0.0)
            heapq.heappush(self._fixed, sort_key(fixed, order, s, op_id) + (entry.gen,))

    def key(self, op_id: str, now: datetime) -> tuple | None:
        """The op's ``sort_key`` at ``now`` (None: not filed here): what ``why`` ranks positions by."""
        e = self._entries.get(op_id)
        if e is None:
            return None
        gained = max(0.0, min(self.cap, self.rate * (now.timestamp() - e.submitted))) if self.rate > 0 else 0.0
        return sort_key(e.priority + gained, e.rank if self.fair else 0, e.submitted, op_id)

    def discard(self, op_id: str) -> None:
        self._entries.pop(op_id, None)

    def pop(self, now: datetime) -> str | None:
        self._migrate(now.timestamp())
        a, f = self._head(self._aging, "aging"), self._head(self._fixed, "fixed")
        if a is None and f is None:
            return None
        t = now.timestamp()
        pick = self._aging if f is None or (a is not None and self._before(a, f, t)) else self._fixed
        op_id = heapq.heappop(pick)[3]
        self._entries.pop(op_id, None)
        return op_id

    def reconfigure(self, per_minute: float, cap: float | None, now: datetime, fair: bool | None = None) -> None:
        """New aging settings or ordering: re-file every waiting op (only on a configuration change)."""
        cap = math.inf if cap is None else cap
        fair = self.fair if fair is None else fair
        if (per_minute, cap, fair) == (self.per_minute, self.cap, self.fair):
            return
        entries = self._entries
        self.per_minute, self.cap, self.fair = per_minute, cap, fair
        self._aging, self._fixed, self._caps, self._entries = [], [], [], {}
        for op_id, e in entries.items():
            self.push(op_id, e.priority, datetime.fromtimestamp(e.submitted, now.tzinfo), now, e.rank)

    def _before(self, a: tuple, f: tuple, t: float) -> bool:
        return sort_key(-a[0] + self.rate * t, *a[1:4]) < f[:4]

    def _head(self, heap: list, where: str) -> tuple | None:
        while heap:
            op_id, gen = heap[0][3], heap[0][4]
            entry = self._entries.get(op_id)
            if entry is not None and entry.gen == gen and entry.where == where:
                return heap[0]
            heapq.heappop(heap)
        return None

    def _migrate(self, t: float) -> None:
        while self._caps and self._caps[0][0] <= t:
            _, op_id, gen = heapq.heappop(self._caps)
            entry = self._entries.get(op_id)
            if entry is None or entry.gen != gen or entry.where != "aging":
                continue
            entry.where = "fixed"
            order = entry.rank if self.fair else 0
            heapq.heappush(self._fixed, sort_key(entry.priority + self.cap, order, entry.submitted, op_id) + (gen,))
