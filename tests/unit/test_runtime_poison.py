"""Poison messages (``services.runtime.inhand``): a message whose handling died with its process twice (the
handler loop killed with it in hand, nothing settled) is dead-lettered on its third delivery, not handled;
a delivery settled normally is never counted: an ack leaves no record, a nak (the retry path) records it as
given back."""
from __future__ import annotations

import asyncio
import contextlib

import msgspec
import pytest

from opsched.proto import codec, subjects
from opsched.proto.events import ErrorRaised, HandlerFailed
from opsched.proto.in_hand import InHand
from opsched.services.runtime import service
from opsched.services.runtime.handling import received
from opsched.services.runtime.inhand import POISON, open_records
from opsched.services.runtime.service import Service, Subscription
from opsched.services.runtime.settings import Settings
from tests.builders import T0, op, submitted
from tests.builders.bus import MemoryBus, memory_bus
from tests.builders.clock import FakeClock

SERVICE, DURABLE, ACK_WAIT = "cost", "probe", 0.05
SUBMITTED = submitted(op("train").build(), op_id="op-1")
FILTERS = [subjects.events_of("submitted")]


class Probe(Service):
    name = SERVICE


@pytest.fixture
def bus() -> MemoryBus:
    return memory_bus(SERVICE)


async def probe(bus: MemoryBus, handler, crashes: int = 2) -> Service:
    svc = Probe(Settings(max_deliver=5, poison_crashes=crashes), FakeClock(T0))
    svc.bus = bus  # type: ignore[assignment]
    sub = Subscription(DURABLE, subjects.OPS_STREAM, FILTERS, codec.decode)
    sub.handlers[type(SUBMITTED)] = handler
    svc.subscriptions.append(sub)
    svc.in_hand = await open_records(bus, "replica-1", crashes)
    return svc


class Calls:
    """A handler that counts its calls; ``hang``: it never returns (the process dies with it in hand)."""

    def __init__(self, hang: bool = False, fail: bool = False) -> None:
        self.n, self.hang, self.fail = 0, hang, fail

    async def __call__(self, event, ctx):
        self.n += 1
        if self.hang:
            await asyncio.Event().wait()
        if self.fail:
            raise RuntimeError("a bug")


async def deliver(bus: MemoryBus, svc: Service, *, crash: bool) -> None:
    """Fetch the next delivery (waiting out the ack wait of an unsettled one) and process it; ``crash``: the
    loop is killed while the handler holds it (as kill -9: nothing settles it)."""
    pull = await bus.durable(DURABLE, subjects.OPS_STREAM, FILTERS, max_deliver=5, ack_wait=ACK_WAIT)
    [raw] = await pull.fetch(1, timeout=5)
    task = asyncio.create_task(svc.process(svc.subscriptions[-1], received(raw)))
    if not crash:
        await asyncio.wait_for(task, timeout=5)
        return
    for _ in range(20):  # the handler starts
        await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def stored(bus: MemoryBus, stream: str, kind: type | None = None) -> list:
    found = bus.broker.stored(stream)
    return found if kind is None else [m for m in found if isinstance(codec.decode(m.data), kind)]


async def test_a_message_that_died_in_hand_twice_is_dead_lettered_on_its_third_delivery_not_handled(bus):
    handler = Calls(hang=True)
    svc = await probe(bus, handler)
    await bus.publish(SUBMITTED)
    await deliver(bus, svc, crash=True)
    await deliver(bus, svc, crash=True)
    assert handler.n == 2
    await deliver(bus, svc, crash=False)
    assert handler.n == 2  # not handled a third time
    [copy] = stored(bus, subjects.DLQ_STREAM)
    assert copy.data == codec.encode(SUBMITTED) and copy.headers["Opsched-Error-Reason"] == POISON
    assert "2 deliveries of it died in hand" in copy.headers["Opsched-Error"]
    [failed] = [codec.decode(m.data) for m in stored(bus, subjects.OPS_STREAM, HandlerFailed)]
    assert (failed.op_id, failed.failed_type, failed.service) == ("op-1", "submitted", SERVICE)
    [error] = [codec.decode(m.data) for m in stored(bus, subjects.OPS_STREAM, ErrorRaised)]
    assert error.reason == POISON and error.op_id == "op-1"
    assert ("term", 1) in bus.trace and svc.stats.poisoned == 1


