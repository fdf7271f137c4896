"""The admission service: folds every op event and node fact into state (rebuilt from the streams on
start), handles commands and queries, and runs the scheduling cycle whenever something changed."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

from proto import codec, subjects
from proto.commands import (
    ApproveOperation,
    CopyOperation,
    RejectOperation,
    RestartOperation,
    ResumeOperation,
    StopOperation,
    SubmitOperation,
)
from proto.config import QueuesConfigured, SetQueues
from proto.queries import QueuesRequest, WhyRequest
from proto.queues import QueuesConfig
from proto.reasons import Reason, pending
from proto.schedules import CreateSchedule, DeleteSchedule, ScheduleEvent
from services.admission import cycle, handlers, queries
from services.admission import schedules as sched
from services.admission.config_source import ConfigSource
from services.admission.queues import Book, QueuesConfigError, compile_book
from services.admission.state import AdmissionState
from services.runtime.bus import Bus, config_digest
from services.runtime.errors import InvalidInput
from services.runtime.service import Context, Service
from services.runtime.settings import Settings


class Admission:
    def __init__(self, service: Service, settings: Settings) -> None:
        self.service = service
        self.settings = settings
        self.state = AdmissionState()
        self.book: Book = compile_book(QueuesConfig())
        self.config = ConfigSource(settings.queues_file, service.clock, service.log)
        self.schedules = sched.Schedules(status_of=self._run_status)
        self.wake = asyncio.Event()

    async def start(self, bus: Bus) -> None:
        """Config, then cluster facts, then the op stream: replayed into state, then followed live."""
        await bus.replay(subjects.CONFIG_STREAM, subjects.CONFIG_ALL, self.on_config)
        await self.config.publish_file(bus, at_start=True)
        await bus.replay(subjects.CLUSTER_STREAM, subjects.CLUSTER_ALL, self.on_cluster)
        await bus.replay(subjects.OPS_STREAM, subjects.OPS_ALL, self.fold)
        await bus.serve(subjects.QUERY_WHY, self.answer, group="admission")
        await bus.serve(subjects.QUERY_QUEUES, self.answer, group="admission")
        self.service.log.info("state_rebuilt", ops=len(self.state.ops), nodes=len(self.state.nodes),
                              queues=self.book.names, config=self.book.source)
        self.wake.set()

    async def on_config(self, data: bytes, seq: int) -> None:
        await self.config.on_message(data, seq)
        latest = self.config.latest
        if latest is None or latest.source == self.book.source:
            return
        try:
            self.book = compile_book(latest.config, latest.source)
        except QueuesConfigError as exc:
            self.service.log.error("config_not_applied", source=latest.source, error=str(exc))
            return
        self.state.queues.configure_aging({q.name: (q.aging.per_minute, q.aging.cap) for q in latest.config.queues},
                                   self.service.clock.now())
        self.service.log.info("queues_configured", source=latest.source, queues=self.book.names)
        self.wake.set()

    async def on_cluster(self, data: bytes, seq: int) -> None:
        try:
            event = codec.decode_cluster(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        if self.state.observe(event):
            self.wake.set()

    async def fold(self, data: bytes, seq: int) -> None:
        try:
            event = codec.decode_ops_stream(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # producers' bad messages are dead-lettered where they are consumed
        if isinstance(event, ScheduleEvent):
            self.schedules.apply(event)
            return
        if self.state.apply(event):
            self.wake.set()

    def _run_status(self, op_id: str) -> str | None:
        op = self.state.ops.get(op_id)
        return sched.run_status(op.status if op else None)

    async def run_schedule_runs(self, bus: Bus, stop: asyncio.Event) -> None:
        await sched.run_schedules(bus, self.service.clock, self.schedules, sched.submitter(bus, self.service.clock),
                                  stop, self.service.log)

    async def answer(self, data: bytes) -> bytes:
        try:
            request = codec.decode_query(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return codec.encode(queries.WhyAnswer(op_id="-", found=False, reasons=[
                pending(Reason.BAD_REQUEST, error=str(exc))]))
        if isinstance(request, WhyRequest):
            return codec.encode(queries.why(self.state, self.book, request.op_id, self.service.clock.now()))
        if isinstance(request, QueuesRequest):
            return codec.encode(queries.queues(self.state, self.book))
        return codec.encode(queries.WhyAnswer(op_id="-", found=False))

    async def run_cycles(self, bus: Bus, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=0.5)
            except asyncio.TimeoutError:
                if not self.state.queues.due(self.service.clock.now()):
                    continue
            self.wake.clear()
            await self.cycle_once(bus)

    async def cycle_once(self, bus: Bus) -> None:
        now = self.service.clock.now()
        decisions = cycle.decide(self.state, self.book, now, self.settings.namespace)
        for index, decision in enumerate(decisions):
            try:
                await bus.publish(decision)
            except Exception as exc:  # noqa: BLE001 - forget this and every later assumption
                self.service.log.warning("publish_failed", op_id=decision.op_id, error=repr(exc))
                for unpublished in decisions[index:]:
                    self.state.fold.unassume(unpublished.op_id, now, type(unpublished))
                self.wake.set()
                await asyncio.sleep(0.2)
                return
            self.service.log.info(codec.type_of(decision), op_id=decision.op_id)


def set_queues(cmd: SetQueues, ctx: Context) -> QueuesConfigured:
    try:
        compile_book(cmd.config)
    except QueuesConfigError as exc:
        raise InvalidInput("invalid_queues", str(exc)) from None
    source = f"command:{cmd.requested_by or '?'}#{config_digest(cmd.config)}"
    return QueuesConfigured(config=cmd.config, at=ctx.clock.now(), source=source)


# command type -> how admission answers it (a handler returns the events that follow)
COMMANDS: dict[type, Callable[[Admission, Any, Context], Any]] = {
    SubmitOperation: lambda a, cmd, ctx: handlers.on_submit(cmd, ctx, a.state, a.book),
    StopOperation: lambda a, cmd, ctx: handlers.on_stop(cmd, ctx, a.state),
    ApproveOperation: lambda a, cmd, ctx: handlers.on_approve(cmd, ctx, a.state),
    RejectOperation: lambda a, cmd, ctx: handlers.on_reject(cmd, ctx, a.state),
    RestartOperation: lambda a, cmd, ctx: handlers.on_rerun(cmd, ctx, a.state, a.book),
    CopyOperation: lambda a, cmd, ctx: handlers.on_rerun(cmd, ctx, a.state, a.book),
    ResumeOperation: lambda a, cmd, ctx: handlers.on_resume(cmd, ctx, a.state, a.book),
    CreateSchedule: lambda a, cmd, ctx: sched.on_create(cmd, ctx.clock.now(), a.schedules),
    DeleteSchedule: lambda a, cmd, ctx: sched.on_delete(cmd, ctx.clock.now(), a.schedules),
    SetQueues: lambda a, cmd, ctx: set_queues(cmd, ctx),
}


def build(settings: Settings, clock=None) -> Service:
    service = Service("admission", settings, clock)
    admission = Admission(service, settings)
    service.admission = admission  # type: ignore[attr-defined]  # for in-process inspection
    service.on_start.append(admission.start)
    service.extra_tasks += [admission.run_cycles, admission.config.watch_file, admission.run_schedule_runs]
    sub = service.consume(subjects.ADMISSION_COMMANDS, subjects.CMD_STREAM, [subjects.CMD_ALL],
                          decoder=codec.decode_command)
    for kind, answer in COMMANDS.items():
        service.on(sub, kind)(_handler(admission, answer))
    return service


def _handler(admission: Admission, answer: Callable[[Admission, Any, Context], Any]):
    async def handle(cmd: Any, ctx: Context) -> Any:
        return answer(admission, cmd, ctx)
    return handle
