"""The handler loop: decode → handle → publish → ack; bad input dead-lettered; failures retried with backoff.
And the fake clock every time-dependent test relies on."""
from __future__ import annotations

import asyncio
import json

import pytest

from proto import codec, subjects
from proto.events import CostEstimated, ErrorRaised, OperationSubmitted
from services.runtime.bus import Received
from services.runtime.errors import InvalidInput
from services.runtime.service import NAK_BACKOFF_S, Context, Service, Subscription
from services.runtime.settings import Settings
from tests.builders import T0, cost_estimated, op, stop, submitted, t
from tests.builders.clock import FakeClock

SERVICE = "cost"
MAX_DELIVER = 3


class Journal(list):
    """Everything the fake bus and the fake message saw, in order."""


class FakeMsg:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def ack(self) -> None:
        self.journal.append(("ack",))

    async def nak(self, delay: float | None = None) -> None:
        self.journal.append(("nak", delay))

    async def term(self) -> None:
        self.journal.append(("term",))


class FakeBus:
    def __init__(self, journal: Journal, fail_publish: bool = False) -> None:
        self.journal = journal
        self.fail_publish = fail_publish

    async def publish(self, message, *, msg_id=None, subject=None, headers=None):
        if self.fail_publish:
            raise ConnectionError("nats: timeout")
        self.journal.append(("publish", message, msg_id))

    async def publish_raw(self, subject, data, headers):
        self.journal.append(("publish_raw", subject, data, headers))


def kinds(journal: Journal) -> list[str]:
    return [entry[0] for entry in journal]


@pytest.fixture
def journal() -> Journal:
    return Journal()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


class Probe(Service):
    name = SERVICE


@pytest.fixture
def service(journal, clock) -> Service:
    svc = Probe(Settings(max_deliver=MAX_DELIVER), clock)
    svc.bus = FakeBus(journal)  # type: ignore[assignment]
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


def received(journal: Journal, data: bytes, *, delivered: int = 1, seq: int = 7,
             subject: str = "ops.submitted.op-1") -> Received:
    return Received(subject=subject, data=data, headers={}, stream_seq=seq, num_delivered=delivered,
                    raw=FakeMsg(journal))


SUBMITTED = submitted(op("train").build(), op_id="op-1")


# ---- the happy path ---------------------------------------------------------------------------

async def test_the_handler_result_is_published_and_then_the_message_is_acked(service, sub, journal):
    seen: list[tuple] = []

    @on(sub, OperationSubmitted)
    async def handle(event, ctx: Context):
        seen.append((event, ctx.service, ctx.subject, ctx.num_delivered, ctx.clock.now()))
        return cost_estimated(event.op_id, at=ctx.clock.now())

    await service.process(sub, received(journal, codec.encode(SUBMITTED), delivered=2))
    assert seen == [(SUBMITTED, SERVICE, "ops.submitted.op-1", 2, T0)]
    assert kinds(journal) == ["publish", "ack"]  # published before acked
    assert journal[0][1] == cost_estimated("op-1", at=T0)
    assert (service.stats.handled, service.stats.published) == (1, 1)


