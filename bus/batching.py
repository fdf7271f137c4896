"""Publishes to one stream that meet on the way, sent as one JetStream atomic batch: one ack for all of them.

A handler's events are JetStream publishes, each a request whose reply is the stream's ack: two messages per
event. When several publishes to the same stream are under way on one connection at once (a window of handlers, an
admission cycle admitting many, a client submitting many), the ones that arrive while an earlier publish waits for
its ack are held, and sent together when it is answered (a group commit): every message but the last without a
reply, the last with ``Nats-Batch-Commit`` and the one ack (nats-server 2.12's atomic batches; its ack names the
batch and counts it, and the sequences are the ones before the ack's). Alone, a publish goes out at once, as
always: batching adds nothing to an idle bus's latency and grows with the load (one batch in flight per stream).

A batch is stored whole or not at all, so what each publish meant is kept by falling back: a batch the stream
refuses (a duplicate Nats-Msg-Id — a redelivered message publishing its events again —, a fence that moved, a
stream at its limit) is published again message by message, each with its own answer, as if never batched. A
stream that does not take batches (``allow_atomic`` off: 10174), a server before 2.12.1 (no Nats-Msg-Id in a batch:
10177) or one that ignores the headers (an ack that names no batch), turns batching off for that stream, after the same fallback (a message stored from the batch is
a duplicate the second time: its Nats-Msg-Id). No answer (a timeout, a closed connection) is every held publish's
error, as it would have been: each caller tries again as it does (``Bus.publish_raw``), a stored one a duplicate.
"""
from __future__ import annotations

import asyncio
import itertools
import secrets
from dataclasses import dataclass, field

import msgspec
import nats.js.errors

from opsched.bus.requesting import PubAck, Requester

MAX_BATCH = 256  # messages in one batch (the server's cap is 1,000)
NOT_ENABLED = 10174  # the stream does not take batches
UNSUPPORTED_HEADER = 10177  # a server before 2.12.1: no Nats-Msg-Id in a batch


class _Ack(msgspec.Struct, frozen=True):
    stream: str = ""
    seq: int = 0
    batch: str | None = None
    count: int = 0
    error: dict | None = None


_DECODE = msgspec.json.Decoder(_Ack)


@dataclass
class _Held:
    subject: str
    data: bytes
    headers: dict[str, str]
    future: asyncio.Future


@dataclass
class _Stream:
    busy: bool = False  # a publish or a batch is under way
    held: list[_Held] = field(default_factory=list)
    batching: bool = True  # off once the stream (or the server) showed it does not take batches


class Batching:
    """Group commit of the JetStream publishes on one connection, per stream (module docstring)."""

    def __init__(self, nc: nats.NATS, requester: Requester, timeout: float, *,
                 on: bool = True, max_batch: int = MAX_BATCH) -> None:
        self.nc, self.requester, self.timeout, self.on, self.max_batch = nc, requester, timeout, on, max_batch
        self._streams: dict[str, _Stream] = {}
        self._prefix = secrets.token_hex(6)
        self._ids = itertools.count()
        self._tasks: set[asyncio.Task] = set()
        self.batches = 0  # sent and stored whole (what the tests and the bench read)
        self.batched = 0  # messages in them

    async def publish(self, stream: str, subject: str, data: bytes, headers: dict[str, str]) -> PubAck:
        """The stream's ack for this message (its refusal raised as ``Requester.publish`` raises it)."""
        s = self._streams.get(stream)
        if s is None:
            s = self._streams[stream] = _Stream(batching=self.on)
        if not s.batching:
            return await self.requester.publish(subject, data, headers, self.timeout)
        if s.busy:
            future = asyncio.get_running_loop().create_future()
            s.held.append(_Held(subject, data, headers, future))
            return await future
        s.busy = True
        try:
            return await self.requester.publish(subject, data, headers, self.timeout)
        finally:
            self._next(s)

    def _next(self, s: _Stream) -> None:
        """Send what was held meanwhile (one batch), or stand idle."""
        if not s.held:
            s.busy = False
            return
        batch, s.held = s.held[:self.max_batch], s.held[self.max_batch:]
        task = asyncio.get_running_loop().create_task(self._send(s, batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, s: _Stream, batch: list[_Held]) -> None:
        try:
            if len(batch) == 1 or not s.batching:
                await self._one_by_one(batch)
            else:
                await self._batch(s, batch)
        except BaseException as exc:  # noqa: BLE001 - every held publish is answered, whatever happened
            for held in batch:
                if not held.future.done():
                    held.future.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            if not isinstance(exc, Exception):
                raise
        finally:
            self._next(s)

    async def _batch(self, s: _Stream, batch: list[_Held]) -> None:
        bid = f"{self._prefix}{next(self._ids):x}"
        last = len(batch)
        try:
            for n, held in enumerate(batch[:-1], 1):
                await self.nc.publish(held.subject, held.data,
                                      headers={**held.headers, "Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(n)})
            end = batch[-1]
            msg = await self.requester.request(end.subject, end.data, {
                **end.headers, "Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(last), "Nats-Batch-Commit": "1"},
                self.timeout)
        except nats.errors.NoRespondersError:
            _fail(batch, nats.js.errors.NoStreamResponseError())
            return
        except Exception as exc:  # noqa: BLE001 - no answer: each caller tries again (a stored one: a duplicate)
            _fail(batch, exc)
            return
        ack = _DECODE.decode(msg.data)
        if ack.error is None and ack.batch == bid and ack.count == last:
            for n, held in enumerate(batch):
                _answer(held.future, PubAck(stream=ack.stream, seq=ack.seq - (last - 1 - n)))
            self.batches += 1
            self.batched += last
            return
        if ack.error is None or ack.error.get("err_code") in (NOT_ENABLED, UNSUPPORTED_HEADER):
            s.batching = False  # headers ignored (an older server), or a stream without batches
        await self._one_by_one(batch)

    async def _one_by_one(self, batch: list[_Held]) -> None:
        """Each held publish as if never batched, its own answer to its own caller."""
        async def one(held: _Held) -> None:
            try:
                _answer(held.future, await self.requester.publish(held.subject, held.data, held.headers,
                                                                  self.timeout))
            except Exception as exc:  # noqa: BLE001 - the caller's to raise
                _fail([held], exc)
        await asyncio.gather(*(one(h) for h in batch))


def _answer(future: asyncio.Future, ack: PubAck) -> None:
    if not future.done():
        future.set_result(ack)


def _fail(batch: list[_Held], exc: Exception) -> None:
    for held in batch:
        if not held.future.done():
            held.future.set_exception(exc)

