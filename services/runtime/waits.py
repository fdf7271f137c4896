"""What a service is waiting for: the dependencies its handler loops cannot reach now, since when.

Each handler loop that finds a dependency unavailable ``begin``s a ``Wait`` and ``end``s it once the call
went through (or the loop stops); readiness (``/readyz``) reports the open ones, the oldest per dependency."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass
class Wait:
    dependency: str
    since: datetime
    detail: str
    failures: int = 0


class Waits:
    def __init__(self) -> None:
        self._open: list[Wait] = []

    def begin(self, dependency: str, since: datetime, detail: str) -> Wait:
        wait = Wait(dependency, since, detail)
        self._open.append(wait)
        return wait

    def end(self, wait: Wait) -> None:
        self._open = [w for w in self._open if w is not wait]

    def __bool__(self) -> bool:
        return bool(self._open)

    def report(self) -> dict[str, dict]:
        """Dependency -> since (ISO 8601, the oldest open wait), the latest failure, failures so far."""
        out: dict[str, dict] = {}
        for wait in sorted(self._open, key=lambda w: w.since):
            entry = out.setdefault(wait.dependency, {"since": wait.since.isoformat(), "detail": wait.detail,
                                                     "failures": 0, "waiting": 0})
            entry["detail"], entry["failures"], entry["waiting"] = (
                wait.detail, entry["failures"] + wait.failures, entry["waiting"] + 1)
        return out
