"""The anatomy of a service: a ``Service`` subclass declares its consumers (``Consumer``), registers
its handlers as methods (``@consumer.handles(Type)``) and has ``start`` and ``tasks``; ``run``
starts it, then creates the consumers, then serves the consumers and the tasks until ``stop``."""
from __future__ import annotations

import asyncio

import pytest

from opsched.bus.bus import Received
from opsched.proto import codec, subjects
from opsched.proto.commands import StopOperation
from opsched.proto.events import CostEstimated, OperationSubmitted
from opsched.services.runtime.service import Consumer, Context, Service, consumers_of
from opsched.services.runtime.settings import Settings
from tests.builders import T0, cost_estimated, op, stop, submitted
from tests.builders.clock import FakeClock
from tests.builders.kv import MemoryKV


class Probe(Service):
    name = "probe"
    events = Consumer("probe-events", subjects.OPS_STREAM, [subjects.OPS_ALL])
    commands = Consumer("probe-commands", subjects.CMD_STREAM, [subjects.CMD_ALL], decoder=codec.decode_command)

    def __init__(self, settings: Settings, clock=None) -> None:
        super().__init__(settings, clock)
        self.seen: list[str] = []
        self.journal: list = []

    async def start(self, bus) -> None:
        self.journal.append("start")

    def tasks(self):
        return [self.background]

    async def background(self, bus, stop: asyncio.Event) -> None:
        self.journal.append(("task", self.ready.is_set()))
        stop.set()

    @events.handles(OperationSubmitted, CostEstimated)
    async def on_event(self, event, ctx: Context) -> CostEstimated:
        self.seen.append(type(event).__name__)
        return cost_estimated(event.op_id, at=ctx.clock.now())

    @commands.handles(StopOperation)
    async def on_stop(self, cmd: StopOperation, ctx: Context) -> None:
        self.seen.append(f"stop {cmd.op_id}")


class Journal(list):
    pass


class FakeMsg:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def ack(self) -> None:
        self.journal.append("ack")


class FakeBus:
    """Publishes into the journal; ``durable`` hands out consumers that never have a message."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def publish(self, message, **_) -> None:
        self.journal.append(("publish", type(message).__name__))

    async def ensure_streams(self, limits=None, *, align=True) -> None:
        self.journal.append("streams")

    async def durable(self, durable: str, stream: str, filters: list[str], max_deliver: int, ack_wait: float):
        self.journal.append(("durable", durable, max_deliver, ack_wait))
        return IdlePull()

    async def listen(self, subject: str, on_message, group: str):
        self.journal.append(("listen", subject, group))
        return IdleListener()

    async def serve(self, subject: str, answer, group: str):
        self.journal.append(("serve", subject, group))
        return IdleListener()

    async def ensure_cache_bucket(self, bucket: str, max_age_s: float | None = None) -> MemoryKV:
        return MemoryKV()  # the in-hand records (services.runtime.inhand)


class IdleListener:
    async def unsubscribe(self) -> None:
        pass


class IdlePull:
    async def fetch(self, batch: int, timeout: float):
        await asyncio.sleep(0.01)
        raise asyncio.TimeoutError


def probe() -> Probe:
    return Probe(Settings(max_deliver=3, ack_wait_s=12.0), FakeClock(T0))


def received(journal: Journal, data: bytes) -> Received:
    return Received(subject="x", data=data, headers={}, stream_seq=1, num_delivered=1, raw=FakeMsg(journal))


def test_the_consumers_of_a_class_become_the_subscriptions_of_an_instance_in_declaration_order():
    service = probe()
    assert [(s.durable, s.stream, s.filters) for s in service.subscriptions] == [
        ("probe-events", subjects.OPS_STREAM, [subjects.OPS_ALL]),
        ("probe-commands", subjects.CMD_STREAM, [subjects.CMD_ALL])]
    assert service.subscriptions[0].decoder is codec.decode
    assert service.subscriptions[1].decoder is codec.decode_command
    assert set(service.subscriptions[0].handlers) == {OperationSubmitted, CostEstimated}
    assert set(service.subscriptions[1].handlers) == {StopOperation}


async def test_the_handlers_are_the_methods_of_each_instance():
    first, second = probe(), probe()
    journal = Journal()
    first.bus = second.bus = FakeBus(journal)  # type: ignore[assignment]
    await first.process(first.subscriptions[0], received(journal, codec.encode(submitted(op("a").build(), op_id="a"))))
    await second.process(second.subscriptions[1], received(journal, codec.encode(stop("b"))))
    assert (first.seen, second.seen) == (["OperationSubmitted"], ["stop b"])
    assert journal == [("publish", "CostEstimated"), "ack", "ack"]  # the loop as always: publish, then ack


def test_a_subclass_has_the_consumers_of_its_base_first():
    class More(Probe):
        name = "more"
        extra = Consumer("more-extra", subjects.OPS_STREAM, [subjects.OPS_ALL])

    assert [c.durable for c in consumers_of(More)] == ["probe-events", "probe-commands", "more-extra"]
    assert [s.durable for s in More(Settings()).subscriptions] == ["probe-events", "probe-commands", "more-extra"]


def test_a_type_handled_twice_by_one_consumer_is_refused():
    ops = Consumer("twice", subjects.OPS_STREAM, [subjects.OPS_ALL])
    ops.handles(OperationSubmitted)(Probe.on_event)
    with pytest.raises(TypeError, match="OperationSubmitted is handled twice"):
        ops.handles(CostEstimated, OperationSubmitted)(Probe.on_event)


async def test_run_starts_the_service_then_creates_its_consumers_then_serves_the_tasks():
    service, journal = probe(), Journal()
    await asyncio.wait_for(service.run(FakeBus(journal), asyncio.Event()), timeout=5)  # the task sets stop
    assert journal == ["streams", ("serve", subjects.health_query("probe"), "probe-health"),  # how it is (proto.health)
                       ("durable", "probe-events", 3, 12.0), ("durable", "probe-commands", 3, 12.0),
                       ("listen", subjects.max_deliveries_advisory(subjects.OPS_STREAM, "probe-events"),
                        subjects.max_deliveries_group("probe-events")),
                       ("listen", subjects.max_deliveries_advisory(subjects.CMD_STREAM, "probe-commands"),
                        subjects.max_deliveries_group("probe-commands"))]  # a lost message is heard of
    assert service.journal == ["start", ("task", True)]  # ready before the tasks run


def test_a_dependency_backoff_that_could_outlast_the_ack_wait_is_refused():
    with pytest.raises(ValueError, match="must be below ack_wait_s"):
        Settings(ack_wait_s=5.0, dependency_backoff_cap_s=5.0)
    assert Settings(ack_wait_s=6.0, dependency_backoff_cap_s=2.5).ack_wait_s == 6.0


def test_a_service_without_tasks_or_start_serves_only_its_consumers():
    class Bare(Service):
        name = "bare"

    assert Bare(Settings()).tasks() == [] and Bare(Settings()).subscriptions == []
