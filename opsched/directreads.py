"""How a client reads the services' streams: JetStream direct gets, nothing else of their API.

A client (the CLI, the SDK, the web view) is in the clients' NATS account (``proto.permissions``): it cannot create
a consumer on a stream, pull from one, ack, or touch a stream's configuration. The services' account exports to it
the direct gets of the streams a view reads (imported under ``subjects.READ_API_PREFIX``) and the op events as they
are published. So a client reads:

- a message by sequence, the last of a subject, or every message of a subject from a sequence on (a batch direct
  get, answered by several messages and an end-of-batch status);
- a stream "past, then live" (``follow``): it reads what is stored, then waits for the live events of its subjects,
  which only ring the bell: each ring makes it read on from the last sequence it delivered, so what it hands on
  comes from the stream, in the stream's order, with the stream's sequences. A ring can come before the stream has
  stored its message: the read is tried again a few times, shortly after; and a slow poll (``POLL_S``) catches
  what a lost ring (a reconnect) would miss.

On a server without accounts (``opsched up --no-auth``) the same reads go to the connection's own ``$JS.API``.
The streams are created with direct gets allowed (``Bus.ensure_streams``)."""
from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog

from opsched.bus.received import Received
from opsched.proto import subjects

BATCH = 256  # messages per batch request (the server answers with up to this many, then its end-of-batch status)
ANSWER_TIMEOUT_S = 5.0
POLL_S = 1.0  # a follower reads on at least this often, rung or not
RETRY_AFTER_RING_S = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)  # a ring whose message was not stored yet: read again
END_OF_BATCH, NOT_FOUND, NO_RESPONDERS = "204", "404", "503"
KV_OPERATION = "KV-Operation"  # a key-value delete or purge leaves a marker with this header


class ReadError(Exception):
    """The server answered a read with an error status (not "none found")."""


def _status(msg: Any) -> str | None:
    return (msg.headers or {}).get("Status")


def _failed(what: str, msg: Any) -> ReadError:
    """The error an answer with an error status is."""
    return ReadError(f"{what}: {_status(msg)} {(msg.headers or {}).get('Description', '')}".strip())


def _received(msg: Any) -> Received:
    headers = dict(msg.headers or {})
    return Received(headers.get("Nats-Subject", ""), msg.data or b"", headers, int(headers["Nats-Sequence"]), 0, None)


class DirectReads:
    """Reads of the services' streams over the connection ``nc`` through the direct-get API at ``prefix``."""

    def __init__(self, nc: Any, prefix: str = subjects.READ_API_PREFIX) -> None:
        self.nc = nc
        self.prefix = prefix

    async def _ask(self, subject: str, body: bytes, *, batch: bool = True) -> list[Any]:
        """Every answer to one request: a batch's, up to its status (end of batch, none found, no such stream);
        otherwise the one answer."""
        inbox = self.nc.new_inbox()
        answers: asyncio.Queue[Any] = asyncio.Queue()

        async def on_answer(msg: Any) -> None:
            answers.put_nowait(msg)
        sub = await self.nc.subscribe(inbox, cb=on_answer)
        out: list[Any] = []
        try:
            await self.nc.publish(subject, body, reply=inbox)
            while True:
                async with asyncio.timeout(ANSWER_TIMEOUT_S):  # not wait_for: on 3.11 it can lose a cancellation
                    msg = await answers.get()
                out.append(msg)
                if not batch or _status(msg) is not None:
                    return out
        finally:
            await sub.unsubscribe()

    async def _one(self, subject: str, body: bytes = b"") -> Received | None:
        msg = (await self._ask(subject, body, batch=False))[-1]
        status = _status(msg)
        if status in (NOT_FOUND, NO_RESPONDERS):
            return None
        if status is not None:
            raise _failed(subject, msg)
        return _received(msg)

    async def messages(self, stream: str, subject: str, from_seq: int = 1) -> list[Received]:
        """Every message of ``subject`` in ``stream`` from sequence ``from_seq`` on, in order."""
        get, _ = subjects.direct_gets(stream, self.prefix)
        out: list[Received] = []
        while True:
            body = json.dumps({"seq": from_seq, "batch": BATCH, "next_by_subj": subject}).encode()
            answers = await self._ask(get, body)
            end = answers[-1]
            status = _status(end)
            if status in (NOT_FOUND, NO_RESPONDERS):
                return out
            if status != END_OF_BATCH:
                raise _failed(f"{get} {subject}", end)
            got = [_received(m) for m in answers[:-1]]
            out.extend(got)
            if not got or int((end.headers or {}).get("Nats-Num-Pending", "0")) == 0:
                return out
            from_seq = got[-1].stream_seq + 1

    async def read_all(self, stream: str, subject: str) -> list[bytes]:
        """Every message of ``subject`` now in ``stream``, in order (for clients that build a view)."""
        return [m.data for m in await self.messages(stream, subject)]

    async def last(self, stream: str, subject: str) -> Received | None:
        """The last message of ``subject`` still in ``stream`` (None: none)."""
        _, by_subject = subjects.direct_gets(stream, self.prefix)
        return await self._one(by_subject.removesuffix(">") + subject)

    async def last_stored(self, stream: str, subject: str) -> int:
        """The sequence of ``subject``'s last message still in ``stream`` (0: none)."""
        last = await self.last(stream, subject)
        return last.stream_seq if last is not None else 0

    async def stored(self, stream: str, seq: int) -> Received | None:
        """The message at ``seq`` in ``stream`` (None: no longer stored)."""
        get, _ = subjects.direct_gets(stream, self.prefix)
        return await self._one(get, json.dumps({"seq": seq}).encode())

    async def read_bucket(self, bucket: str) -> list[bytes]:
        """The value of every key of a key-value bucket (none if the bucket does not exist yet)."""
        entries = await self.messages(subjects.kv_stream(bucket), subjects.kv_entries(bucket))
        return [m.data for m in entries if m.data and KV_OPERATION not in m.headers]

    async def read_key(self, bucket: str, key: str) -> bytes | None:
        """One key's value, or None (no such key, a deleted one, or no such bucket)."""
        entry = await self.last(subjects.kv_stream(bucket), subjects.kv_entries(bucket).removesuffix(">") + key)
        return entry.data if entry is not None and entry.data and KV_OPERATION not in entry.headers else None

    async def follow(self, stream: str, subject: str | Sequence[str], on_message: Callable[..., Awaitable[None]],
                     *, headers: bool = False, from_seq: int = 1) -> "Following":
        """Deliver every message of ``subject`` (or of several) from the start of ``stream`` (from stream sequence
        ``from_seq``), then live, in order: ``on_message(data, seq)``, with ``headers`` ``on_message(data, seq,
        headers)``. Reading has begun when this returns (the live subjects are subscribed first: nothing published
        after it is missed)."""
        following = Following(self, stream, [subject] if isinstance(subject, str) else list(subject), on_message,
                               headers, from_seq)
        await following.start()
        return following