async def test_a_poison_message_whose_dead_letter_could_not_be_stored_is_poison_again_never_handled(bus):
    handler = Calls(hang=True)
    svc = await probe(bus, handler)
    await bus.publish(SUBMITTED)
    await deliver(bus, svc, crash=True)
    await deliver(bus, svc, crash=True)
    bus.fail_publish(subject=subjects.dead_letter(SERVICE))  # the copy cannot be stored: given back
    svc.settings.dependency_backoff_base_s = svc.settings.dependency_backoff_cap_s = 0.01
    stop = svc.stopping
    stop.set()  # the service stops while it waits for NATS: the message is given back (nak)
    await deliver(bus, svc, crash=False)
    assert ("nak", 1, None) in bus.trace and not stored(bus, subjects.DLQ_STREAM)
    stop.clear()
    bus.fail_publish(0)
    await deliver(bus, svc, crash=False)
    assert handler.n == 2  # poison both times: never handled again
    [copy] = stored(bus, subjects.DLQ_STREAM)
    assert copy.headers["Opsched-Error-Reason"] == POISON


async def test_one_death_in_hand_is_not_poison_the_next_delivery_is_handled(bus):
    handler = Calls(hang=True)
    svc = await probe(bus, handler)
    await bus.publish(SUBMITTED)
    await deliver(bus, svc, crash=True)
    handler.hang = False
    await deliver(bus, svc, crash=False)
    assert handler.n == 2 and ("ack", 1) in bus.trace and not stored(bus, subjects.DLQ_STREAM)


async def test_a_handler_that_raised_is_settled_by_its_nak_and_never_counted_as_a_death(bus, monkeypatch):
    monkeypatch.setattr(service, "NAK_BACKOFF_S", (0.01,))
    handler = Calls(fail=True)
    svc = await probe(bus, handler)
    await bus.publish(SUBMITTED)
    for _ in range(3):  # each failure is nak'd (the retry path): the record goes with it
        await deliver(bus, svc, crash=False)
    assert handler.n == 3 and svc.stats.poisoned == 0 and not stored(bus, subjects.DLQ_STREAM)


async def test_a_first_delivery_settled_by_its_ack_costs_nothing(bus):
    svc = await probe(bus, Calls())
    await bus.publish(SUBMITTED)
    await deliver(bus, svc, crash=False)
    kv = bus.broker.buckets[subjects.IN_HAND_BUCKET]
    assert ("ack", 1) in bus.trace and kv.writes == 0 and kv.data == {}


async def test_a_delivery_given_back_is_counted_so_and_never_as_a_death(bus, monkeypatch):
    monkeypatch.setattr(service, "NAK_BACKOFF_S", (0.01,))
    handler = Calls(fail=True)
    svc = await probe(bus, handler)
    await bus.publish(SUBMITTED)
    await deliver(bus, svc, crash=False)  # nak'd by the retry path: one given back
    handler.fail, handler.hang = False, True
    await deliver(bus, svc, crash=True)  # dies in hand: one death
    handler.hang = False
    await deliver(bus, svc, crash=False)  # third delivery: 2 earlier, 1 given back, 1 died: handled
    kv = bus.broker.buckets[subjects.IN_HAND_BUCKET]
    assert handler.n == 3 and ("ack", 1) in bus.trace and svc.stats.poisoned == 0
    assert [msgspec.json.decode(e.value, type=InHand).given_back for e in kv.data.values()] == [1]


async def test_turned_off_every_delivery_is_handled_and_no_bucket_is_made(bus):
    handler = Calls(hang=True)
    svc = await probe(bus, handler, crashes=0)
    await bus.publish(SUBMITTED)
    await deliver(bus, svc, crash=True)
    await deliver(bus, svc, crash=True)
    await deliver(bus, svc, crash=True)
    assert handler.n == 3 and subjects.IN_HAND_BUCKET not in bus.broker.buckets
