"""The base class of every service, and the handler loop: fetch → decode → handle → publish the
returned events → ack.

A service is a subclass of ``Service``, the same anatomy in all four::

    class Cost(Service):
        name = "cost"
        estimates = Consumer(durable, stream, filters)          # a durable pull consumer

        async def start(self, bus): ...                         # before any consumer: replay, buckets
        def tasks(self): return [self.watch_file]              # long-running ``task(bus, stop)``

        @estimates.handles(OperationSubmitted)                  # a handler is a method
        async def estimate(self, event, ctx): return CostEstimated(...)

A handler returns the events that happened; it never publishes. Nothing is acked before the
events it produced are stored in JetStream. Malformed input is terminated, dead-lettered and
answered with an error event; the service keeps going.
"""
from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import msgspec
from nats.errors import TimeoutError as NatsTimeout

from proto import codec
from services.runtime import logging as oplog
from services.runtime.bus import Bus, Received
from services.runtime.clock import Clock, SystemClock
from services.runtime.deadletter import dead_letter
from services.runtime.errors import InvalidInput
from services.runtime.settings import Settings

Handler = Callable[[Any, "Context"], Awaitable[Any]]
Task = Callable[[Bus, asyncio.Event], Coroutine[Any, Any, None]]
Method = TypeVar("Method", bound=Callable[..., Awaitable[Any]])
NAK_BACKOFF_S = (0.5, 2.0, 5.0, 10.0)


@dataclass
class Context:
    service: str
    clock: Clock
    settings: Settings
    log: Any
    subject: str = ""
    num_delivered: int = 1


@dataclass
class Subscription:
    durable: str
    stream: str
    filters: list[str]
    decoder: Callable[[bytes], Any]
    handlers: dict[type, Handler] = field(default_factory=dict)


@dataclass
class Stats:
    handled: int = 0
    published: int = 0
    dead_lettered: int = 0
    retried: int = 0


class Consumer:
    """A durable pull consumer, declared on a service class: ``ops = Consumer(durable, stream, filters)``.
    Its handlers are methods, registered with ``@ops.handles(EventType, ...)``; every instance of the
    class consumes through its own ``Subscription``, the methods bound to it."""

    def __init__(self, durable: str, stream: str, filters: list[str],
                 decoder: Callable[[bytes], Any] = codec.decode) -> None:
        self.durable, self.stream, self.filters, self.decoder = durable, stream, list(filters), decoder
        self.methods: dict[type, Callable[..., Awaitable[Any]]] = {}

    def handles(self, *kinds: type) -> Callable[[Method], Method]:
        def register(method: Method) -> Method:
            for kind in kinds:
                if kind in self.methods:
                    raise TypeError(f"{self.durable}: {kind.__name__} is handled twice")
                self.methods[kind] = method
            return method
        return register

    def bind(self, service: "Service") -> Subscription:
        handlers: dict[type, Handler] = {kind: types.MethodType(method, service)
                                         for kind, method in self.methods.items()}
        return Subscription(self.durable, self.stream, self.filters, self.decoder, handlers)


