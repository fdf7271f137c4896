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
from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class Hand:
    """One message a loop holds (a loop with a window holds several at once)."""

    subject: str
    since: datetime  # started then
    beat: datetime  # its last sign of life
    waiting: bool = False  # between two tries of a dependency found unavailable


@dataclass
class Loop:
    """What one consumer's handler loop does now: its fetch loop's last turn and the messages in hand."""

    consumer: str
    beat: datetime  # the fetch loop's last sign of life
    hands: dict[int, Hand] = field(default_factory=dict)

    def oldest(self) -> Hand | None:
        return min(self.hands.values(), key=lambda h: h.since, default=None)

    @property
    def subject(self) -> str:
        """Of the oldest message in hand ("": none, fetching)."""
        hand = self.oldest()
        return hand.subject if hand is not None else ""

    @property
    def since(self) -> datetime | None:
        hand = self.oldest()
        return hand.since if hand is not None else None

    @property
    def waiting(self) -> bool:
        """Some message in hand waits for a dependency."""
        return any(h.waiting for h in self.hands.values())


_current: contextvars.ContextVar[Hand | None] = contextvars.ContextVar("opsched_handler_hand", default=None)


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
    def handling(self, consumer: str, subject: str) -> Iterator[Hand]:
        """The loop of ``consumer`` works on a message of ``subject`` inside this block (and the calls
        made in it report their tries and waits with ``trying`` and ``waiting``)."""
        now = self.now()
        loop = self.loops.setdefault(consumer, Loop(consumer, now))
        hand = Hand(subject, now, now)
        loop.hands[id(hand)] = hand
        token = _current.set(hand)
        try:
            yield hand
        finally:
            _current.reset(token)
            del loop.hands[id(hand)]
            loop.beat = self.now()

    def trying(self) -> None:
        """The message in hand is tried (again): a sign of life."""
        hand = _current.get()
        if hand is not None:
            hand.beat, hand.waiting = self.now(), False

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Inside: the message in hand waits for a dependency (not stuck, however long)."""
        hand = _current.get()
        if hand is not None:
            hand.waiting = True
        try:
            yield
        finally:
            if hand is not None:
                hand.beat, hand.waiting = self.now(), False

    def stuck(self, bound_s: float) -> dict[str, str]:
        """Consumer -> what it is stuck on: a message in hand (not waiting for a dependency) without a sign of
        life for over ``bound_s``, or, with none in hand, a fetch loop without a turn for that long."""
        now = self.now()
        out: dict[str, str] = {}
        for loop in self.loops.values():
            if loop.hands:
                busy = [h for h in loop.hands.values() if not h.waiting]
                hand = min(busy, key=lambda h: h.beat, default=None)  # the quietest, not waiting
                quiet = (now - hand.beat).total_seconds() if hand is not None else 0.0
                if hand is not None and quiet > bound_s:
                    out[loop.consumer] = (f"handling {hand.subject} since {hand.since.isoformat()}, "
                                          f"no progress for {quiet:.0f} s (bound {bound_s:g} s)")
                continue
            quiet = (now - loop.beat).total_seconds()
            if quiet > bound_s:
                out[loop.consumer] = f"not fetching, no progress for {quiet:.0f} s (bound {bound_s:g} s)"
        return out