def reads_for(bus: Any) -> Any:
    """How a client on ``bus`` reads: a user's connection through the services' exports, an open server's (no
    user) through its own API; a bus that reads itself (the tests' in-memory one: ``reads``) as it does."""
    own = getattr(bus, "reads", None)
    if own is not None:
        return own
    return DirectReads(bus.nc, subjects.JS_API_PREFIX if bus.user == subjects.ANONYMOUS else subjects.READ_API_PREFIX)


class Following:
    """One ``DirectReads.follow``: ``unsubscribe()`` ends it."""

    def __init__(self, reads: DirectReads, stream: str, filters: list[str],
                 on_message: Callable[..., Awaitable[None]], headers: bool, from_seq: int = 1) -> None:
        self.reads, self.stream, self.filters = reads, stream, filters
        self.on_message, self.headers = on_message, headers
        self.next_seq = {f: max(1, from_seq) for f in filters}  # per subject: the next sequence to read from
        self.rung = asyncio.Event()
        self._subs: list[Any] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        async def ring(msg: Any) -> None:
            self.rung.set()
        nc = self.reads.nc
        self._subs = [await nc.subscribe(f, cb=ring) for f in self.filters]
        await nc.flush()
        self._task = asyncio.ensure_future(self._run())

    async def _read_on(self) -> int:
        """Read what is new on every subject and deliver it in stream order; how many were delivered. With several
        subjects, those read first are read once more: what was stored on them while the later ones were read is
        delivered in order with the rest."""
        got: dict[int, Received] = {}
        for rounds in (self.filters, self.filters[:-1]):
            for f in rounds:
                for m in await self.reads.messages(self.stream, f, self.next_seq[f]):
                    got[m.stream_seq] = m
                    self.next_seq[f] = m.stream_seq + 1
        for seq in sorted(got):
            m = got[seq]
            await (self.on_message(m.data, seq, m.headers) if self.headers else self.on_message(m.data, seq))
        return len(got)

    async def _run(self) -> None:
        await self._safely_read_on()  # the past
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):
                    await self.rung.wait()
            if not self.rung.is_set():
                await self._safely_read_on()  # the slow poll
                continue
            for pause in (0.0, *RETRY_AFTER_RING_S):  # a ring's message may not be stored yet: again, shortly
                await asyncio.sleep(pause)
                self.rung.clear()  # a ring during the read is kept: the next turn reads on
                if await self._safely_read_on():
                    break

    async def _safely_read_on(self) -> int:
        try:
            return await self._read_on()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a read that failed is read again at the next ring or poll
            structlog.get_logger().warning("follow_read_failed", stream=self.stream, error=repr(exc))
            return 0

    async def unsubscribe(self) -> None:
        if self._task is not None:  # ended, without taking the caller's own cancellation for its own
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=ANSWER_TIMEOUT_S)
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