class Service:
    """The base class of every service: ``name``, its ``Consumer``s and their handler methods, ``start``
    and ``tasks``. ``run`` serves them all until ``stop``."""

    name: ClassVar[str]

    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.log = oplog.get(self.name)
        self.subscriptions: list[Subscription] = [c.bind(self) for c in consumers_of(type(self))]
        self.stats = Stats()
        self.bus: Bus | None = None
        self.ready = asyncio.Event()

    async def start(self, bus: Bus) -> None:
        """Before any consumer is created: rebuild state by replay, open buckets, serve queries."""

    def tasks(self) -> list[Task]:
        """The long-running tasks ``task(bus, stop)`` served beside the consumers, until ``stop``."""
        return []

    async def run(self, bus: Bus, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set; then finish the message in hand and return (drain)."""
        self.bus = bus
        await bus.ensure_streams()
        await self.start(bus)
        subs = [(s, await bus.durable(s.durable, s.stream, s.filters, max_deliver=self.settings.max_deliver))
                for s in self.subscriptions]
        self.ready.set()
        self.log.info("service_started", consumers=[s.durable for s in self.subscriptions])
        tasks = [asyncio.create_task(self._loop(s, psub, stop)) for s, psub in subs]
        tasks += [asyncio.create_task(t(bus, stop)) for t in self.tasks()]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            self.log.info("service_stopped", **vars(self.stats))

    async def _loop(self, sub: Subscription, psub: Any, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                msgs = await psub.fetch(self.settings.fetch_batch, timeout=0.5)
            except (NatsTimeout, asyncio.TimeoutError):
                continue
            except Exception as exc:  # noqa: BLE001 - connection trouble: back off, reconnect is automatic
                self.log.warning("fetch_failed", error=repr(exc))
                await asyncio.sleep(0.5)
                continue
            for raw in msgs:
                await self.process(sub, _received(raw))

    async def process(self, sub: Subscription, msg: Received) -> None:
        """Handle one message completely: publish its events, then ack (or nak / dead-letter)."""
        assert self.bus is not None
        try:
            message = sub.decoder(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            await self._reject(msg, "malformed_message", f"cannot decode message on {msg.subject}: {exc}")
            return
        handler = sub.handlers.get(type(message))
        if handler is None:
            await msg.raw.ack()  # a type this consumer does not act on
            return
        await self._handle(handler, message, msg)

    async def _handle(self, handler: Handler, message: Any, msg: Received) -> None:
        op_id = getattr(message, "op_id", None)
        log = self.log.bind(op_id=op_id) if op_id else self.log
        ctx = Context(self.name, self.clock, self.settings, log, msg.subject, msg.num_delivered)
        try:
            events = _as_list(await handler(message, ctx))
            for event in events:
                await self.bus.publish(event)  # type: ignore[union-attr]
        except InvalidInput as exc:
            try:
                for event in exc.events:
                    await self.bus.publish(event)  # type: ignore[union-attr]
            except Exception as failure:  # noqa: BLE001 - not published: retry the message later
                await self._retry(msg, failure, log)
                return
            await self._reject(msg, exc.reason, exc.message, op_id=exc.op_id or op_id)
            return
        except Exception as exc:  # noqa: BLE001 - temporary: retry with backoff, then dead-letter
            await self._retry(msg, exc, log)
            return
        await msg.raw.ack()
        self.stats.handled += 1
        self.stats.published += len(events)

    async def _retry(self, msg: Received, exc: Exception, log: Any) -> None:
        if msg.num_delivered >= self.settings.max_deliver:
            await self._reject(msg, "handler_failed",
                               f"gave up after {msg.num_delivered} deliveries: {exc!r}")
            return
        delay = NAK_BACKOFF_S[min(msg.num_delivered - 1, len(NAK_BACKOFF_S) - 1)]
        log.warning("handler_failed_will_retry", error=repr(exc), delivery=msg.num_delivered, delay_s=delay)
        self.stats.retried += 1
        await msg.raw.nak(delay=delay)

    async def _reject(self, msg: Received, reason: str, message: str, op_id: str | None = None) -> None:
        assert self.bus is not None
        self.log.error("message_rejected", subject=msg.subject, reason=reason, error=message, op_id=op_id)
        try:
            await dead_letter(self.bus, self.clock, self.name, msg, reason=reason, message=message, op_id=op_id)
        except Exception as exc:  # noqa: BLE001 - could not store the copy: keep the message
            self.log.warning("dead_letter_failed", error=repr(exc))
            await msg.raw.nak(delay=1.0)
            return
        await msg.raw.term()
        self.stats.dead_lettered += 1


def consumers_of(cls: type) -> list[Consumer]:
    """The consumers declared on ``cls`` and its bases, in the order of declaration."""
    found: list[Consumer] = []
    for klass in reversed(cls.__mro__):
        for value in vars(klass).values():
            if isinstance(value, Consumer) and value not in found:
                found.append(value)
    return found


def _received(raw: Any) -> Received:
    md = raw.metadata
    return Received(raw.subject, raw.data, dict(raw.headers or {}), md.sequence.stream, md.num_delivered, raw)


def _as_list(result: Any) -> list:
    if result is None:
        return []
    if isinstance(result, Iterable) and not isinstance(result, msgspec.Struct):
        return list(result)
    return [result]
