"""The handler loop when a dependency is unavailable (the Kubernetes API, NATS): the message is kept ours
(in progress, never nak'd nor dead-lettered) and tried again with capped backoff on the service's clock
for as long as it lasts; readiness says what the service waits for. And a bug that repeats: dead-lettered
with a ``handler_failed`` about its op. Time is a fake clock: nothing sleeps."""
from __future__ import annotations

import asyncio

import pytest

from opsched.bus.errors import DependencyUnavailable
from opsched.proto import codec, subjects
from opsched.proto.events import DispatchDelayed, HandlerFailed, OperationSubmitted
from opsched.services.runtime.backoff import Backoff
from opsched.services.runtime.service import Service, Subscription
from opsched.services.runtime.settings import Settings
from tests.builders import T0, cost_estimated
from tests.builders.bus import MemoryBus, memory_bus
from tests.builders.clock import FakeClock
from tests.unit.test_runtime_service import MAX_DELIVER, SUBMITTED, Probe, kinds, on, published, received

NO_JITTER = Backoff(base_s=0.5, cap_s=4.0, jitter=0.2, rand=lambda: 0.0)


@pytest.fixture
def bus() -> MemoryBus:
    return memory_bus("cost")


@pytest.fixture
def journal(bus) -> list[tuple]:
    return bus.trace


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def service(bus, clock) -> Service:
    svc = Probe(Settings(max_deliver=MAX_DELIVER), clock)
    svc.bus = bus  # type: ignore[assignment]
    svc.backoff = NO_JITTER
    return svc


@pytest.fixture
def sub(service) -> Subscription:
    subscription = Subscription("test-durable", subjects.OPS_STREAM, [subjects.OPS_ALL], codec.decode)
    service.subscriptions.append(subscription)
    return subscription


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def flaky(times: int, dependency: str = "kubernetes", events: list | None = None):
    """A handler that finds ``dependency`` unavailable ``times`` times, then estimates; its calls in ``calls``."""
    calls: list[int] = []

    async def handle(event, ctx):
        calls.append(ctx.num_delivered)
        if len(calls) <= times:
            raise DependencyUnavailable(dependency, "connection refused", events=events)
        return cost_estimated()
    handle.calls = calls  # type: ignore[attr-defined]
    return handle


def test_the_backoff_doubles_up_to_its_cap_and_jitter_only_shortens_it():
    assert [NO_JITTER.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    most = Backoff(base_s=1.0, cap_s=8.0, jitter=0.25, rand=lambda: 1.0)
    assert most.delay(3) == 3.0 and most.delay(100) == 6.0


async def test_an_unavailable_dependency_is_retried_in_place_until_it_answers(service, sub, bus, journal, clock):
    handle = on(sub, OperationSubmitted)(flaky(2))
    msg = await received(bus, codec.encode(SUBMITTED))
    task = asyncio.create_task(service.process(sub, msg))
    await settle()
    assert kinds(journal) == ["in_progress"]  # the ack wait starts again: no redelivery meanwhile
    waiting = service.waits.report()["kubernetes"]
    assert waiting["since"] == T0.isoformat() and waiting["detail"] == "connection refused"
    clock.advance(0.5)
    await settle()
    assert kinds(journal) == ["in_progress", "in_progress"] and not task.done()
    clock.advance(0.9)
    await settle()
    assert not task.done()  # the second wait is 1 s
    clock.advance(0.1)
    await task
    assert kinds(journal) == ["in_progress", "in_progress", "publish", "ack"]
    assert handle.calls == [1, 1, 1]  # one delivery, three tries
    assert not service.waits and service.stats.dead_lettered == 0 and service.stats.handled == 1


async def test_an_outage_on_the_last_delivery_is_still_never_dead_lettered(service, sub, bus, journal, clock):
    on(sub, OperationSubmitted)(flaky(MAX_DELIVER + 3))
    msg = await received(bus, codec.encode(SUBMITTED), delivered=MAX_DELIVER)
    task = asyncio.create_task(service.process(sub, msg))
    for _ in range(MAX_DELIVER + 3):
        await settle()
        clock.advance(NO_JITTER.cap_s)
    await task
    assert kinds(journal)[-2:] == ["publish", "ack"] and "term" not in kinds(journal)
    assert service.stats.dead_lettered == 0


async def test_the_wait_events_are_published_once_when_the_wait_starts(service, sub, bus, journal, clock):
    delayed = DispatchDelayed(op_id="op-1", at=T0, message="connection refused")
    on(sub, OperationSubmitted)(flaky(3, events=[delayed]))
    task = asyncio.create_task(service.process(sub, await received(bus, codec.encode(SUBMITTED))))
    for _ in range(4):
        await settle()
        clock.advance(NO_JITTER.cap_s)
    await task
    assert [type(e) for e in published(journal)] == [DispatchDelayed, type(cost_estimated())]


async def test_a_publish_that_nats_fails_is_retried_without_handling_again(service, sub, bus, journal, clock):
    handle = on(sub, OperationSubmitted)(flaky(0))
    msg = await received(bus, codec.encode(SUBMITTED))
    bus.fail_publish(2)
    task = asyncio.create_task(service.process(sub, msg))
    await settle()
    assert list(service.waits.report()) == ["nats"]
    for _ in range(2):
        clock.advance(NO_JITTER.cap_s)
        await settle()
    await task
    assert kinds(journal) == ["in_progress", "in_progress", "publish", "ack"] and handle.calls == [1]


async def test_a_service_that_stops_while_waiting_gives_the_message_back(service, sub, bus, journal, clock):
    on(sub, OperationSubmitted)(flaky(100))
    task = asyncio.create_task(service.process(sub, await received(bus, codec.encode(SUBMITTED))))
    await settle()
    service.stopping.set()
    await task
    assert kinds(journal) == ["in_progress", "nak"] and not service.waits


async def test_when_the_dead_letter_copy_cannot_be_stored_the_message_is_kept_until_it_is(service, sub, bus, journal,
                                                                                          clock):
    msg = await received(bus, b"{not json")
    bus.fail_publish(1, subject=subjects.OPS_ALL)  # the copy is stored, the error event not (yet)
    task = asyncio.create_task(service.process(sub, msg))
    await settle()
    assert kinds(journal) == ["publish", "in_progress"]  # not terminated: nothing is lost
    clock.advance(NO_JITTER.cap_s)
    await task
    assert kinds(journal)[-1] == "term" and journal[0][1].subject == subjects.dead_letter("cost")


async def test_a_bug_on_the_last_delivery_says_which_op_it_failed_before_the_dead_letter(service, sub, bus, journal):
    @on(sub, OperationSubmitted)
    async def handle(event, ctx):
        raise KeyError("oops")

    msg = await received(bus, codec.encode(SUBMITTED), delivered=MAX_DELIVER)
    await service.process(sub, msg)
    failed = published(journal)[0]
    assert isinstance(failed, HandlerFailed)
    assert (failed.op_id, failed.attempt, failed.service, failed.failed_type) == ("op-1", 0, "cost", "submitted")
    assert "KeyError('oops')" in failed.error and f"{MAX_DELIVER} deliveries" in failed.error
    assert journal[1][1].subject == subjects.dead_letter("cost") and kinds(journal)[-1] == "term"
