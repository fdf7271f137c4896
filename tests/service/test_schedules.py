"""Schedules on the bus: the commands handled as admission will wire them, the runner on a
FakeClock, and a restart that rebuilds the schedules from the stream without firing a run twice."""
from __future__ import annotations

import asyncio
import json

import msgspec

from opsched.proto import codec, subjects
from opsched.proto.commands import SubmitOperation
from opsched.proto.events import ErrorRaised
from opsched.proto.schedules import (
    CreateSchedule,
    DeleteSchedule,
    ScheduleCreated,
    ScheduleDeleted,
    ScheduleEvent,
    ScheduleFinished,
    ScheduleFired,
    ScheduleSpec,
)
from opsched.services.admission.schedule_runner import run_schedules, submitter
from opsched.services.admission.schedules import Schedules, on_create, on_delete
from opsched.services.runtime.service import Consumer, Context, Service
from opsched.services.runtime.settings import Settings
from tests.builders import T0, op
from tests.builders.clock import FakeClock

BUSES = ["memory"]  # service logic, not about the bus: on the in-memory bus alone (tests/service/conftest.py)

TEMPLATE = op("nightly-train").build()
TIMEOUT = 10.0


class CountingClock(FakeClock):
    """A FakeClock that counts ``sleep`` calls: a new call means the runner finished a pass."""

    def __init__(self, start=T0) -> None:
        super().__init__(start)
        self.sleeps = 0
        self.asleep = False
        self.changed = asyncio.Condition()

    async def sleep(self, seconds: float) -> None:
        async with self.changed:
            self.sleeps, self.asleep = self.sleeps + 1, True
            self.changed.notify_all()
        try:
            await super().sleep(seconds)
        finally:
            self.asleep = False

    async def advance_one_pass(self, seconds: float) -> None:
        """Once the runner sleeps, move time (>= its 1 s step, so it wakes) and wait for its next sleep:
        then the pass that saw the new time is done."""
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: self.asleep), TIMEOUT)
            before = self.sleeps
            self.advance(seconds)
            await asyncio.wait_for(self.changed.wait_for(lambda: self.sleeps > before), TIMEOUT)


class ScheduleLog:
    """Every schedule event of the op stream, in order."""

    def __init__(self) -> None:
        self.events: list[ScheduleEvent] = []
        self.changed = asyncio.Condition()

    async def on(self, data: bytes, seq: int) -> None:
        try:
            event = codec.decode_ops_stream(data)
        except msgspec.ValidationError:
            return  # a stored message the contract refuses (see the last test)
        if isinstance(event, ScheduleEvent):
            async with self.changed:
                self.events.append(event)
                self.changed.notify_all()

    async def until(self, condition) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(condition), TIMEOUT)

    async def expect(self, kind: type, schedule_id: str) -> ScheduleEvent:
        def found():
            return next((e for e in self.events if isinstance(e, kind) and e.op_id == schedule_id), None)
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: found() is not None), TIMEOUT)
        return found()

    def fired(self, schedule_id: str) -> list[tuple[int, float]]:
        return [(e.run, (e.scheduled_for - T0).total_seconds()) for e in self.events
                if isinstance(e, ScheduleFired) and e.op_id == schedule_id]


class Folded:
    """The schedules a service rebuilt from the stream, and a way to wait for its fold."""

    def __init__(self) -> None:
        self.schedules = Schedules()
        self.changed = asyncio.Condition()

    async def fold(self, data: bytes, seq: int) -> None:
        async with self.changed:
            self.schedules.apply(codec.decode_ops_stream(data))
            self.changed.notify_all()

    async def until(self, condition) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: condition(self.schedules)), TIMEOUT)


class ScheduleService(Service):
    """What admission wires: the replay fold, the two command handlers, the runner task."""

    name = "admission"
    commands = Consumer(subjects.ADMISSION_COMMANDS, subjects.CMD_STREAM, [subjects.CMD_SCHEDULE_ALL],
                        decoder=codec.decode_command)

    def __init__(self, url: str, clock: FakeClock, folded: Folded, submitted: list[str]) -> None:
        super().__init__(Settings(nats_url=url, log_format="console"), clock)
        self.folded, self.submitted = folded, submitted

    async def start(self, bus) -> None:
        await bus.replay(subjects.OPS_STREAM, subjects.OPS_ALL, self.folded.fold)

    def tasks(self):
        return [self.runner]

    async def runner(self, bus, stop: asyncio.Event) -> None:
        submit = submitter(bus, self.clock)

        async def recording(op_id: str, spec) -> None:
            self.submitted.append(op_id)
            await submit(op_id, spec)
        await run_schedules(bus, self.clock, self.folded.schedules, recording, stop, self.log)

    @commands.handles(CreateSchedule)
    async def create(self, cmd: CreateSchedule, ctx: Context):
        return on_create(cmd, ctx.clock.now(), self.folded.schedules)

    @commands.handles(DeleteSchedule)
    async def delete(self, cmd: DeleteSchedule, ctx: Context):
        return on_delete(cmd, ctx.clock.now(), self.folded.schedules)


def schedule_service(url: str, clock: FakeClock, folded: Folded, submitted: list[str]) -> Service:
    return ScheduleService(url, clock, folded, submitted)


