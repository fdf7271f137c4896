"""The submit rate of one requester: a token bucket per requester (``OPSCHED_SUBMIT_RATE_PER_MIN`` ops a
minute, in bursts of up to ``OPSCHED_SUBMIT_BURST``; a rate of 0 turns it off).

A submit, restart or copy (each creates an op) beyond it is refused: its op ends ``rejected`` with the
reason ``rate_limited``, naming the requester, the rate and when to retry, and the command is
dead-lettered with an error event, as any refused input; nothing is dropped. A refused submit takes no
token here; every command, refused and malformed ones too, takes one of the wider, leader-local command rate
(``command_rate``: why it is a second bucket). The requester is named by one function, ``requester``.

The buckets are a fold of the ``submitted`` events (``requested_by``, ``at``): every replica folds them,
so a new leader or a restarted admission has them from the op stream. The leader charges an op as it
decides its submit (``take``, on the service's clock: deterministic), and the fold of that op's
``submitted`` does not charge it again. Requesters whose bucket is full again are forgotten when more than
``MAX_TRACKED`` are held."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta

from proto import access
from proto.commands import Command
from proto.events import OperationSubmitted
from proto.reasons import Refusal

RATE_LIMITED = Refusal.RATE_LIMITED
ANONYMOUS = "anonymous"  # a command that names no requester
MAX_TRACKED = 10_000  # requesters held before the full buckets are forgotten; also ops charged, not yet folded


def requester(cmd: Command, subject: str) -> str:
    """Who sent ``cmd`` (on ``subject``): the user of its subject (``proto.access.requester``)."""
    return access.requester(subject, cmd.requested_by) or ANONYMOUS


def submitter_of(event: OperationSubmitted) -> str:
    """The requester a ``submitted`` event was charged to (as ``requester`` named it)."""
    return event.requested_by or ANONYMOUS


@dataclass
class Bucket:
    tokens: float
    at: datetime  # when ``tokens`` was counted


class SubmitRate:
    def __init__(self, per_min: float, burst: int) -> None:
        self.per_min, self.burst = per_min, burst
        self.buckets: dict[str, Bucket] = {}
        self.charged: OrderedDict[str, None] = OrderedDict()  # ops charged by ``take``, their submitted not folded

    @property
    def on(self) -> bool:
        return self.per_min > 0

    def take(self, who: str, op_id: str, now: datetime) -> float | None:
        """Charge ``who`` one submit at ``now`` for ``op_id``: None if allowed, else the seconds until one is."""
        if not self.on:
            return None
        bucket = self._refilled(who, now)
        if bucket.tokens < 1:
            return (1 - bucket.tokens) * 60.0 / self.per_min
        bucket.tokens -= 1
        self.charged[op_id] = None
        while len(self.charged) > MAX_TRACKED:
            self.charged.popitem(last=False)
        return None

    def observe(self, event: OperationSubmitted) -> None:
        """The fold: an op submitted (charged once: not again if ``take`` charged it here)."""
        if not self.on:
            return
        if event.op_id in self.charged:
            del self.charged[event.op_id]
            return
        bucket = self._refilled(submitter_of(event), event.at)
        bucket.tokens = max(0.0, bucket.tokens - 1)

    def refusal(self, who: str, wait_s: float, now: datetime) -> str:
        retry_at = (now + timedelta(seconds=wait_s)).isoformat()
        return (f"requester {who!r} is over the submit rate of {self.per_min:g} ops a minute (bursts of up to "
                f"{self.burst}; OPSCHED_SUBMIT_RATE_PER_MIN, OPSCHED_SUBMIT_BURST): retry in {wait_s:.1f} s "
                f"(at {retry_at})")

    def _refilled(self, who: str, now: datetime) -> Bucket:
        bucket = self.buckets.get(who)
        if bucket is None:
            if len(self.buckets) >= MAX_TRACKED:
                self._forget_full(now)
            bucket = self.buckets[who] = Bucket(float(self.burst), now)
            return bucket
        elapsed = max(0.0, (now - bucket.at).total_seconds())  # an event of an earlier clock adds nothing
        bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.per_min / 60.0)
        bucket.at = max(bucket.at, now)
        return bucket

    def _forget_full(self, now: datetime) -> None:
        full_after_s = self.burst * 60.0 / self.per_min
        for who in [w for w, b in self.buckets.items() if (now - b.at).total_seconds() >= full_after_s]:
            del self.buckets[who]
