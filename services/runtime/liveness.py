"""Is every handler loop making progress? Liveness (``/healthz``), not readiness.

Each consumer's handler loop leaves a sign of life (``beat``) on every turn of its fetch loop, when it
starts a message, on every try of a call it retries (``until_available``) and when it ends the message.
A loop that shows no sign of life for longer than ``OPSCHED_HANDLER_STUCK_S`` is **stuck** (a call that
never returns: a black-holed peer, a deadlock), and ``/healthz`` answers 503 naming the consumer, the
message in hand and since when, so that Kubernetes restarts the process. A loop waiting out a dependency
(between two tries of ``until_available``) is not stuck: that is weather, reported by readiness
(``waits``), and each try is a sign of life.

Time comes from the service's clock (``now``), so tests move it. A service adds its own liveness facts
(a dead watch thread, ...) by overriding ``Service.liveness``."""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime


@dataclass
class Loop:
    """What one consumer's handler loop does now."""

    consumer: str
    beat: datetime  # its last sign of life
    subject: str = ""  # of the message in hand ("": none, fetching)
    since: datetime | None = None  # the message in hand was started then
    waiting: bool = False  # between two tries of a dependency found unavailable


_current: contextvars.ContextVar[Loop | None] = contextvars.ContextVar("opsched_handler_loop", default=None)


class HandlerLoops:
    """The handler loops of one service. ``now`` is the service's clock."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self.now = now
        self.loops: dict[str, Loop] = {}

    def beat(self, consumer: str) -> None:
        """A turn of the fetch loop of ``consumer``."""
        loop = self.loops.get(consumer)
        if loop is None:
            self.loops[consumer] = Loop(consumer, self.now())
        else:
            loop.beat = self.now()

    @contextlib.contextmanager
    def handling(self, consumer: str, subject: str) -> Iterator[Loop]:
        """The loop of ``consumer`` works on a message of ``subject`` inside this block (and the calls
        made in it report their tries and waits with ``trying`` and ``waiting``)."""
        now = self.now()
        loop = self.loops.setdefault(consumer, Loop(consumer, now))
        loop.beat, loop.subject, loop.since, loop.waiting = now, subject, now, False
        token = _current.set(loop)
        try:
            yield loop
        finally:
            _current.reset(token)
            loop.beat, loop.subject, loop.since, loop.waiting = self.now(), "", None, False

    def trying(self) -> None:
        """The message in hand is tried (again): a sign of life."""
        loop = _current.get()
        if loop is not None:
            loop.beat, loop.waiting = self.now(), False

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Inside: the message in hand waits for a dependency (not stuck, however long)."""
        loop = _current.get()
        if loop is not None:
            loop.waiting = True
        try:
            yield
        finally:
            if loop is not None:
                loop.beat, loop.waiting = self.now(), False

    def stuck(self, bound_s: float) -> dict[str, str]:
        """Consumer -> what it is stuck on, for every loop without a sign of life for over ``bound_s``."""
        now = self.now()
        out: dict[str, str] = {}
        for loop in self.loops.values():
            quiet = (now - loop.beat).total_seconds()
            if loop.waiting or quiet <= bound_s:
                continue
            doing = (f"handling {loop.subject} since {loop.since.isoformat()}" if loop.since is not None
                     else "not fetching")
            out[loop.consumer] = f"{doing}, no progress for {quiet:.0f} s (bound {bound_s:g} s)"
        return out
