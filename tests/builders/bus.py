"""The in-memory bus: ``MemoryBus`` has the methods of ``bus.bus.Bus`` that the services, the
client and the tests call, with their semantics, on a ``MemoryBroker`` that several connections share
(each service gets its own, as with a real nats-server):

    broker = MemoryBroker()
    admission, test = broker.connect("opsched-admission"), broker.connect("test", HARNESS)

Each connection is a NATS user with the permissions the generated nats-server configuration gives it
(``tests.builders.identities``, from ``proto.permissions``): ``opsched-<service>`` is that service, any other
name the ``admin`` client unless an identity is given (``HARNESS``: the tests' own, unrestricted). What it may
not publish raises what the real ``Bus`` raises once the server refused it, ``NotPermitted(user, subject)``; so
do the JetStream calls its role may not make (creating a service's durable consumer, a stream, purging; the real
server refuses them too, and the call times out) and a subscription it may not make (``serve``, ``listen``).

Streams are those of ``proto.subjects`` (created by ``ensure_streams``); a publish gets a sequence number
or, for a Nats-Msg-Id seen before, the duplicate's; durable pull consumers are shared by name
(``tests.builders.streams``); ``follow``/``replay`` deliver a stream's messages in order, then live;
``serve``/``request`` answer one server of each queue group; ``listen`` hears core messages (one member
of each queue group), among them the max-deliveries advisories of the consumers; ``stored`` reads a
message back by sequence; ``ensure_cache_bucket`` returns the one ``MemoryKV`` of that bucket. Time is asyncio's: a nak's delay passes for real (keep it short).

For unit tests: ``trace`` records what this connection published and how it settled the messages it
fetched, in order; ``fail_publish`` makes publishes fail; ``memory_bus()`` is a connection to a fresh
broker whose streams exist (``OPEN`` unless told otherwise: anonymous and unrestricted, as on ``--no-auth``).
"""
from __future__ import annotations

import asyncio
import functools
import itertools
import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog
from nats.errors import ConnectionClosedError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NoStreamResponseError, NotFoundError

from opsched.bus.bus import (
    DUPLICATE_WINDOW_S,
    Bus,
    Received,
)
from opsched.bus.refusals import NotPermitted
from opsched.bus.requesting import PubAck
from opsched.bus.sizes import check_size
from opsched.proto import codec, subjects
from tests.builders.identities import OPEN, Identity, of_connection
from tests.builders.kv import MemoryKV
from tests.builders.streams import Consumer, PullSubscription, Stored, Stream, matches

OnMessage = Callable[..., Awaitable[None]]  # (data, seq), or (data, seq, headers)
Answer = Callable[[bytes], Awaitable[bytes]]


@dataclass(frozen=True)
class Published:
    """One publish call that the stream accepted (``duplicate``: dropped as a Nats-Msg-Id seen before)."""

    subject: str
    data: bytes
    headers: dict[str, str]
    seq: int
    duplicate: bool

    @property
    def msg_id(self) -> str | None:
        return self.headers.get("Nats-Msg-Id")


class MemoryBroker:
    """One in-memory nats-server with JetStream: streams, consumers, buckets and request/reply servers."""

    def __init__(self, duplicate_window: float = DUPLICATE_WINDOW_S) -> None:
        self.duplicate_window = duplicate_window
        self.streams: dict[str, Stream] = {}
        self.buckets: dict[str, MemoryKV] = {}
        self.servers: list[Server] = []
        self.listeners: list[Listener] = []
        self._turn = itertools.count()

    def connect(self, name: str, identity: Identity | None = None) -> MemoryBus:
        """A connection named ``name``, as ``identity`` (default: by its name, ``identities.of_connection``)."""
        return MemoryBus(self, name, identity or of_connection(name))

    def add_streams(self) -> None:
        """The streams of ``proto.subjects`` (subjects and per-subject limits aligned if they drifted)."""
        for name, (subj, per_subject) in subjects.STREAMS.items():
            stream = self.streams.get(name)
            if stream is None:
                self.streams[name] = Stream(name, subj, per_subject, self.duplicate_window)
            else:
                stream.subjects, stream.per_subject = list(subj), per_subject

    def stream(self, name: str) -> Stream:
        if name not in self.streams:
            raise NotFoundError(description=f"stream not found: {name}")
        return self.streams[name]

    def stream_for(self, subject: str) -> Stream:
        """The stream that stores ``subject``; none: what a JetStream publish raises then."""
        found = next((s for s in self.streams.values() if s.holds(subject)), None)
        if found is None:
            raise NoStreamResponseError
        return found

    def stored(self, stream: str, subject: str = ">") -> list[Stored]:
        """What ``stream`` holds now on ``subject`` (with headers), in order."""
        return self.stream(stream).matching(subject)

    def announce(self, subject: str, data: bytes) -> None:
        """A core message (not stored): to one listener of each queue group listening on ``subject``."""
        groups: dict[str, list[Listener]] = {}
        for listener in self.listeners:
            if matches(listener.subject, subject):
                groups.setdefault(listener.group, []).append(listener)
        turn = next(self._turn)
        for members in groups.values():
            members[turn % len(members)].queue.put_nowait(data)

    def max_deliveries(self, stream: str, durable: str, seq: int, deliveries: int) -> None:
        """JetStream's advisory: ``durable`` stopped delivering ``seq`` unsettled."""
        advisory = {"type": "io.nats.jetstream.advisory.v1.max_deliver", "stream": stream, "consumer": durable,
                    "stream_seq": seq, "deliveries": deliveries}
        self.announce(subjects.max_deliveries_advisory(stream, durable), json.dumps(advisory).encode())

    def servers_for(self, subject: str) -> list[Server]:
        """One server per queue group among those serving ``subject`` (taking turns)."""
        groups: dict[str, list[Server]] = {}
        for server in self.servers:
            if matches(server.subject, subject):
                groups.setdefault(server.group, []).append(server)
        turn = next(self._turn)
        return [members[turn % len(members)] for members in groups.values()]


