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
from datetime import datetime, timedelta

from opsched.proto import access
from opsched.proto.commands import Command
from opsched.proto.events import OperationSubmitted
from opsched.proto.reasons import Refusal
from opsched.services.admission.model.ordering import ANONYMOUS  # a command that names no requester
from opsched.services.runtime.token_buckets import MAX_TRACKED, TokenBuckets

RATE_LIMITED = Refusal.RATE_LIMITED


def requester(cmd: Command, subject: str) -> str:
    """Who sent ``cmd`` (on ``subject``): the user of its subject (``proto.access.requester``)."""
    return access.requester(subject, cmd.requested_by) or ANONYMOUS


def submitter_of(event: OperationSubmitted) -> str:
    """The requester a ``submitted`` event was charged to (as ``requester`` named it)."""
    return event.requested_by or ANONYMOUS


class SubmitRate:
    def __init__(self, per_min: float, burst: int) -> None:
        self.per_min, self.burst = per_min, burst
        self.buckets = TokenBuckets(per_min, burst)
        self.charged: OrderedDict[str, None] = OrderedDict()  # ops charged by ``take``, their submitted not folded

    @property
    def on(self) -> bool:
        return self.per_min > 0

    def take(self, who: str, op_id: str, now: datetime) -> float | None:
        """Charge ``who`` one submit at ``now`` for ``op_id``: None if allowed, else the seconds until one is."""
        if not self.on:
            return None
        bucket = self.buckets.refilled(who, now)
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
        bucket = self.buckets.refilled(submitter_of(event), event.at)
        bucket.tokens = max(0.0, bucket.tokens - 1)

    def refusal(self, who: str, wait_s: float, now: datetime) -> str:
        retry_at = (now + timedelta(seconds=wait_s)).isoformat()
        return (f"requester {who!r} is over the submit rate of {self.per_min:g} ops a minute (bursts of up to "
                f"{self.burst}; OPSCHED_SUBMIT_RATE_PER_MIN, OPSCHED_SUBMIT_BURST): retry in {wait_s:.1f} s "
                f"(at {retry_at})")
