"""How long to wait before trying a dependency again: capped exponential backoff with jitter.

``delay(n)`` after the n-th failure in a row is ``base * 2**(n-1)``, at most ``cap``, less a random part
of up to ``jitter`` of it (so replicas that failed together do not retry together). ``rand`` is injected:
tests pass a constant."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    base_s: float = 0.5
    cap_s: float = 10.0
    jitter: float = 0.2  # the fraction of the delay that is random
    rand: Callable[[], float] = field(default=random.random, compare=False)

    def delay(self, failures: int) -> float:
        exponent = min(max(failures, 1) - 1, 30)  # 2**30 * base is past any cap
        capped = min(self.cap_s, self.base_s * 2 ** exponent)
        return capped * (1.0 - self.jitter * self.rand())
