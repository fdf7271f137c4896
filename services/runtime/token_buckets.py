"""A token bucket per requester, refilled on the service's clock: what the submit rate (``submit_rate``) and
the command rate (``command_rate``) each keep, with their own rate and burst. A bucket starts full (``burst``
tokens) and refills at ``per_min`` tokens a minute; a clock that goes back adds nothing. Requesters whose bucket
is full again are forgotten when more than ``MAX_TRACKED`` are held."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

MAX_TRACKED = 10_000  # requesters held before the full buckets are forgotten


@dataclass
class Bucket:
    tokens: float
    at: datetime  # when ``tokens`` was counted


class TokenBuckets(dict[str, Bucket]):
    def __init__(self, per_min: float, burst: int, on_forget: Callable[[str], object] | None = None) -> None:
        super().__init__()
        self.per_min, self.burst = per_min, burst
        self.on_forget = on_forget  # told of each requester forgotten (what else is kept of it goes too)

    def refilled(self, who: str, now: datetime) -> Bucket:
        """``who``'s bucket as of ``now`` (a new one full; room made first when ``MAX_TRACKED`` are held)."""
        bucket = self.get(who)
        if bucket is None:
            if len(self) >= MAX_TRACKED:
                self.forget_full(now)
            bucket = self[who] = Bucket(float(self.burst), now)
            return bucket
        elapsed = max(0.0, (now - bucket.at).total_seconds())  # a clock that went back adds nothing
        bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.per_min / 60.0)
        bucket.at = max(bucket.at, now)
        return bucket

    def forget_full(self, now: datetime) -> None:
        """Forget the requesters whose bucket is full again at ``now``."""
        full_after_s = self.burst * 60.0 / self.per_min
        for who in [w for w, b in self.items() if (now - b.at).total_seconds() >= full_after_s]:
            del self[who]
            if self.on_forget is not None:
                self.on_forget(who)
