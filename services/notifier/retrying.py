"""When a failed delivery is tried again, and when it is given up: capped exponential backoff
(``services/runtime/backoff``, the one rule) until ``give_up_after`` from its first attempt, then a
dead letter. Pure: the caller passes the time (the injected clock), so tests need no sleeps."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from opsched.services.runtime.backoff import Backoff


@dataclass(frozen=True)
class Retrying:
    backoff: Backoff = field(default_factory=lambda: Backoff(base_s=2.0, cap_s=600.0))
    give_up_after: timedelta = timedelta(hours=24)

    def next_try(self, first_attempt: datetime, failures: int, now: datetime) -> float | None:
        """Seconds until the next attempt after ``failures`` failures in a row, or ``None``: give up
        (dead letter) because the next attempt would fall past ``give_up_after``."""
        delay = self.backoff.delay(failures)
        if now + timedelta(seconds=delay) - first_attempt > self.give_up_after:
            return None
        return delay
