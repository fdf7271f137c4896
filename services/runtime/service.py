"""The handler loop: fetch → decode → handle → publish the returned events → ack.

A handler returns the events that happened; it never publishes. Nothing is acked before the
events it produced are stored in JetStream. Malformed input is terminated, dead-lettered and
answered with an error event; the service keeps going.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

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


class Service:
    def __init__(self, name: str, settings: Settings, clock: Clock | None = None) -> None:
        self.name = name
        self.settings = settings
        self.clock = clock or SystemClock()
        self.log = oplog.get(name)
        self.subscriptions: list[Subscription] = []
        self.stats = Stats()
        self.bus: Bus | None = None
        self.ready = asyncio.Event()
        self.extra_tasks: list[Callable[[Bus, asyncio.Event], Coroutine[Any, Any, None]]] = []
        self.on_start: list[Callable[[Bus], Awaitable[None]]] = []

    def consume(self, durable: str, stream: str, filters: list[str],
                decoder: Callable[[bytes], Any] = codec.decode) -> Subscription:
        sub = Subscription(durable, stream, filters, decoder)
        self.subscriptions.append(sub)
        return sub

    def on(self, sub: Subscription, *types: type) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            for t in types:
                sub.handlers[t] = fn
            return fn
        return register

    async def run(self, bus: Bus, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set; then finish the message in hand and return (drain)."""
        self.bus = bus
        await bus.ensure_streams()
        for hook in self.on_start:
            await hook(bus)
        subs = [(s, await bus.durable(s.durable, s.stream, s.filters, max_deliver=self.settings.max_deliver))
                for s in self.subscriptions]
        self.ready.set()
        self.log.info("service_started", consumers=[s.durable for s in self.subscriptions])
        tasks = [asyncio.create_task(self._loop(s, psub, stop)) for s, psub in subs]
        tasks += [asyncio.create_task(t(bus, stop)) for t in self.extra_tasks]
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


def _received(raw: Any) -> Received:
    md = raw.metadata
    return Received(raw.subject, raw.data, dict(raw.headers or {}), md.sequence.stream, md.num_delivered, raw)


def _as_list(result: Any) -> list:
    if result is None:
        return []
    if isinstance(result, Iterable) and not isinstance(result, msgspec.Struct):
        return list(result)
    return [result]
