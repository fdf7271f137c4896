"""Past usage per queue, decaying with a half-life: the memory behind usage-history fair sharing.

Accumulates resource-seconds of quota usage and decays them by half every ``half_life`` seconds;
``levels()`` gives the decayed usage as an average level (resource units), comparable with current
usage. Advanced by the cycle with its injected clock (so it follows admission's own time)."""
from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime


class UsageHistory:
    def __init__(self, half_life_s: float = 3600.0) -> None:
        self.half_life_s = half_life_s
        self.seconds: dict[str, dict[tuple[str, str], float]] = defaultdict(lambda: defaultdict(float))
        self.at: datetime | None = None

    def advance(self, now: datetime, usage: dict[str, dict[tuple[str, str], float]], half_life_s: float) -> None:
        self.half_life_s = half_life_s
        if self.at is None or now <= self.at:
            self.at = now if self.at is None else self.at
            return
        dt = (now - self.at).total_seconds()
        decay = 0.5 ** (dt / self.half_life_s)
        for queue in list(self.seconds):
            for key in list(self.seconds[queue]):
                self.seconds[queue][key] *= decay
        for queue, keys in usage.items():
            for key, used in keys.items():
                self.seconds[queue][key] += used * dt
        self.at = now

    def levels(self) -> dict[str, dict[tuple[str, str], float]]:
        scale = math.log(2) / self.half_life_s  # a constant level u for long gives u
        return {q: {k: v * scale for k, v in keys.items()} for q, keys in self.seconds.items()}