class Follower:
    """An ordered subscription: the matching messages already stored, then live ones; one at a time."""

    def __init__(self, stream: Stream, subject: str | Sequence[str], on_message: OnMessage, log: Any,
                 headers: bool = False, from_seq: int = 1) -> None:
        self.stream, self.on_message, self.log, self.headers = stream, on_message, log, headers
        self.subjects = [subject] if isinstance(subject, str) else list(subject)
        self.queue: asyncio.Queue[Stored] = asyncio.Queue()
        for stored in stream.matching(">"):
            if stored.seq >= from_seq:
                self.offer(stored)
        stream.watchers.append(self.offer)
        self.task = asyncio.create_task(self._deliver())

    def offer(self, stored: Stored) -> None:
        if any(matches(subject, stored.subject) for subject in self.subjects):
            self.queue.put_nowait(stored)

    async def _deliver(self) -> None:
        while True:
            stored = await self.queue.get()
            try:
                await self.on_message(stored.data, stored.seq, *((stored.headers,) if self.headers else ()))
            except Exception as exc:  # noqa: BLE001 - as nats: the error callback hears it, delivery goes on
                self.log.warning("callback_failed", subject=stored.subject, error=repr(exc))

    async def unsubscribe(self) -> None:
        if self.offer in self.stream.watchers:
            self.stream.watchers.remove(self.offer)
        self.task.cancel()


class Server:
    """A request/reply server of one queue group: answers one request at a time, in order."""

    def __init__(self, broker: MemoryBroker, subject: str, group: str, answer: Answer, log: Any) -> None:
        self.broker, self.subject, self.group, self.answer, self.log = broker, subject, group, answer, log
        self.queue: asyncio.Queue[tuple[bytes, asyncio.Future[bytes]]] = asyncio.Queue()
        broker.servers.append(self)
        self.task = asyncio.create_task(self._serve())

    async def _serve(self) -> None:
        while True:
            data, reply = await self.queue.get()
            try:
                answer = await self.answer(data)
            except Exception as exc:  # noqa: BLE001 - as nats: no reply; the requester times out
                self.log.warning("callback_failed", subject=self.subject, error=repr(exc))
                continue
            if not reply.done():
                reply.set_result(answer)

    async def unsubscribe(self) -> None:
        if self in self.broker.servers:
            self.broker.servers.remove(self)
        self.task.cancel()


class Listener:
    """A core subscription of one queue group: hears one message at a time, in order."""

    def __init__(self, broker: MemoryBroker, subject: str, group: str, on_message: Callable[[bytes], Awaitable[None]],
                 log: Any) -> None:
        self.broker, self.subject, self.group, self.on_message, self.log = broker, subject, group, on_message, log
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        broker.listeners.append(self)
        self.task = asyncio.create_task(self._hear())

    async def _hear(self) -> None:
        while True:
            data = await self.queue.get()
            try:
                await self.on_message(data)
            except Exception as exc:  # noqa: BLE001 - as nats: the error callback hears it
                self.log.warning("callback_failed", subject=self.subject, error=repr(exc))

    async def unsubscribe(self) -> None:
        if self in self.broker.listeners:
            self.broker.listeners.remove(self)
        self.task.cancel()


