"""In-memory JetStream for ``tests.builders.bus``: streams (subject filters with ``*`` and ``>``, sequence
numbers, Nats-Msg-Id dedupe within the duplicate window, Nats-Expected-Last-Subject-Sequence, messages kept per subject) and durable pull
consumers shared by name (each message goes to one fetcher; ack, nak with a delay, term; a nak'd or
unacked message is delivered again with ``num_delivered`` counted, until ``max_deliver``: then the
consumer's ``on_max_deliveries(seq, deliveries)`` is told, as JetStream publishes its advisory)."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import BadRequestError

from opsched.bus.requesting import PubAck


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, a final ``>`` one or more."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or token not in ("*", have[i]):
            return False
    return len(want) == len(have)


@dataclass(frozen=True)
class Stored:
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str]


class Stream:
    def __init__(self, name: str, subjects: list[str], per_subject: int, duplicate_window: float) -> None:
        self.name, self.subjects, self.per_subject = name, list(subjects), per_subject
        self.duplicate_window = duplicate_window
        self.messages: dict[int, Stored] = {}  # by sequence, oldest first
        self.last_seq = 0
        self.consumers: dict[str, Consumer] = {}
        self.watchers: list[Callable[[Stored], None]] = []  # followers: told of every new message
        self._msg_ids: dict[str, tuple[int, float]] = {}

    def holds(self, subject: str) -> bool:
        return any(matches(s, subject) for s in self.subjects)

    def store(self, subject: str, data: bytes, headers: dict[str, str]) -> PubAck:
        self._check_expected(subject, headers)
        msg_id, now = headers.get("Nats-Msg-Id"), time.monotonic()
        if msg_id:
            known = self._msg_ids.get(msg_id)
            if known and now - known[1] < self.duplicate_window:
                return PubAck(stream=self.name, seq=known[0], duplicate=True)
            self._msg_ids[msg_id] = (self.last_seq + 1, now)
        self.last_seq += 1
        stored = Stored(self.last_seq, subject, data, dict(headers))
        self.messages[stored.seq] = stored
        self._keep_per_subject(subject)
        for consumer in self.consumers.values():
            consumer.wake()
        for watcher in list(self.watchers):
            watcher(stored)
        return PubAck(stream=self.name, seq=stored.seq)

    def _check_expected(self, subject: str, headers: dict[str, str]) -> None:
        """Nats-Expected-Last-Subject-Sequence (of the -Subject header's subject, else this one): refused,
        as JetStream refuses it (before any Nats-Msg-Id dedupe), when that subject's last message moved on."""
        expected = headers.get("Nats-Expected-Last-Subject-Sequence")
        if expected is None:
            return
        of = headers.get("Nats-Expected-Last-Subject-Sequence-Subject", subject)
        last = max((m.seq for m in self.messages.values() if matches(of, m.subject)), default=0)
        if last != int(expected):
            raise BadRequestError(code=400, err_code=10071, description=f"wrong last sequence: {last}")

    def _keep_per_subject(self, subject: str) -> None:
        if self.per_subject < 0:
            return
        same = [seq for seq, m in self.messages.items() if m.subject == subject]
        for seq in same[: max(0, len(same) - self.per_subject)]:
            del self.messages[seq]

    def matching(self, subject: str) -> list[Stored]:
        return [m for m in self.messages.values() if matches(subject, m.subject)]

    def purge(self, subject: str, before_seq: int | None = None, keep: int | None = None) -> None:
        """Remove the messages of ``subject`` (those before ``before_seq``, or all but the last ``keep``, if
        given), as JetStream's purge."""
        found = self.matching(subject)
        for m in found[:len(found) - keep] if keep else found:
            if before_seq is None or m.seq < before_seq:
                del self.messages[m.seq]

    def consumed_up_to(self, durables: Collection[str] | None = None) -> int:
        """Up to which sequence every durable consumer (of ``durables``, if given) has acked what it was given (as
        ``Bus.consumed_up_to``)."""
        return min([self.last_seq] + [c.consumed() for name, c in self.consumers.items()
                                      if durables is None or name in durables])


@dataclass(frozen=True)
class SequencePair:
    stream: int
    consumer: int


@dataclass(frozen=True)
class Metadata:
    sequence: SequencePair
    num_delivered: int
    stream: str
    consumer: str
    num_pending: int = 0  # JetStream's: messages for the consumer after this one (here: of any subject)


Settle = Callable[[str, int, "float | None"], None]  # (ack | nak | term, stream seq, nak delay)


class MemoryMsg:
    """A delivered message, as the nats Msg the handler loop reads: subject, data, headers, metadata."""

    def __init__(self, stored: Stored, metadata: Metadata, settle: Settle) -> None:
        self.subject, self.data, self.headers = stored.subject, stored.data, dict(stored.headers)
        self.metadata = metadata
        self._settle = settle

    async def ack(self) -> None:
        self._settle("ack", self.metadata.sequence.stream, None)

    async def ack_sync(self) -> None:
        """An ack the server confirmed: here every ack is settled when it returns."""
        await self.ack()

    async def nak(self, delay: float | None = None) -> None:
        self._settle("nak", self.metadata.sequence.stream, delay)

    async def term(self) -> None:
        self._settle("term", self.metadata.sequence.stream, None)

    async def in_progress(self) -> None:
        """Still being worked on: the ack wait starts again (may be sent many times)."""
        self._settle("in_progress", self.metadata.sequence.stream, None)


class Consumer:
    """A durable pull consumer (deliver all, explicit ack). Every connection bound to it shares it."""

    def __init__(self, stream: Stream, name: str, filters: list[str], max_deliver: int, ack_wait: float) -> None:
        self.stream, self.name = stream, name
        self.configure(filters, max_deliver, ack_wait)
        self.next_seq = 1  # the first stream sequence not delivered yet
        self.delivered: dict[int, int] = {}  # stream seq -> deliveries so far
        self.pending: dict[int, asyncio.TimerHandle] = {}  # delivered, not acked: redelivered at ack_wait
        self.due: list[int] = []  # nak'd or expired: delivered again before anything new
        self.consumer_seq = 0
        self._signal = asyncio.Event()
        self.on_max_deliveries: Callable[[int, int], None] = lambda seq, deliveries: None

    def configure(self, filters: list[str], max_deliver: int, ack_wait: float) -> None:
        self.filters, self.max_deliver, self.ack_wait = list(filters), max_deliver, ack_wait

    def wake(self) -> None:
        self._signal.set()

    def consumed(self) -> int:
        """As ``Bus.consumed_up_to`` reads it of JetStream: the sequence before the first message of its filters
        not acked yet (the stream's last sequence when none waits)."""
        waiting = [*self.pending, *self.due]
        waiting += [m.seq for m in self.stream.messages.values()
                    if m.seq >= self.next_seq and any(matches(f, m.subject) for f in self.filters)]
        return min(waiting) - 1 if waiting else self.stream.last_seq

    async def fetch(self, batch: int, timeout: float, settle: Settle) -> list[MemoryMsg]:
        """Up to ``batch`` messages, waiting up to ``timeout`` for the first; nats' TimeoutError if none."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            await asyncio.sleep(0)  # a round trip, as to a server: another connection's fetch may go first
            taken = [self._deliver(seq, settle) for seq in self._take(batch)]
            if taken:
                return taken
            self._signal.clear()
            try:
                await asyncio.wait_for(self._signal.wait(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise NatsTimeout from None

    def _take(self, batch: int) -> list[int]:
        out: list[int] = []
        while self.due and len(out) < batch:
            seq = self.due.pop(0)
            if seq in self.stream.messages:
                out.append(seq)
        while self.next_seq <= self.stream.last_seq and len(out) < batch:
            stored = self.stream.messages.get(self.next_seq)
            if stored and any(matches(f, stored.subject) for f in self.filters):
                out.append(self.next_seq)
            self.next_seq += 1
        return out

    def _deliver(self, seq: int, settle: Settle) -> MemoryMsg:
        count = self.delivered[seq] = self.delivered.get(seq, 0) + 1
        self.consumer_seq += 1
        self.pending[seq] = asyncio.get_running_loop().call_later(self.ack_wait, self._expired, seq, count)
        metadata = Metadata(SequencePair(seq, self.consumer_seq), count, self.stream.name, self.name,
                            max(0, self.stream.last_seq - self.next_seq + 1))

        def on_settle(kind: str, s: int, delay: float | None) -> None:
            settle(kind, s, delay)  # the connection's part first: it refuses when closed
            if self.delivered.get(s) == count:  # not an older delivery of a message delivered again
                self.settle(kind, s, delay)
        return MemoryMsg(self.stream.messages[seq], metadata, on_settle)

    def settle(self, kind: str, seq: int, delay: float | None) -> None:
        handle = self.pending.pop(seq, None)
        if handle is None:
            return  # settled already
        handle.cancel()
        if kind == "in_progress":
            count = self.delivered[seq]
            self.pending[seq] = asyncio.get_running_loop().call_later(self.ack_wait, self._expired, seq, count)
        if kind == "nak":
            self._again(seq, delay)

    def _expired(self, seq: int, count: int) -> None:
        if self.delivered.get(seq) == count and self.pending.pop(seq, None) is not None:
            self._again(seq, None)

    def _again(self, seq: int, delay: float | None) -> None:
        if 0 < self.max_deliver <= self.delivered[seq]:
            self.on_max_deliveries(seq, self.delivered[seq])  # JetStream stops delivering it, and says so
            return
        if delay:
            asyncio.get_running_loop().call_later(delay, self._due, seq)
        else:
            self._due(seq)

    def _due(self, seq: int) -> None:
        self.due = sorted({*self.due, seq})
        self.wake()


class PullSubscription:
    """One connection's binding to a durable consumer (``fetch`` as nats' pull subscription has it)."""

    def __init__(self, consumer: Consumer, settle: Settle, check_open: Callable[[], None]) -> None:
        self.consumer, self._settle, self._check_open = consumer, settle, check_open
        self.garbage: list[Any] = []  # published on its inbox by someone else (``inject``): in its next batch

    def inject(self, msg: Any) -> None:
        """``msg`` lands on this binding's inbox as any client's publish would (nats-py then hands it out with
        the batch it is fetching, beside the real deliveries): it comes first in the batch of the next fetch."""
        self.garbage.append(msg)
        self.consumer.wake()

    async def fetch(self, batch: int = 1, timeout: float = 5.0) -> list[Any]:
        self._check_open()
        try:
            real: list[Any] = await self.consumer.fetch(batch, 0.0 if self.garbage else timeout, self._settle)
        except NatsTimeout:
            if not self.garbage:
                raise
            real = []
        garbage, self.garbage = self.garbage, []
        return [*garbage, *real]

    async def unsubscribe(self) -> None:
        """The durable stays (as on the server); this binding fetches no more."""
        self._check_open = _closed


def _closed() -> None:
    raise ValueError("nats: invalid subscription")