async def start(service: Service, bus) -> tuple[asyncio.Task, asyncio.Event]:
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    await asyncio.wait_for(service.ready.wait(), TIMEOUT)
    return task, stop


async def submits_on_the_bus(bus) -> list[str]:
    return [codec.decode_command(d).op_id for d in await bus.read_all(subjects.CMD_STREAM, subjects.CMD_SUBMIT_ALL)
            if isinstance(codec.decode_command(d), SubmitOperation)]


async def test_runs_fire_on_the_bus_and_a_restart_fires_the_missed_run_once(bus_url, bus, client):
    log = ScheduleLog()
    await bus.follow(subjects.OPS_STREAM, subjects.OPS_ALL, log.on)
    clock, submitted, first = CountingClock(), [], Folded()
    task, stop = await start(schedule_service(bus_url, clock, first, submitted), bus)

    spec = ScheduleSpec(kind="interval", frequency_s=60, max_runs=4)
    await client.create_schedule(spec, TEMPLATE, schedule_id="nightly", requested_by="test")
    created = await log.expect(ScheduleCreated, "nightly")
    assert created.at == T0 and created.op == TEMPLATE
    await first.until(lambda s: "nightly" in s)
    await clock.advance_one_pass(1)
    await clock.advance_one_pass(59)
    assert submitted == ["nightly-1", "nightly-2"]
    await log.until(lambda: log.fired("nightly") == [(1, 0), (2, 60)])

    stop.set()  # the service dies; 330 s pass; it comes back with nothing but the stream
    await asyncio.wait_for(task, TIMEOUT)
    clock.advance(330)
    resubmitted: list[str] = []
    task, stop = await start(schedule_service(bus_url, clock, Folded(), resubmitted), bus)
    await log.until(lambda: len(log.fired("nightly")) == 3)  # at once: the first pass after the replay
    await clock.advance_one_pass(60)
    finished = await log.expect(ScheduleFinished, "nightly")

    assert log.fired("nightly") == [(1, 0), (2, 60), (3, 360), (4, 420)]  # the missed slots fire once
    assert finished.reason == "max_runs" and finished.runs == 4
    assert submitted == ["nightly-1", "nightly-2"] and resubmitted == ["nightly-3", "nightly-4"]
    assert await submits_on_the_bus(bus) == ["nightly-1", "nightly-2", "nightly-3", "nightly-4"]
    stop.set()
    await asyncio.wait_for(task, TIMEOUT)


async def test_a_deleted_schedule_stops_firing_and_a_bad_one_gets_an_error_event(bus_url, bus, client, events):
    log = ScheduleLog()
    await bus.follow(subjects.OPS_STREAM, subjects.OPS_ALL, log.on)
    clock, submitted, folded = CountingClock(), [], Folded()
    task, stop = await start(schedule_service(bus_url, clock, folded, submitted), bus)

    await client.create_schedule(ScheduleSpec(kind="cron", cron="*/5 * * * *"), TEMPLATE, schedule_id="often")
    await log.expect(ScheduleCreated, "often")
    await folded.until(lambda s: "often" in s)
    await clock.advance_one_pass(1)
    await log.until(lambda: log.fired("often") == [(1, 0)])
    await client.delete_schedule("often")
    await log.expect(ScheduleDeleted, "often")
    await folded.until(lambda s: not s.get("often").active)
    await clock.advance_one_pass(3600)
    assert submitted == ["often-1"]  # the pass at +1 h is done and fired nothing

    await client.create_schedule(ScheduleSpec(kind="cron", cron="0 25 * * *"), TEMPLATE, schedule_id="bad")
    error = await events.expect(ErrorRaised, "bad")
    assert error.reason == "invalid_schedule" and "hour field '25'" in error.message
    assert "bad" not in folded.schedules
    stop.set()
    await asyncio.wait_for(task, TIMEOUT)


async def test_admission_disables_a_stored_schedule_out_of_bounds_with_its_reason_and_fires_the_others(
        stack_factory, bus, client, events):
    """A schedule stored before the bounds (startAt 9999-12-31: every pass overflowed, no schedule fired)
    is disabled with the contract's refusal; a schedule created next to it fires and its run is admitted."""
    from opsched.proto.events import OperationAdmitted

    log = ScheduleLog()
    await bus.follow(subjects.OPS_STREAM, subjects.OPS_ALL, log.on)
    old = json.loads(codec.encode(ScheduleCreated(op_id="old", at=T0, op=TEMPLATE,
                                                  spec=ScheduleSpec(kind="cron", cron="0 0 * * *"))))
    old["spec"]["startAt"] = "9999-12-31T23:59:30Z"
    await bus.publish_raw(subjects.schedule_event("schedule_created", "old"), json.dumps(old).encode(),
                          {"Nats-Msg-Id": "old.schedule_created.0"})
    await stack_factory(dispatcher_mode="null")
    await client.create_schedule(ScheduleSpec(kind="interval", frequency_s=60, max_runs=1), op("tick").build(),
                                      schedule_id="tick")

    disabled = await log.expect(ScheduleFinished, "old")
    assert disabled.reason == "invalid_spec" and "startAt: 9999-12-31T23:59:30" in disabled.message
    assert "to 2199-12-31T23:59:59Z" in disabled.message
    await events.expect(OperationAdmitted, "tick-1", timeout=15)
    assert log.fired("tick") and not log.fired("old")