@dataclass
class FailPlan:
    """Publishes on ``subject`` fail after ``after`` more succeed: ``times`` of them (None: all)."""

    subject: str
    after: int
    times: int | None

    def strikes(self, subject: str) -> bool:
        if not matches(self.subject, subject):
            return False
        if self.after > 0:
            self.after -= 1
            return False
        if self.times is None:
            return True
        self.times -= 1
        return self.times >= 0

    @property
    def left(self) -> bool:
        return self.times is None or self.times > 0


class MemoryBus:
    """One connection to a ``MemoryBroker``, with the interface of ``bus.bus.Bus``."""

    max_payload = 1024 * 1024  # nats-server's default max payload

    def __init__(self, broker: MemoryBroker, name: str, identity: Identity) -> None:
        self.broker, self.name = broker, name
        self.identity = identity
        self.user = identity.user  # as the real Bus's: the commands it publishes go on cmd.<user>.
        self.closed = False
        self.trace: list[tuple] = []  # ("publish", Published) | ("ack" | "term", seq) | ("nak", seq, delay)
        self.log = structlog.get_logger().bind(memory_bus=name)
        self._subs: list[Follower | Server | Listener] = []
        self._fail: FailPlan | None = None
        self.bucket_bytes: dict[str, int] = {}  # as the real Bus's (bucket sizes: not simulated)

    @property
    def reads(self) -> "MemoryBus":
        """What a client reads the streams with (``opsched.directreads.reads_for``): this bus itself."""
        return self

    @property
    def connected(self) -> bool:
        return not self.closed

    @property
    def published(self) -> list[Published]:
        return [entry[1] for entry in self.trace if entry[0] == "publish"]

    def fail_publish(self, times: int | None = None, *, subject: str = ">", after: int = 0) -> None:
        """Make the publishes on ``subject`` fail (nats' TimeoutError, as when no ack comes back): after
        ``after`` more have succeeded, the next ``times`` of them (None: every one from then on)."""
        self._fail = FailPlan(subject, after, times)

    @property
    def failing(self) -> bool:
        """Whether a publish failure is still to come."""
        return self._fail is not None and self._fail.left

    def _may_publish(self, subject: str) -> None:
        if not self.identity.may_publish(subject):
            raise NotPermitted(self.user, subject)

    def _may_subscribe(self, subject: str) -> None:
        if not self.identity.may_subscribe(subject):
            raise NotPermitted(self.user, subject)

    async def ensure_streams(self, limits: dict[str, Any] | None = None, *, align: bool = True) -> None:
        self._check_open()  # aligning: nothing drifts here
        for name in subjects.STREAMS:
            if name not in self.broker.streams:
                self._may_publish(f"$JS.API.STREAM.CREATE.{name}")
        self.broker.add_streams()  # limits by age and size: not simulated (tests keep little)

    async def ensure_cache_bucket(self, bucket: str, *, max_age_s: float | None = None) -> MemoryKV:
        self._check_open()
        if bucket not in self.broker.buckets:
            self._may_publish(f"$JS.API.STREAM.CREATE.{subjects.kv_stream(bucket)}")
        return self.broker.buckets.setdefault(bucket, MemoryKV())

    async def purge(self, stream: str, subject: str, *, before_seq: int | None = None, keep: int | None = None) -> None:
        self._check_open()
        self._may_publish(f"$JS.API.STREAM.PURGE.{stream}")
        self.broker.stream(stream).purge(subject, before_seq, keep)

    async def consumed_up_to(self, stream: str, durables: Collection[str]) -> int:
        self._check_open()
        self._may_publish(f"$JS.API.CONSUMER.LIST.{stream}")
        return self.broker.stream(stream).consumed_up_to(durables)

    async def last_stored(self, stream: str, subject: str) -> int:
        self._check_open()
        found = self.broker.stored(stream, subject)
        return found[-1].seq if found else 0

    async def last_message(self, stream: str, subject: str) -> Received | None:
        self._check_open()
        found = self.broker.stored(stream, subject)
        return Received(found[-1].subject, found[-1].data, dict(found[-1].headers), found[-1].seq, 0, None) \
            if found else None

    async def read_bucket(self, bucket: str) -> list[bytes]:
        self._check_open()
        kv = self.broker.buckets.get(bucket)
        return [e.value for e in kv.data.values() if e.value] if kv else []

    async def read_key(self, bucket: str, key: str) -> bytes | None:
        self._check_open()
        kv = self.broker.buckets.get(bucket)
        entry = kv.data.get(key) if kv else None
        return entry.value if entry else None

    publish = Bus.publish  # the runtime's own: Nats-Msg-Id, CloudEvents headers, an optional fence
    fence_holds = Bus.fence_holds

    async def publish_raw(self, subject: str, data: bytes, headers: dict[str, str]) -> PubAck:
        self._check_open()
        check_size(subject, data, headers, self.max_payload)  # as the runtime's: the server's limit, headers counted
        self._may_publish(subject)
        if self._fail is not None and self._fail.strikes(subject):
            raise NatsTimeout
        ack = self.broker.stream_for(subject).store(subject, data, headers)
        self.trace.append(("publish", Published(subject, data, dict(headers), ack.seq, bool(ack.duplicate))))
        return ack

    async def durable(self, durable: str, stream: str, filters: list[str], *,
                      max_deliver: int, ack_wait: float = 30.0) -> PullSubscription:
        """Create (or align) a durable pull consumer and bind to it. Connections share it by name."""
        self._check_open()
        self._may_publish(f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}")  # the call nats-py makes of it
        s = self.broker.stream(stream)
        consumer = s.consumers.get(durable)
        if consumer is None:
            consumer = s.consumers[durable] = Consumer(s, durable, filters, max_deliver, ack_wait)
            consumer.on_max_deliveries = functools.partial(self.broker.max_deliveries, stream, durable)
        else:
            consumer.configure(filters, max_deliver, ack_wait)
        return PullSubscription(consumer, self._settled, self._check_open)

    def _settled(self, kind: str, seq: int, delay: float | None) -> None:
        self._check_open()
        self.trace.append((kind, seq, delay) if kind == "nak" else (kind, seq))

    async def last_seq(self, stream: str) -> int:
        self._check_open()
        return self.broker.stream(stream).last_seq

    async def follow(self, stream: str, subject: str | Sequence[str], on_message: OnMessage, *,
                     headers: bool = False, from_seq: int = 1) -> Follower:
        """Deliver every message of ``subject`` (``headers`` too, if asked) from the start of ``stream`` (from
        ``from_seq``), then live."""
        self._check_open()
        follower = Follower(self.broker.stream(stream), subject, on_message, self.log, headers, from_seq)
        self._subs.append(follower)
        return follower

    replay = Bus.replay  # the runtime's own: ``follow`` until what was stored at the start is delivered

    async def serve(self, subject: str, answer: Answer, group: str) -> Server:
        self._check_open()
        self._may_subscribe(subject)
        server = Server(self.broker, subject, group, answer, self.log)
        self._subs.append(server)
        return server

    async def listen(self, subject: str, on_message: Callable[[bytes], Awaitable[None]], group: str) -> Listener:
        self._check_open()
        self._may_subscribe(subject)
        listener = Listener(self.broker, subject, group, on_message, self.log)
        self._subs.append(listener)
        return listener

    async def stored(self, stream: str, seq: int) -> Received | None:
        self._check_open()
        found = self.broker.stream(stream).messages.get(seq)
        if found is None:
            return None
        return Received(found.subject, found.data, dict(found.headers), seq, 0, None)

    async def request(self, subject: str, message: msgspec.Struct, timeout: float = 5.0) -> bytes:
        self._check_open()
        self._may_publish(subject)
        servers = self.broker.servers_for(subject)
        if not servers:
            raise NoRespondersError
        reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        for server in servers:
            server.queue.put_nowait((codec.encode(message), reply))
        try:
            return await asyncio.wait_for(reply, timeout)
        except asyncio.TimeoutError:
            raise NatsTimeout from None

    async def read_all(self, stream: str, subject: str, *, batch: int = 500) -> list[bytes]:
        """Every message of ``subject`` now in ``stream``, in order."""
        self._check_open()
        return [m.data for m in self.broker.stored(stream, subject)]

    async def close(self) -> None:
        """Stop this connection's subscriptions and servers; its unacked messages return at ack_wait."""
        if self.closed:
            return
        self.closed = True
        for sub in self._subs:
            await sub.unsubscribe()
        self._subs.clear()

    def _check_open(self) -> None:
        if self.closed:
            raise ConnectionClosedError


def memory_bus(name: str = "test", identity: Identity = OPEN) -> MemoryBus:
    """A connection to a fresh broker whose streams exist (as after ``ensure_streams``): anonymous and
    unrestricted (``OPEN``, a unit test's view of one component) unless another ``identity`` is given."""
    broker = MemoryBroker()
    broker.add_streams()
    return broker.connect(name, identity)
