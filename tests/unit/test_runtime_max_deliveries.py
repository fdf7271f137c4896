"""Max-deliveries advisories (``services.runtime.maxdeliveries``): a message JetStream stopped delivering
unsettled is dead-lettered as the handler loop gives up, once, however many advisories and give-ups race."""
from __future__ import annotations

import pytest

from opsched.bus.bus import Received
from opsched.proto import codec, subjects
from opsched.proto.advisories import decode_max_deliveries
from opsched.proto.events import ErrorRaised, HandlerFailed
from opsched.services.runtime.maxdeliveries import listen
from opsched.services.runtime.service import Service, Subscription
from opsched.services.runtime.settings import Settings
from tests.builders import T0, op, submitted
from tests.builders.bus import MemoryBus, memory_bus
from tests.builders.clock import FakeClock
from tests.waiting import eventually

SERVICE, DURABLE, MAX_DELIVER = "cost", "probe", 2


class Probe(Service):
    name = SERVICE


@pytest.fixture
def bus() -> MemoryBus:
    return memory_bus(SERVICE)


@pytest.fixture
async def service(bus) -> Service:
    svc = Probe(Settings(max_deliver=MAX_DELIVER), FakeClock(T0))
    svc.bus = bus  # type: ignore[assignment]
    sub = Subscription(DURABLE, subjects.OPS_STREAM, [subjects.events_of("submitted")], codec.decode)
    svc.subscriptions.append(sub)

    async def broken(event, ctx):
        raise RuntimeError("a bug")
    sub.handlers[type(SUBMITTED)] = broken
    await listen(bus, [(DURABLE, subjects.OPS_STREAM)], svc._lost, lambda call: call(), svc.log)
    return svc


SUBMITTED = submitted(op("train").build(), op_id="op-1")


def stored(bus: MemoryBus, stream: str, kind: type | None = None) -> list:
    found = bus.broker.stored(stream)
    if kind is None:
        return found
    return [m for m in found if isinstance(codec.decode(m.data), kind)]


async def publish_submitted(bus: MemoryBus) -> int:
    return (await bus.publish(SUBMITTED)).seq


async def test_an_advisory_dead_letters_the_message_and_says_so_about_its_op(bus, service):
    seq = await publish_submitted(bus)
    bus.broker.max_deliveries(subjects.OPS_STREAM, DURABLE, seq, MAX_DELIVER)
    await eventually(lambda: _dead_lettered(bus), "the dead letter")
    [copy] = stored(bus, subjects.DLQ_STREAM)
    assert copy.data == codec.encode(SUBMITTED) and copy.headers["Opsched-Error-Reason"] == "max_deliveries"
    [failed] = [codec.decode(m.data) for m in stored(bus, subjects.OPS_STREAM, HandlerFailed)]
    assert (failed.op_id, failed.failed_type, failed.service, failed.at) == ("op-1", "submitted", SERVICE, T0)
    assert len(stored(bus, subjects.OPS_STREAM, ErrorRaised)) == 1
    assert service.stats.lost == 1


async def test_an_advisory_racing_the_loops_own_give_up_stores_nothing_twice(bus, service):
    seq = await publish_submitted(bus)
    pull = await bus.durable(DURABLE, subjects.OPS_STREAM, [subjects.events_of("submitted")], max_deliver=MAX_DELIVER)
    [first] = await pull.fetch(1, timeout=1)
    await first.nak()
    [last] = await pull.fetch(1, timeout=1)
    await service.process(service.subscriptions[-1], _received(last))  # fails: the loop gives up, terminates
    for _ in range(2):  # and two advisories come anyway
        bus.broker.max_deliveries(subjects.OPS_STREAM, DURABLE, seq, MAX_DELIVER)
    await eventually(lambda: _lost(service, 2), "both advisories acted on")
    assert len(stored(bus, subjects.DLQ_STREAM)) == 1
    assert len(stored(bus, subjects.OPS_STREAM, HandlerFailed)) == 1
    assert len(stored(bus, subjects.OPS_STREAM, ErrorRaised)) == 1


async def test_an_advisory_for_a_message_no_longer_stored_or_unreadable_changes_nothing(bus, service):
    bus.broker.max_deliveries(subjects.OPS_STREAM, DURABLE, 999, MAX_DELIVER)  # no such message
    bus.broker.announce(subjects.max_deliveries_advisory(subjects.OPS_STREAM, DURABLE), b"{not json")
    seq = await publish_submitted(bus)
    bus.broker.max_deliveries(subjects.OPS_STREAM, DURABLE, seq, MAX_DELIVER)  # heard after the two above
    await eventually(lambda: _dead_lettered(bus), "the dead letter of the one still stored")
    assert len(stored(bus, subjects.DLQ_STREAM)) == 1 and service.stats.lost == 1


async def _dead_lettered(bus: MemoryBus) -> bool:
    return bool(stored(bus, subjects.DLQ_STREAM)) and bool(stored(bus, subjects.OPS_STREAM, ErrorRaised))


async def _lost(service: Service, n: int) -> bool:
    return service.stats.lost == n and service.stats.dead_lettered == 1 + n


def _received(raw) -> Received:
    md = raw.metadata
    return Received(raw.subject, raw.data, dict(raw.headers), md.sequence.stream, md.num_delivered, raw)


def test_the_advisory_is_read_as_nats_server_sends_it():
    # as nats-server 2.x publishes it when a consumer stops delivering a message unsettled
    sent = (b'{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"xR5CAEsTBOLSbsosJClGfd",'
            b'"timestamp":"2026-11-24T21:07:29.029863021Z","stream":"OPSCHED_OPS","consumer":"cost-ledger",'
            b'"stream_seq":7,"deliveries":5}')
    advisory = decode_max_deliveries(sent)
    assert (advisory.stream, advisory.consumer, advisory.stream_seq, advisory.deliveries) == (
        "OPSCHED_OPS", "cost-ledger", 7, 5)
    assert subjects.max_deliveries_advisory("OPSCHED_OPS", "cost-ledger") == (
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.OPSCHED_OPS.cost-ledger")
