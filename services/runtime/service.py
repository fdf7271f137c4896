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
events it produced are stored in JetStream. Kinds of failure, handled differently
(``bus.errors``):

- malformed input (or ``InvalidInput``) is terminated, dead-lettered and answered with an error event
  at once; the service keeps going;
- a dependency unavailable (``DependencyUnavailable``, or NATS itself failing a publish) is retried in
  place, with capped exponential backoff and jitter (``backoff``), for as long as it lasts: the message
  is kept ours (``in_progress`` resets its ack wait, so it never counts against max_deliver) and is never
  dead-lettered; readiness reports what the service waits for, since when (``waits``);
- a handler that bounds its own retries (the notifier's deliveries) raises ``RetryLater``: the events it carries
  (the attempt's record) are published, and the message is given back to be delivered after its delay (its
  consumer declared with ``max_deliver=-1``: time, not a count, bounds it);
- any other error (a bug) is redelivered with backoff, and after the last delivery dead-lettered with a
  ``handler_failed`` event about its op, which admission folds to end or retry the op.

A message whose last delivery nobody settled (the process died with it in hand) is dead-lettered the same
way, by whichever replica hears JetStream's max-deliveries advisory (``maxdeliveries``); one whose handling
died with the process twice is dead-lettered before it is handled a third time (``inhand``). Each handler loop
leaves signs of life (``liveness``): one stuck past ``OPSCHED_HANDLER_STUCK_S`` makes ``/healthz`` 503.
"""
from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, TypeVar

import msgspec
from nats.errors import TimeoutError as NatsTimeout

from opsched.bus import logging as oplog
from opsched.bus import rebuilding, tracing
from opsched.bus.bus import Bus, Fence, Received
from opsched.bus.errors import Fenced, InvalidInput, MessageTooLarge
from opsched.bus.refusals import NotPermitted
from opsched.proto import codec, permissions, subjects
from opsched.proto.reasons import DeadLetter, Reason, Refusal
from opsched.services.runtime import inbox, selfreport
from opsched.services.runtime.backoff import Backoff
from opsched.services.runtime.clock import Clock, SystemClock
from opsched.services.runtime.consumer import Consumer, Context, Handler, RetryLater, Subscription, consumers_of
from opsched.services.runtime.deadletter import dead_letter
from opsched.services.runtime.handling import as_list as _as_list
from opsched.services.runtime.handling import handler_failed as _handler_failed
from opsched.services.runtime.handling import quietly as _quietly
from opsched.services.runtime.handling import received as _received
from opsched.services.runtime.inhand import POISON, InHandRecords, Unrecorded, open_records, poisoned_text
from opsched.services.runtime.leadership import Leadership, first, holder_id
from opsched.services.runtime.liveness import HandlerLoops
from opsched.services.runtime.maxdeliveries import listen as listen_for_lost
from opsched.services.runtime.outages import Draining, WaitsOut
from opsched.services.runtime.settings import Settings
from opsched.services.runtime.stalls import Stalls
from opsched.services.runtime.standing_pull import EXPIRES_S, LED_EXPIRES_S, StandingPull
from opsched.services.runtime.waits import Waits
from opsched.services.runtime.window import Window, key_of

Task = Callable[[Bus, asyncio.Event], Coroutine[Any, Any, None]]
NAK_BACKOFF_S = (0.5, 2.0, 5.0, 10.0)
MAX_DELIVERIES = DeadLetter.MAX_DELIVERIES  # reasons of a dead letter (a handler that kept failing: Reason.HANDLER_FAILED)
MALFORMED = Refusal.MALFORMED_MESSAGE  # ... of a message that does not decode
T = TypeVar("T")
__all__ = ["Consumer", "Context", "Draining", "RetryLater", "Service", "Stats", "Task"]  # a service needs only this module


@dataclass
class Stats:
    handled: int = 0
    published: int = 0
    dead_lettered: int = 0
    retried: int = 0
    dependency_retries: int = 0  # tries again of a dependency found unavailable
    lost: int = 0  # messages whose last delivery nobody settled (max-deliveries advisories acted on)
    poisoned: int = 0  # messages dead-lettered unhandled: their handling died with the process too often
    inbox_garbage: int = 0  # messages on a consumer's delivery inbox that were no delivery of it: dropped (``inbox``)
    dead_letter_reasons: Counter[str] = field(default_factory=Counter)  # each with its error event, by reason
    # refused or malformed messages acked without a dead letter nor an error event (``refusal_text``), by reason
    unrecorded_reasons: Counter[str] = field(default_factory=Counter)
    pending: dict[str, int] = field(default_factory=dict)  # durable -> messages after the last one fetched


class Service(WaitsOut):
    """The base class of every service: ``name``, its ``Consumer``s and their handler methods, ``start``
    and ``tasks``. ``run`` serves them all until ``stop``."""

    name: ClassVar[str]
    # set by a service of which exactly one instance may act (admission): its consumers are fetched from only
    # while it leads, and what its handlers return is published behind its fence (``leadership``)
    leadership: Leadership | None = None
    in_order: ClassVar[bool] = False  # its handlers take one message at a time, in stream order (``window``)

    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.log = oplog.get(self.name)
        self.subscriptions: list[Subscription] = [c.bind(self) for c in consumers_of(type(self))]
        self.stats = Stats()
        self.bus: Bus | None = None
        self.ready = asyncio.Event()
        self.starting = "not started"  # the step ``run`` is in until ready: what a startup timeout names
        self.stopping = asyncio.Event()  # ``run``'s stop: a wait for a dependency ends when it is set
        self.waits = Waits()  # the dependencies its handler loops wait for now (readiness reports them)
        self.stalls = Stalls(settings.stall_window_s)  # what keeps it from progressing: refused publishes (readiness)
        self.backoff = Backoff(settings.dependency_backoff_base_s, settings.dependency_backoff_cap_s)
        self.handler_loops = HandlerLoops(self.clock.now)  # signs of life of its handler loops (liveness)
        self.in_hand: InHandRecords | Unrecorded = Unrecorded()  # the messages its loops hold, once ``run`` opened the bucket (inhand)
        self.tracer = tracing.tracer(self.name)  # None: tracing off (``tracing``), no header read, none added
        self.pulls: dict[str, Any] = {}  # durable -> its pull subscription, once ``run`` bound it

    async def start(self, bus: Bus) -> None:
        """Before any consumer is created: rebuild state by replay, open buckets, serve queries."""

    def tasks(self) -> list[Task]:
        """The long-running tasks ``task(bus, stop)`` served beside the consumers, until ``stop``."""
        return []

    def too_large(self, message: Any, msg: Received, exc: MessageTooLarge) -> list:
        """The events that end the op ``message`` concerns when an event its handler returned is over the
        server's max payload: here a ``handler_failed`` about it (admission ends or retries the op, as for a
        handler that gave up); a service that knows better overrides it (admission rejects a submit)."""
        failed = _handler_failed(self.name, msg.subject, message, str(exc), self.clock)
        return [failed] if failed is not None else []

    def arrived(self, msg: Received, message: Any | None) -> None:
        """A message taken off the stream, before it is handled (``message``: decoded; None: it does not decode).
        Nothing here; admission charges its requester's command rate (``services.admission.command_rate``)."""

    def refusal_text(self, msg: Received, reason: str, text: str) -> str | None:
        """The text the dead letter and error event of a refused (``InvalidInput``) or malformed message carry;
        None: it is acked without either, counted by reason (``unrecorded_reasons``). Here ``text``, always; a
        service bounding one sender's refusals overrides it (admission, over a requester's command rate)."""
        return text

    def liveness(self) -> dict[str, str]:
        """What makes this process not alive (``/healthz`` 503 names it): what -> why; empty: alive. Here,
        its stuck handler loops; a service adds its own facts (``super().liveness() | {...}``)."""
        return self.handler_loops.stuck(self.settings.handler_stuck_s)

    async def _health(self, data: bytes) -> bytes:
        """The answer to ``opsched.query.health.<name>`` (``selfreport``): what its /readyz would say."""
        return selfreport.answer(self, holder_id())

    def metric_families(self) -> list[Any]:
        """This service's own Prometheus metric families, read at a scrape (``services.runtime.metrics``)."""
        return []

    async def run(self, bus: Bus, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set; then finish the message in hand and return (drain)."""
        self.bus, self.stopping = bus, stop
        bus.bucket_bytes = self.settings.bucket_bytes()  # the buckets it creates are bounded
        self.starting = "creating or checking the streams"
        await bus.ensure_streams(self.settings.stream_limits(), align=self.name == permissions.STREAM_KEEPER)
        self.starting = "rebuilding its state from the streams"
        await self.start(bus)
        self.starting = "opening its in-hand records"
        self.in_hand = await open_records(bus, holder_id(), self.settings.poison_crashes)
        self.starting = "serving its health query"
        await bus.serve(subjects.health_query(self.name), self._health, group=f"{self.name}-health")
        self.starting = "creating its consumers"
        subs = [(s, await bus.durable(s.durable, s.stream, s.filters,
                                      max_deliver=s.max_deliver or self.settings.max_deliver,
                                      ack_wait=self.settings.ack_wait_s)) for s in self.subscriptions]
        for s, psub in subs:  # before any fetch: what lands on its inbox and is no delivery of it is dropped
            inbox.screen(psub, s.stream, s.durable, functools.partial(self._garbage, s.durable))
            self.pulls[s.durable] = psub
        self.starting = "listening for lost-message advisories"
        advised = await listen_for_lost(bus, [(s.durable, s.stream) for s in self.subscriptions], self._lost,
                                        lambda call: self.until_available(call, None, self.log), self.log)
        self.starting = "ready"
        self.ready.set()
        self.log.info("service_started", consumers=[s.durable for s in self.subscriptions])
        tasks = [asyncio.create_task(self._loop(s, psub, stop)) for s, psub in subs]
        tasks += [asyncio.create_task(t(bus, stop)) for t in self.tasks()]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            for sub in advised:
                await _quietly(sub.unsubscribe())
            rebuilding.thaw()  # what its replays froze is collected again
            self.log.info("service_stopped", **vars(self.stats))

    async def _loop(self, sub: Subscription, psub: Any, stop: asyncio.Event) -> None:
        window = Window(self.window_size())
        pull = StandingPull(psub, self.settings.fetch_batch,
                            LED_EXPIRES_S if self.leadership is not None else EXPIRES_S, stop)
        try:
            while not stop.is_set():
                self.handler_loops.beat(sub.durable)
                if not await self._my_turn(stop):
                    await pull.give_back()  # what a request of its leading days still brought: the leader's
                    continue
                try:
                    fetched = await pull.take(timeout=0.5)
                except (NatsTimeout, asyncio.TimeoutError):
                    fetched = []
                except Exception as exc:  # noqa: BLE001 - connection trouble: back off, reconnect is automatic
                    self.log.warning("fetch_failed", error=f"{exc!r} {exc}")
                    await asyncio.sleep(0.5)
                    continue
                msgs = self._deliveries(sub, fetched)
                self.stats.pending[sub.durable] = msgs[-1].raw.metadata.num_pending if msgs else 0
                for msg in msgs:
                    await window.add(key_of(msg.subject), functools.partial(self.process, sub, msg))
            await window.drain()  # stopping: finish what is in hand
        finally:
            window.cancel()
            await pull.close()

    def _deliveries(self, sub: Subscription, fetched: list[Any]) -> list[Received]:
        """The fetched messages that are deliveries of ``sub``'s consumer; anything else is dropped (``inbox``)."""
        msgs = []
        for raw in fetched:
            why = inbox.garbage(raw, sub.stream, sub.durable)
            if why is None:
                msgs.append(_received(raw, sub.durable))
            else:
                self._garbage(sub.durable, raw, why)
        return msgs

    def _garbage(self, durable: str, raw: Any, why: str) -> None:
        """A message on ``durable``'s inbox that is no delivery of it: counted, logged (the first ones, then
        one in ``inbox.LOG_EVERY``: a flood of them floods no log), never handled nor answered."""
        self.stats.inbox_garbage += 1
        n = self.stats.inbox_garbage
        if n <= inbox.LOG_FIRST or n % inbox.LOG_EVERY == 0:
            self.log.warning("inbox_garbage_dropped", durable=durable, subject=str(getattr(raw, "subject", ""))[:200],
                             why=why, dropped=n)

    def window_size(self) -> int:
        """How many messages a handler loop handles at once (``window``): ``OPSCHED_HANDLER_WINDOW``, or 1 for a
        service whose handlers need the stream's order (``in_order``) or that one instance leads."""
        return 1 if self.in_order or self.leadership is not None else self.settings.handler_window

    async def process(self, sub: Subscription, msg: Received) -> None:
        """Handle one message completely: publish its events, then ack (or nak / dead-letter). A redelivered one
        whose earlier deliveries died in hand too often (``inhand``) is dead-lettered unhandled."""
        msg = msg if msg.durable == sub.durable else replace(msg, durable=sub.durable)
        with self.handler_loops.handling(sub.durable, msg.subject):
            try:
                died = await self.until_available(lambda: self.in_hand.take(msg), msg, self.log)
            except Draining:
                return
            if died is not None:  # its record stays: given back (the dead letter not stored), it is poison again
                self.stats.poisoned += 1
                await self._abandon(sub.durable, msg, poisoned_text(died), POISON)
                return
            await self._process(sub, msg)

    async def _process(self, sub: Subscription, msg: Received) -> None:
        assert self.bus is not None
        try:
            message = sub.decoder(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.arrived(msg, None)
            await self._malformed(msg, f"cannot decode message on {msg.subject}: {exc}")
            return
        handler = sub.handlers.get(type(message))
        if handler is None:
            await msg.raw.ack()  # a type this consumer does not act on
            return
        if self.leadership is not None and not self.leadership.deciding():
            await self.give_back(msg)  # fetched as the leader, no longer one: the leader takes it
            return
        self.arrived(msg, message)
        if self.tracer is None:
            await self._handle(handler, message, msg)
            return
        with tracing.consuming(self.tracer, msg, message):  # its events carry this span's context
            await self._handle(handler, message, msg)

    async def _handle(self, handler: Handler, message: Any, msg: Received) -> None:
        op_id = getattr(message, "op_id", None)
        log = self.log.bind(op_id=op_id) if op_id else self.log
        ctx = Context(self.name, self.clock, self.settings, log, msg.subject, msg.num_delivered, msg.stream_seq)
        fence = self.leadership.fence if self.leadership is not None else None  # the state it is judged on
        try:
            events = _as_list(await self.until_available(lambda: handler(message, ctx), msg, log))
            await self._publish_all(events, msg, log, fence)
        except Draining:
            return
        except Fenced as exc:
            await self._fenced(exc, msg, log)
            return
        except RetryLater as later:  # the handler bounds its own retries: its record published, the message back
            await self._later(later, msg, log, fence)
            return
        except MessageTooLarge as exc:  # an event it returned: the op ends, the message is dead-lettered
            refused = InvalidInput(exc.reason, exc.message, op_id=op_id, events=self.too_large(message, msg, exc))
            await self._invalid(refused, msg, log, op_id, fence)
            return
        except InvalidInput as exc:
            await self._invalid(exc, msg, log, op_id, fence)
            return
        except NotPermitted as exc:  # a bug or a misconfiguration, not an outage: retrying changes nothing
            await self._refused(exc, msg, log, message)
            return
        except Exception as exc:  # noqa: BLE001 - a bug: retry with backoff, then dead-letter
            await self._retry(msg, exc, log, message)
            return
        await msg.raw.ack()
        self.stats.handled += 1
        self.stats.published += len(events)

    async def _later(self, later: RetryLater, msg: Received, log: Any, fence: Fence | None) -> None:
        try:
            await self._publish_all(later.events, msg, log, fence)
        except Draining:
            return
        except Exception as exc:  # noqa: BLE001 - not published: the same delivery is tried again soon
            log.warning("retry_record_not_published", error=f"{exc!r} {exc}")
        self.stats.retried += 1
        await self.give_back(msg, delay=later.delay_s)

    async def _publish_all(self, events: list, msg: Received, log: Any, fence: Fence | None = None) -> None:
        """Publish a message's events: those of one op one after the other, in their order; different ops' at
        once (an admission cycle admits many)."""
        assert self.bus is not None
        bus = self.bus

        async def publish(group: list) -> None:
            for event in group:
                await self.until_available(functools.partial(bus.publish, event, fence=fence), msg, log)
        groups = _by_op(events)
        if len(groups) == 1:
            await publish(groups[0])
            return
        results = await asyncio.gather(*(publish(g) for g in groups), return_exceptions=True)
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if failure is not None:
            raise failure

    async def _invalid(self, exc: InvalidInput, msg: Received, log: Any, op_id: str | None,
                       fence: Fence | None) -> None:
        try:
            await self._publish_all(exc.events, msg, log, fence)
        except Draining:
            return
        except Fenced as refused:
            await self._fenced(refused, msg, log)
            return
        except NotPermitted as refused:
            await self._refused(refused, msg, log, None)
            return
        except Exception as failure:  # noqa: BLE001 - not published: retry the message later
            await self._retry(msg, failure, log, None)
            return
        await self._refuse(msg, exc.reason, exc.message, op_id=exc.op_id or op_id)

    async def events_for_malformed(self, msg: Received, error: str) -> list[Any]:
        """The events that follow a message this service cannot decode, besides the error event and the dead
        letter (e.g. admission rejects the op a refused submit names). Published with a message id from the
        stream sequence (``subjects.malformed_msg_id``), so a redelivery publishes nothing twice. None here."""
        return []

    async def _malformed(self, msg: Received, error: str) -> None:
        assert self.bus is not None
        bus, fence = self.bus, self.leadership.fence if self.leadership is not None else None
        try:
            for event in await self.events_for_malformed(msg, error):
                msg_id = subjects.malformed_msg_id(self.name, msg.stream_seq, codec.type_of(event))
                await self.until_available(functools.partial(bus.publish, event, msg_id=msg_id, fence=fence),
                                           msg, self.log)
        except Draining:
            return
        except Fenced as exc:
            await self._fenced(exc, msg, self.log)
            return
        except Exception as exc:  # noqa: BLE001 - not published: keep the message, try again later
            self.log.warning("malformed_events_not_published", error=f"{exc!r} {exc}")
            await self.give_back(msg, delay=1.0)
            return
        await self._refuse(msg, MALFORMED, error)

    async def _refuse(self, msg: Received, reason: str, text: str, op_id: str | None = None) -> None:
        """A refused or malformed message: dead-lettered with its error event, with the text ``refusal_text``
        gives it; or, without one, acked unrecorded."""
        recorded = self.refusal_text(msg, reason, text)
        if recorded is None:
            await self._unrecorded(msg, reason)
        else:
            await self._reject(msg, reason, recorded, op_id=op_id)

    async def _unrecorded(self, msg: Received, reason: str) -> None:
        """A refused or malformed message neither dead-lettered nor answered (``refusal_text``): acked, counted."""
        await msg.raw.term()
        self.stats.unrecorded_reasons[reason] += 1

    # ---- leadership: only the leader consumes; a publish refused by its fence ends its turn -----------
    async def _my_turn(self, stop: asyncio.Event) -> bool:
        """Whether this instance may fetch now; a standby waits (up to half a second, or until the service stops)
        for its turn."""
        if self.leadership is None or self.leadership.deciding():
            return True
        if stop.is_set():
            return False
        try:
            await asyncio.wait_for(first(self.leadership.leading.wait(), stop.wait()), timeout=0.5)
        except asyncio.TimeoutError:
            return False
        return self.leadership.deciding()

    async def _fenced(self, exc: Fenced, msg: Received, log: Any) -> None:
        """Another instance claimed the role since this message was judged: give it back undone."""
        log.warning("publish_fenced", subject=msg.subject, error=str(exc))
        if self.leadership is not None:
            self.leadership.refused()
        await self.give_back(msg)

    # ---- a bug: redeliver with backoff, then dead-letter and say so about the op --------------------
    async def _retry(self, msg: Received, exc: Exception, log: Any, message: Any) -> None:
        if msg.num_delivered >= self.settings.max_deliver:
            await self._give_up(msg, f"gave up after {msg.num_delivered} deliveries: {exc!r}", log, message)
            return
        tracing.failed(f"{exc!r}")
        delay = NAK_BACKOFF_S[min(msg.num_delivered - 1, len(NAK_BACKOFF_S) - 1)]
        log.warning("handler_failed_will_retry", error=f"{exc!r} {exc}", delivery=msg.num_delivered, delay_s=delay)
        self.stats.retried += 1
        await self.give_back(msg, delay=delay)

    async def _refused(self, exc: NotPermitted, msg: Received, log: Any, message: Any) -> None:
        """The server refused an event this message's handler returned (its user's permissions): given up at once,
        as a handler that kept failing is (``handler_failed``: the op ends, its quota is released), and reported
        by readiness until the refusals stop (``stalls``)."""
        self.refused(exc, log)
        await self._give_up(msg, f"its events cannot be published: {exc}", log, message)

    def refused(self, exc: NotPermitted, log: Any = None) -> None:
        """The server refused this service a publish: logged, and kept for readiness (``stalls``)."""
        (log or self.log).error("publish_refused", subject=exc.subject, error=str(exc))
        self.stalls.refused(exc.subject, str(exc), self.clock.now())

    async def _give_up(self, msg: Received, text: str, log: Any, message: Any, reason: str = Reason.HANDLER_FAILED) -> None:
        """The last delivery failed: a ``handler_failed`` about the op (if the message names one), then
        the dead-letter copy and the error event."""
        failed = _handler_failed(self.name, msg.subject, message, text, self.clock)
        try:
            if failed is not None:
                await self._publish_all([failed], msg, log)
        except Draining:
            return
        except NotPermitted as exc:  # not even that: the dead letter and error event still say what happened
            self.refused(exc, log)
        await self._reject(msg, reason, text, op_id=failed.op_id if failed else None)

    async def _lost(self, durable: str, msg: Received) -> None:
        """JetStream stopped delivering ``msg`` unsettled (``maxdeliveries``): dead-letter it as ``_give_up``."""
        self.stats.lost += 1
        text = (f"no delivery of {msg.num_delivered} was settled (the process holding it died, or gave it "
                "back on its last delivery)")
        await self._abandon(durable, msg, text, MAX_DELIVERIES)

    async def _abandon(self, durable: str, msg: Received, text: str, reason: str) -> None:
        """Dead-letter ``msg`` unhandled, as ``_give_up`` (a ``handler_failed`` about the op it names)."""
        sub = next(s for s in self.subscriptions if s.durable == durable)
        try:
            message = sub.decoder(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            message = None
        await self._give_up(msg, text, self.log, message, reason=reason)

    async def _reject(self, msg: Received, reason: str, message: str, op_id: str | None = None) -> None:
        assert self.bus is not None
        bus = self.bus
        self.log.error("message_rejected", subject=msg.subject, reason=reason, error=message, op_id=op_id)
        tracing.failed(f"{reason}: {message}")
        try:
            await self.until_available(lambda: dead_letter(bus, self.clock, self.name, msg, reason=reason,
                                                           message=message, op_id=op_id), msg, self.log)
        except Draining:
            return
        except Exception as exc:  # noqa: BLE001 - could not store the copy: keep the message
            self.log.warning("dead_letter_failed", error=f"{exc!r} {exc}")
            await self.give_back(msg, delay=1.0)
            return
        await msg.raw.term()
        self.stats.dead_lettered += 1
        self.stats.dead_letter_reasons[reason] += 1


def _by_op(events: list) -> list[list]:
    """``events`` grouped by the op they are about (in their order within each group; no op: its own group)."""
    groups: dict[Any, list] = {}
    for i, event in enumerate(events):
        groups.setdefault(getattr(event, "op_id", None) or i, []).append(event)
    return list(groups.values())
