"""The handler loop: decode → handle → publish → ack; bad input dead-lettered; failures retried with backoff.
And the fake clock every time-dependent test relies on."""
from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from opsched.bus.bus import Received
from opsched.bus.errors import InvalidInput
from opsched.proto import codec, subjects
from opsched.proto.events import CostEstimated, ErrorRaised, OperationSubmitted
from opsched.services.runtime.service import NAK_BACKOFF_S, Context, Service, Subscription
from opsched.services.runtime.settings import Settings
from tests.builders import T0, cost_estimated, op, stop, submitted, t
from tests.builders.bus import MemoryBus, memory_bus
from tests.builders.clock import FakeClock

SERVICE = "cost"
MAX_DELIVER = 3


@pytest.fixture
def bus() -> MemoryBus:
    return memory_bus(SERVICE)


@pytest.fixture
def journal(bus) -> list[tuple]:
    """What the service did on its bus connection, in order: publishes, then ack / nak / term."""
    return bus.trace


def kinds(journal: list[tuple]) -> list[str]:
    return [entry[0] for entry in journal]


def published(journal: list[tuple]) -> list:
    return [codec.decode(entry[1].data) for entry in journal if entry[0] == "publish"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


class Probe(Service):
    name = SERVICE


@pytest.fixture
def service(bus, clock) -> Service:
    svc = Probe(Settings(max_deliver=MAX_DELIVER), clock)
    svc.bus = bus  # type: ignore[assignment]
    return svc


@pytest.fixture
def sub(service) -> Subscription:
    """A subscription whose handlers each test sets with ``@on(sub, Type)`` (a service class declares
    them with ``Consumer.handles``; see test_service_anatomy)."""
    subscription = Subscription("test-durable", subjects.OPS_STREAM, [subjects.OPS_ALL], codec.decode)
    service.subscriptions.append(subscription)
    return subscription


def on(sub: Subscription, *kinds: type):
    def register(fn):
        for kind in kinds:
            sub.handlers[kind] = fn
        return fn
    return register


async def received(bus: MemoryBus, data: bytes, *, delivered: int = 1,
                   subject: str = "ops.submitted.op-1") -> Received:
    """``data`` published on ``subject`` and fetched by a durable consumer, on its ``delivered``-th
    delivery (the earlier ones nak'd); the journal starts after it."""
    await bus.publish_raw(subject, data, {"Nats-Msg-Id": f"input-{await bus.last_seq(subjects.OPS_STREAM)}"})
    pull = await bus.durable("test-input", subjects.OPS_STREAM, [subject], max_deliver=MAX_DELIVER)
    for _ in range(delivered - 1):
        [early] = await pull.fetch(1, timeout=1)
        await early.nak()
    [raw] = await pull.fetch(1, timeout=1)
    bus.trace.clear()
    md = raw.metadata
    return Received(raw.subject, raw.data, dict(raw.headers), md.sequence.stream, md.num_delivered, raw)


SUBMITTED = submitted(op("train").build(), op_id="op-1")


# ---- the happy path ---------------------------------------------------------------------------

async def test_the_handler_result_is_published_and_then_the_message_is_acked(service, sub, bus, journal):
    seen: list[tuple] = []

    @on(sub, OperationSubmitted)
    async def handle(event, ctx: Context):
        seen.append((event, ctx.service, ctx.subject, ctx.num_delivered, ctx.clock.now()))
        return cost_estimated(event.op_id, at=ctx.clock.now())

    msg = await received(bus, codec.encode(SUBMITTED), delivered=2)
    await service.process(sub, msg)
    assert seen == [(SUBMITTED, SERVICE, "ops.submitted.op-1", 2, T0)]
    assert kinds(journal) == ["publish", "ack"] and journal[1] == ("ack", msg.stream_seq)  # published, then acked
    assert published(journal) == [cost_estimated("op-1", at=T0)]
    assert (service.stats.handled, service.stats.published) == (1, 1)


async def test_every_returned_event_is_published_before_the_ack(service, sub, bus, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        return [cost_estimated("op-1"), cost_estimated("op-2")]

    await service.process(sub, await received(bus, codec.encode(SUBMITTED)))
    assert kinds(journal) == ["publish", "publish", "ack"]
    assert [e.op_id for e in published(journal)] == ["op-1", "op-2"]


async def test_a_handler_that_returns_nothing_is_acked(service, sub, bus, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        return None

    await service.process(sub, await received(bus, codec.encode(SUBMITTED)))
    assert kinds(journal) == ["ack"]


async def test_one_handler_may_serve_several_types(service, sub, bus):
    types: list[str] = []

    @on(sub, OperationSubmitted, CostEstimated)
    async def handle(message, ctx):
        types.append(type(message).__name__)

    await service.process(sub, await received(bus, codec.encode(SUBMITTED)))
    await service.process(sub, await received(bus, codec.encode(cost_estimated())))
    assert types == ["OperationSubmitted", "CostEstimated"]


async def test_a_message_type_without_a_handler_is_acked_without_publishing(service, sub, bus, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise AssertionError("not for this type")

    await service.process(sub, await received(bus, codec.encode(stop("op-1"))))
    assert kinds(journal) == ["ack"]
    assert service.stats.handled == 0


# ---- bad input --------------------------------------------------------------------------------

def assert_dead_lettered(journal: list[tuple], msg: Received, reason: str, *, op_id: str) -> ErrorRaised:
    assert kinds(journal) == ["publish", "publish", "term"]  # the copy, the error event; never ack
    copy, event = journal[0][1], journal[1][1]
    assert copy.subject == subjects.dead_letter(SERVICE) == f"dlq.{SERVICE}"
    assert copy.data == msg.data
    assert copy.headers["Opsched-Original-Subject"] == "ops.submitted.op-1"
    assert copy.headers["Opsched-Error-Reason"] == reason
    assert copy.msg_id == f"dlq.{SERVICE}.test-durable.{msg.stream_seq}"
    error = codec.decode(event.data)
    assert isinstance(error, ErrorRaised)
    assert (error.op_id, error.service, error.subject, error.reason) == (op_id, SERVICE, "ops.submitted.op-1", reason)
    assert event.msg_id == f"error.{SERVICE}.test-durable.{msg.stream_seq}"
    assert journal[2] == ("term", msg.stream_seq)
    return error


@pytest.mark.parametrize("data", [b"{not json", b"", json.dumps({"type": "submitted", "opId": "op-1"}).encode(),
                                  json.dumps({"type": "no-such-type", "opId": "op-1"}).encode()],
                         ids=["malformed json", "empty", "a submitted event without its fields", "an unknown type"])
async def test_a_message_that_does_not_decode_is_dead_lettered_with_an_error_event(service, sub, bus, journal, data):
    called: list = []

    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        called.append(event)

    msg = await received(bus, data)
    await service.process(sub, msg)
    op_id = "op-1" if data.startswith(b"{\"") else "-"
    error = assert_dead_lettered(journal, msg, "malformed_message", op_id=op_id)
    assert error.payload == data[:200].decode()
    assert error.at == T0
    assert called == [] and service.stats.dead_lettered == 1


async def test_invalid_input_from_a_handler_is_dead_lettered_at_once(service, sub, bus, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise InvalidInput("forbidden_pod_spec", "privileged: true is refused")

    msg = await received(bus, codec.encode(SUBMITTED), delivered=1)
    await service.process(sub, msg)
    error = assert_dead_lettered(journal, msg, "forbidden_pod_spec", op_id="op-1")
    assert error.message == "privileged: true is refused"


async def test_two_consumers_of_one_service_giving_up_the_same_message_keep_a_dead_letter_each(service, bus):
    """As two durables of one service that read the same subject: neither copy is deduplicated away."""
    subs = [Subscription(durable, subjects.OPS_STREAM, [subjects.OPS_ALL], codec.decode)
            for durable in (subjects.COST_ESTIMATOR, subjects.COST_LEDGER)]
    msg = await received(bus, b"{not json")
    for sub in subs:
        service.subscriptions.append(sub)
        await service.process(sub, msg)
    copies = bus.broker.stored(subjects.DLQ_STREAM)
    assert sorted(c.headers["Nats-Msg-Id"] for c in copies) == sorted(
        f"dlq.{SERVICE}.{durable}.{msg.stream_seq}" for durable in (subjects.COST_ESTIMATOR, subjects.COST_LEDGER))
    errors = [m for m in bus.broker.stored(subjects.OPS_STREAM)
              if m.data != msg.data and isinstance(codec.decode(m.data), ErrorRaised)]
    assert len(errors) == 2 and service.stats.dead_lettered == 2


async def test_invalid_input_may_name_another_op(service, sub, bus, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise InvalidInput("unknown_op", "no such op", op_id="other")

    await service.process(sub, await received(bus, codec.encode(SUBMITTED)))
    assert published(journal)[1].op_id == "other"


# ---- temporary failures -----------------------------------------------------------------------

@pytest.mark.parametrize("delivered", range(1, MAX_DELIVER))
async def test_a_failing_handler_is_retried_with_backoff_before_the_last_delivery(service, sub, bus, journal,
                                                                                   delivered):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise RuntimeError("database is down")

    msg = await received(bus, codec.encode(SUBMITTED), delivered=delivered)
    await service.process(sub, msg)
    assert journal == [("nak", msg.stream_seq, NAK_BACKOFF_S[delivered - 1])]
    assert service.stats.retried == 1


async def test_a_failing_handler_waits_longer_at_each_delivery_then_at_the_longest(bus, clock):
    """What the service naks with, delivery after delivery (not the constant read back): a first wait above 0,
    each longer than the last, then the longest for every delivery after the table's end."""
    service = Probe(Settings(max_deliver=len(NAK_BACKOFF_S) + 3), clock)
    service.bus = bus  # type: ignore[assignment]
    sub = Subscription("test-durable", subjects.OPS_STREAM, [subjects.OPS_ALL], codec.decode)
    service.subscriptions.append(sub)

    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise RuntimeError("database is down")

    msg = await received(bus, codec.encode(SUBMITTED))
    delays = []
    for delivered in range(1, len(NAK_BACKOFF_S) + 3):
        bus.trace.clear()
        await service.process(sub, dataclasses.replace(msg, num_delivered=delivered))
        [(kind, _, delay)] = bus.trace
        assert kind == "nak"
        delays.append(delay)
    growing, after = delays[:len(NAK_BACKOFF_S)], delays[len(NAK_BACKOFF_S):]
    assert growing[0] > 0 and all(a < b for a, b in zip(growing, growing[1:])), delays
    assert after == [growing[-1]] * len(after), delays


async def test_a_failing_handler_is_dead_lettered_on_the_last_delivery(service, sub, bus, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise RuntimeError("database is down")

    msg = await received(bus, codec.encode(SUBMITTED), delivered=MAX_DELIVER)
    await service.process(sub, msg)
    assert journal[0][1].subject == "ops.handler_failed.op-1"  # first what it means for the op
    error = assert_dead_lettered(journal[1:], msg, "handler_failed", op_id="op-1")
    assert "database is down" in error.message and f"{MAX_DELIVER} deliveries" in error.message


# ---- FakeClock --------------------------------------------------------------------------------

async def settle() -> None:
    """Let ready tasks run (yields to the loop; no time passes)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_fake_clock_sleep_completes_only_after_advance_passes_the_deadline():
    clock = FakeClock(T0)
    sleeper = asyncio.create_task(clock.sleep(10))
    await settle()
    assert not sleeper.done()
    clock.advance(9.5)
    await settle()
    assert not sleeper.done()
    clock.advance(0.5)
    await settle()
    assert sleeper.done()
    assert clock.now() == t(10)


async def test_fake_clock_wakes_only_the_sleepers_that_are_due():
    clock = FakeClock(T0)
    woke: list[int] = []

    async def nap(seconds: int) -> None:
        await clock.sleep(seconds)
        woke.append(seconds)

    tasks = [asyncio.create_task(nap(s)) for s in (30, 5, 10)]
    await settle()
    clock.advance(12)
    await settle()
    assert sorted(woke) == [5, 10]
    clock.advance(100)
    await settle()
    assert sorted(woke) == [5, 10, 30]
    await asyncio.gather(*tasks)


def test_fake_clock_time_moves_only_when_told():
    clock = FakeClock(T0)
    assert clock.now() == clock.now() == T0
    clock.advance(1.5)
    assert clock.now() == t(1.5)


def test_fake_clock_starts_at_a_fixed_aware_time_by_default():
    now = FakeClock().now()
    assert now.tzinfo is not None and now == FakeClock().now()