async def test_every_returned_event_is_published_before_the_ack(service, sub, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        return [cost_estimated("op-1"), cost_estimated("op-2")]

    await service.process(sub, received(journal, codec.encode(SUBMITTED)))
    assert kinds(journal) == ["publish", "publish", "ack"]
    assert [e[1].op_id for e in journal[:2]] == ["op-1", "op-2"]


async def test_a_handler_that_returns_nothing_is_acked(service, sub, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        return None

    await service.process(sub, received(journal, codec.encode(SUBMITTED)))
    assert kinds(journal) == ["ack"]


async def test_one_handler_may_serve_several_types(service, sub, journal):
    types: list[str] = []

    @on(sub, OperationSubmitted, CostEstimated)
    async def handle(message, ctx):
        types.append(type(message).__name__)

    await service.process(sub, received(journal, codec.encode(SUBMITTED)))
    await service.process(sub, received(journal, codec.encode(cost_estimated())))
    assert types == ["OperationSubmitted", "CostEstimated"]


async def test_a_message_type_without_a_handler_is_acked_without_publishing(service, sub, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise AssertionError("not for this type")

    await service.process(sub, received(journal, codec.encode(stop("op-1"))))
    assert kinds(journal) == ["ack"]
    assert service.stats.handled == 0


# ---- bad input --------------------------------------------------------------------------------

def assert_dead_lettered(journal: Journal, data: bytes, reason: str, *, op_id: str, seq: int = 7) -> ErrorRaised:
    assert kinds(journal) == ["publish_raw", "publish", "term"]  # never ack
    _, subject, copied, headers = journal[0]
    assert subject == subjects.dead_letter(SERVICE) == f"dlq.{SERVICE}"
    assert copied == data
    assert headers["Opsched-Original-Subject"] == "ops.submitted.op-1"
    assert headers["Opsched-Error-Reason"] == reason
    assert headers["Nats-Msg-Id"] == f"dlq.{SERVICE}.{seq}"
    _, error, msg_id = journal[1]
    assert isinstance(error, ErrorRaised)
    assert (error.op_id, error.service, error.subject, error.reason) == (op_id, SERVICE, "ops.submitted.op-1", reason)
    assert msg_id == f"error.{SERVICE}.{seq}"
    return error


@pytest.mark.parametrize("data", [b"{not json", b"", json.dumps({"type": "submitted", "opId": "op-1"}).encode(),
                                  json.dumps({"type": "no-such-type", "opId": "op-1"}).encode()],
                         ids=["malformed json", "empty", "a submitted event without its fields", "an unknown type"])
async def test_a_message_that_does_not_decode_is_dead_lettered_with_an_error_event(service, sub, journal, data):
    called: list = []

    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        called.append(event)

    await service.process(sub, received(journal, data))
    op_id = "op-1" if data.startswith(b"{\"") else "-"
    error = assert_dead_lettered(journal, data, "malformed_message", op_id=op_id)
    assert error.payload == data[:200].decode()
    assert error.at == T0
    assert called == [] and service.stats.dead_lettered == 1


async def test_invalid_input_from_a_handler_is_dead_lettered_at_once(service, sub, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise InvalidInput("forbidden_pod_spec", "privileged: true is refused")

    data = codec.encode(SUBMITTED)
    await service.process(sub, received(journal, data, delivered=1))
    error = assert_dead_lettered(journal, data, "forbidden_pod_spec", op_id="op-1")
    assert error.message == "privileged: true is refused"


async def test_invalid_input_may_name_another_op(service, sub, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise InvalidInput("unknown_op", "no such op", op_id="other")

    await service.process(sub, received(journal, codec.encode(SUBMITTED)))
    assert journal[1][1].op_id == "other"


# ---- temporary failures -----------------------------------------------------------------------

@pytest.mark.parametrize("delivered", range(1, MAX_DELIVER))
async def test_a_failing_handler_is_retried_with_backoff_before_the_last_delivery(service, sub, journal, delivered):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise RuntimeError("database is down")

    await service.process(sub, received(journal, codec.encode(SUBMITTED), delivered=delivered))
    assert journal == [("nak", NAK_BACKOFF_S[delivered - 1])]
    assert service.stats.retried == 1


def test_the_backoff_grows():
    assert list(NAK_BACKOFF_S) == sorted(NAK_BACKOFF_S) and NAK_BACKOFF_S[0] > 0


async def test_a_failing_handler_is_dead_lettered_on_the_last_delivery(service, sub, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise RuntimeError("database is down")

    data = codec.encode(SUBMITTED)
    await service.process(sub, received(journal, data, delivered=MAX_DELIVER))
    error = assert_dead_lettered(journal, data, "handler_failed", op_id="op-1")
    assert "database is down" in error.message and f"{MAX_DELIVER} deliveries" in error.message


async def test_a_failed_publish_is_retried_and_never_acked(service, sub, journal):
    service.bus = FakeBus(journal, fail_publish=True)  # type: ignore[assignment]

    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        return cost_estimated()

    await service.process(sub, received(journal, codec.encode(SUBMITTED)))
    assert journal == [("nak", NAK_BACKOFF_S[0])]


async def test_when_the_dead_letter_copy_cannot_be_stored_the_message_is_kept(service, sub, journal):
    service.bus = FakeBus(journal, fail_publish=True)  # type: ignore[assignment]
    await service.process(sub, received(journal, b"{not json"))
    assert kinds(journal) == ["publish_raw", "nak"]  # not terminated: nothing is lost


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
