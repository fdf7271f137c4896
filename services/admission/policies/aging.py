"""Aging against starvation: a waiting op's effective priority is
``priority + min(cap, per_minute * minutes waited)`` (base priority when aging is off).

The order this gives is kept in O(log n) per operation with two heaps per queue: ops still aging
are ordered by ``priority - rate * submitted_at`` (their relative order never changes while both
age at the same rate), ops that reached the cap by ``priority + cap``; an op moves from the first to
the second once, when its cap time passes. Popping compares the two heads at the current time.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from datetime import datetime


def effective(priority: int, submitted_at: datetime, now: datetime, per_minute: float,
              cap: float | None) -> float:
    cap = math.inf if cap is None else cap
    if per_minute <= 0:
        return float(priority)
    waited_min = max(0.0, (now - submitted_at).total_seconds() / 60.0)
    return priority + min(cap, per_minute * waited_min)


@dataclass
class _Entry:
    priority: int
    submitted: float  # epoch seconds
    gen: int
    where: str  # "aging" or "fixed"


@dataclass
class PendingQueue:
    """The waiting ops of one queue in effective-priority order (then submit time, then id)."""

    per_minute: float = 0.0
    cap: float = 0.0
    _aging: list = field(default_factory=list)  # (-(p - r*s), s, op_id, gen)
    _fixed: list = field(default_factory=list)  # (-(p + cap or p), s, op_id, gen)
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

    def push(self, op_id: str, priority: int, submitted_at: datetime, now: datetime | None = None) -> None:
        """File an op; the cap migration happens when popping, so ``now`` is only a shortcut."""
        self._gen += 1
        s = submitted_at.timestamp()
        not_capped = now is None or s + self.cap / max(self.rate, 1e-12) > now.timestamp()
        aging = self.rate > 0 and self.cap > 0 and not_capped
        entry = _Entry(priority, s, self._gen, "aging" if aging else "fixed")
        self._entries[op_id] = entry
        if aging:
            heapq.heappush(self._aging, (-(priority - self.rate * s), s, op_id, entry.gen))
            heapq.heappush(self._caps, (s + self.cap / self.rate, op_id, entry.gen))
        else:
            heapq.heappush(self._fixed, (-(priority + (self.cap if self.rate > 0 else 0.0)), s, op_id, entry.gen))

    def discard(self, op_id: str) -> None:
        self._entries.pop(op_id, None)

    def pop(self, now: datetime) -> str | None:
        self._migrate(now.timestamp())
        a, f = self._head(self._aging, "aging"), self._head(self._fixed, "fixed")
        if a is None and f is None:
            return None
        t = now.timestamp()
        pick = self._aging if f is None or (a is not None and self._before(a, f, t)) else self._fixed
        _, _, op_id, _ = heapq.heappop(pick)
        self._entries.pop(op_id, None)
        return op_id

    def reconfigure(self, per_minute: float, cap: float | None, now: datetime) -> None:
        """New aging settings: re-file every waiting op (only on a configuration change)."""
        cap = math.inf if cap is None else cap
        if (per_minute, cap) == (self.per_minute, self.cap):
            return
        entries = self._entries
        self.per_minute, self.cap = per_minute, cap
        self._aging, self._fixed, self._caps, self._entries = [], [], [], {}
        for op_id, e in entries.items():
            self.push(op_id, e.priority, datetime.fromtimestamp(e.submitted, now.tzinfo), now)

    def _before(self, a: tuple, f: tuple, t: float) -> bool:
        ea, ef = -a[0] + self.rate * t, -f[0]
        return (-ea, a[1], a[2]) < (-ef, f[1], f[2])

    def _head(self, heap: list, where: str) -> tuple | None:
        while heap:
            _, _, op_id, gen = heap[0]
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
            heapq.heappush(self._fixed, (-(entry.priority + self.cap), entry.submitted, op_id, gen))
