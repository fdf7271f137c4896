"""What keeps a service from making progress although it is alive and connected: a publish the NATS server refused
(its user's permissions: a bug or a misconfiguration, never an outage to wait out), a stream full at its limits (its
publishes refused until space is freed: the message is kept and tried again, not taken for an outage), or a task
that keeps failing (admission's cycle). Readiness (``/readyz``) is 503 while any is reported and names it (``not_progressing``);
liveness stays 200: a restart would meet the same refusal.

A refusal is reported for ``window_s`` after the last one (it recurs with the next op that needs that subject); a
failing task from its ``threshold``-th failure in a row until it succeeds once."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

REFUSED = "publish_refused"
FULL = "stream_full"
FAILING = "failing"


@dataclass
class Stall:
    kind: str  # REFUSED, FULL or FAILING
    since: datetime
    last: datetime
    detail: str
    count: int = 1


class Stalls:
    def __init__(self, window_s: float = 600.0, threshold: int = 3) -> None:
        self.window = timedelta(seconds=window_s)
        self.threshold = threshold
        self._stalls: dict[str, Stall] = {}

    def refused(self, subject: str, detail: str, at: datetime) -> None:
        """The server refused a publish to ``subject`` (``refusals.NotPermitted``)."""
        self._note(f"publish {subject}", REFUSED, detail, at)

    def full(self, stream: str, detail: str, at: datetime) -> None:
        """``stream`` refused a publish at its limits (``bus.StreamFull``): reported until a publish to it goes
        through (``stored``), or ``window_s`` after the last refusal."""
        self._note(full_key(stream), FULL, detail, at)

    def stored(self, stream: str) -> None:
        self._stalls.pop(full_key(stream), None)

    def failed(self, task: str, detail: str, at: datetime) -> None:
        """``task`` failed once more (cleared by ``succeeded``)."""
        self._note(task, FAILING, detail, at)

    def succeeded(self, task: str) -> None:
        self._stalls.pop(task, None)

    def _note(self, what: str, kind: str, detail: str, at: datetime) -> None:
        stall = self._stalls.get(what)
        if stall is None:
            self._stalls[what] = Stall(kind, at, at, detail[:500])
        else:
            stall.last, stall.detail, stall.count = at, detail[:500], stall.count + 1

    def current(self, now: datetime) -> dict[str, Stall]:
        """What keeps it from progressing now."""
        return {what: s for what, s in sorted(self._stalls.items()) if self._current(s, now)}

    def report(self, now: datetime) -> dict[str, dict]:
        """What -> since, last, count and the last error (``/readyz``)."""
        return {what: {"since": s.since.isoformat(), "last": s.last.isoformat(), "count": s.count, "detail": s.detail}
                for what, s in self.current(now).items()}

    def _current(self, stall: Stall, now: datetime) -> bool:
        if stall.kind in (REFUSED, FULL):
            return now - stall.last <= self.window
        return stall.count >= self.threshold


def full_key(stream: str) -> str:
    return f"stream {stream} full"
