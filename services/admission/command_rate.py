"""The command rate of one requester: every command it sends on ``cmd.<user>.<verb>`` is charged to a token
bucket per requester (``OPSCHED_COMMAND_RATE_PER_MIN`` commands a minute, in bursts of up to
``OPSCHED_COMMAND_BURST``; a rate of 0 turns it off) — accepted, refused (for any reason) or malformed (it does
not decode, or its spec is out of bounds), every verb. A flood of garbage is no longer free.

Beyond it:

- a submit, restart or copy (each creates an op) is rejected ``rate_limited``, as over the submit rate: its op
  ends ``rejected`` with the reason (naming the requester, the rate, when to retry), nothing is lost;
- a refused command (an ``InvalidInput``: unknown op, not allowed, ``rate_limited`` itself, ...) or a malformed
  one is still acked and counted (``opsched_refusals_unrecorded_total``, by reason: never by requester, whose
  names are unbounded; the requester is logged, ``command_refusals_unrecorded``), but its dead letter and error
  event are bounded: the first of each ``DEAD_LETTER_WINDOW_S`` window per requester is dead-lettered, saying
  how many before it went unrecorded; the others are acked without either. A flood of one requester cannot
  fill the dead-letter stream (``OPSCHED_DLQ_MAX_BYTES`` drops the oldest) and push the others' out. What a
  refused or malformed command publishes besides (a malformed submit naming a valid op id ends that op
  ``rejected``) is published as ever: an op is never left without its end;
- any other valid command (a stop, approve, resume, schedule, ...) is handled as ever: a requester over its rate
  may still stop its ops.

Why a second, wider bucket, not the submit bucket (``submit_rate``): the submit bucket is a fold of the
``submitted`` events, so every replica holds it and a restart rebuilds it from the op stream exactly; its
decisions replay. A malformed command leaves no op event, nor do most refusals (an error event is not folded):
charging them there would make the submit bucket leader-local and a valid submit's fate depend on which replica
held the lead, and on restarts. Kept apart, the submit bucket stays exact; this one is wider (the defaults let a
requester within its submit rate send its stops and approvals beside) and is the only leader-local state.

Leader-local, on purpose: the buckets are charged by the leader as it takes each command off the stream (once
per stream sequence: a redelivery is not charged again), on the service's injected clock, and are never folded
from the op stream: a new leader, or a restart, starts every requester's bucket full. So a restart can only
forget charges, never invent them, and it cannot make admission decide differently on the op events: the fold
never reads these buckets; the one decision they make that is an op event (an op-creating command rejected
``rate_limited``) is published as that op's ``rejected`` and replayed as any rejection, never judged again; a
command within the rate is judged exactly as without this bucket. It never delays nor reorders a command: it only
refuses op creations and thins out the dead letters of refusals. Requesters whose bucket is full again are
forgotten when more than ``MAX_TRACKED`` are held."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from opsched.proto import access, subjects
from opsched.services.admission.submit_rate import ANONYMOUS
from opsched.services.runtime.token_buckets import TokenBuckets

DEAD_LETTER_WINDOW_S = 60.0  # over its rate, a requester's refusals get one dead letter per window at most
VERDICTS_KEPT = 1_000  # the latest commands' verdicts (by stream sequence): a redelivery reads its own again


def requester_of(subject: str, claimed: str = "") -> str:
    """Who sent a command on ``subject``: its user token; on an open server, the payload's name if it
    decoded (``proto.access.requester``), as for the submit rate; ``anonymous`` when nothing names one."""
    return access.requester(subject, claimed) or subjects.requester_of(subject) or ANONYMOUS


@dataclass
class Overflow:
    """A requester's refusals over its rate: the dead-letter window (since ``since``), those left unrecorded."""

    since: datetime
    unrecorded: int = 0  # refusals acked without a dead letter in this window
    total: int = 0  # ... and since the requester went over its rate (logs)


class CommandRate:
    def __init__(self, per_min: float, burst: int, window_s: float = DEAD_LETTER_WINDOW_S) -> None:
        self.per_min, self.burst, self.window_s = per_min, burst, window_s
        self.buckets = TokenBuckets(per_min, burst, on_forget=lambda who: self.overflows.pop(who, None))
        self.verdicts: OrderedDict[int, tuple[str, float | None]] = OrderedDict()  # seq -> who, wait_s (None: within)
        self.overflows: dict[str, Overflow] = {}
        self.answered: OrderedDict[int, str | None] = OrderedDict()  # seq -> what ``refused`` said (redeliveries)

    @property
    def on(self) -> bool:
        return self.per_min > 0

    def charge(self, who: str, seq: int, now: datetime, cost: int = 1) -> float | None:
        """Charge ``who`` the command at stream sequence ``seq`` (0: unknown, always charged) at ``now``: None
        if within its rate, else the seconds until a token. The same ``seq`` again is not charged twice. ``cost``:
        tokens it takes (a bulk command: one per op), at most a full burst (so any command can pass once full)."""
        if not self.on:
            return None
        if seq and seq in self.verdicts:
            return self.verdicts[seq][1]
        bucket = self.buckets.refilled(who, now)
        wait_s: float | None = None
        cost = max(1, min(cost, self.burst))
        if bucket.tokens < cost:
            wait_s = (cost - bucket.tokens) * 60.0 / self.per_min
        else:
            bucket.tokens -= cost
        if seq:
            self.verdicts[seq] = (who, wait_s)
            while len(self.verdicts) > VERDICTS_KEPT:
                self.verdicts.popitem(last=False)
        return wait_s

    def verdict(self, seq: int) -> float | None:
        """The verdict ``charge`` gave the command at ``seq`` (None: within the rate, or not charged)."""
        return self.verdicts[seq][1] if seq in self.verdicts else None

    def refusal(self, who: str, wait_s: float, now: datetime) -> str:
        retry_at = (now + timedelta(seconds=wait_s)).isoformat()
        return (f"requester {who!r} is over the command rate of {self.per_min:g} commands a minute (bursts of up "
                f"to {self.burst}; OPSCHED_COMMAND_RATE_PER_MIN, OPSCHED_COMMAND_BURST; every command counts, "
                f"refused and malformed ones too): retry in {wait_s:.1f} s (at {retry_at})")

    def refused(self, who: str, seq: int, message: str, now: datetime, log: Any = None) -> str | None:
        """A refused or malformed command of ``who`` (at ``seq``, charged before: then the requester it was
        charged to): the text its dead letter and error event carry, or None: acked without either (over the
        rate, not the first of its window)."""
        if seq and seq in self.answered:  # its dead letter failed and it came again: the same answer
            return self.answered[seq]
        text = self._refused(self.verdicts[seq][0] if seq in self.verdicts else who, seq, message, now, log)
        if seq:
            self.answered[seq] = text
            while len(self.answered) > VERDICTS_KEPT:
                self.answered.popitem(last=False)
        return text

    def _refused(self, who: str, seq: int, message: str, now: datetime, log: Any) -> str | None:
        if self.verdict(seq) is None:
            self._settle(who, now, log)
            return message
        overflow = self.overflows.get(who)
        if overflow is None or (now - overflow.since).total_seconds() >= self.window_s:
            before = overflow.unrecorded if overflow is not None else 0
            total = overflow.total if overflow is not None else 0
            self.overflows[who] = Overflow(since=now, total=total)
            if log is not None and before:
                log.warning("command_refusals_unrecorded", requester=who, unrecorded=before, since_over=total,
                            window_s=self.window_s)
            note = (f" [requester {who!r} is over the command rate of {self.per_min:g} a minute: its refused "
                    f"commands get one dead letter per {self.window_s:g} s; {before} before this one went "
                    f"unrecorded]")
            return message + note
        overflow.unrecorded += 1
        overflow.total += 1
        if log is not None and overflow.unrecorded == 1:
            log.warning("command_refusals_unrecorded", requester=who, unrecorded=1, since_over=overflow.total,
                        window_s=self.window_s)
        return None

    def _settle(self, who: str, now: datetime, log: Any) -> None:
        """Within its rate again: a requester's overflow is forgotten once its window passed (logged)."""
        overflow = self.overflows.get(who)
        if overflow is None or (now - overflow.since).total_seconds() < self.window_s:
            return
        del self.overflows[who]
        if log is not None and overflow.unrecorded:
            log.warning("command_refusals_unrecorded", requester=who, unrecorded=overflow.unrecorded,
                        since_over=overflow.total, window_s=self.window_s)
