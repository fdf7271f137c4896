"""The admission service.

Consumes the commands (``cmd.>``: submit, stop, touch, approve, reject, restart, copy, resume, schedules,
set queues, hold/drain/resume a queue) and answers each with the events that follow (``ops.submitted``, ``ops.stop_requested``,
``ops.schedule_created``, ``config.queues``, ...). On start it rebuilds its state by replaying the
config, cluster and op streams, then follows them live; it answers the ``why`` and ``queues``
queries; its scheduling cycle (``cycle``) runs whenever something changed and emits the decisions
(``ops.admitted``, ``ops.preempt_requested``, ``ops.retry_scheduled``, ...); due schedules submit
their runs. Replicas all fold the streams and answer queries; one leads (``services.runtime.leadership``):
only the leader consumes the commands, runs cycles and fires schedules, and what it decides is published
behind the fence of its claim (``ops.lease.admission.claimed``), so a stale leader's decision is refused."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TypeVar

import msgspec

from opsched.bus.bus import Bus, Fence, Received
from opsched.bus.errors import Fenced, InvalidInput, MessageTooLarge
from opsched.bus.refusals import NotPermitted
from opsched.proto import codec, subjects
from opsched.proto.access import requester
from opsched.proto.commands import (
    SINGULAR,
    ApproveOperation,
    ApproveOperations,
    Command,
    CopyOperation,
    OperationsCommand,
    RejectOperation,
    RejectOperations,
    RestartOperation,
    ResumeOperation,
    StopOperation,
    StopOperations,
    SubmitOperation,
    TouchOperation,
    verb_of,
)
from opsched.proto.config import QueuesConfigured, SetQueues
from opsched.proto.events import ErrorRaised, Event, FailureFinal, OperationRejected, OperationSubmitted
from opsched.proto.leases import is_claim
from opsched.proto.queries import QueuesRequest, SchedulesRequest, WhyRequest
from opsched.proto.queue_stops import QueueStopSet, SetQueueStop
from opsched.proto.queues import QueuesConfig
from opsched.proto.reasons import Reason, Refusal, pending
from opsched.proto.schedules import (
    CreateSchedule,
    DeleteSchedule,
    ScheduleCreated,
    ScheduleDeleted,
    ScheduleEvent,
    refused_creation,
)
from opsched.services.admission import cycle, handlers, hooks, metrics, queries, schedule_runner, traces, unpublishable
from opsched.services.admission import schedules as sched
from opsched.services.admission.command_rate import CommandRate, requester_of
from opsched.services.admission.config_source import ConfigSource, queues_configured
from opsched.services.admission.measures import Measures
from opsched.services.admission.model.queues import Book, QueuesConfigError, compile_book
from opsched.services.admission.purge import CommandPurge, Retention
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.admission.submit_rate import SubmitRate
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.deadletter import UNKNOWN_OP, guess_op_id
from opsched.services.runtime.fold_progress import FoldProgress
from opsched.services.runtime.leadership import Leadership, first
from opsched.services.runtime.sealing import Sealer
from opsched.services.runtime.service import Consumer, Context, Service, Task
from opsched.services.runtime.settings import Settings

INVALID_SPEC = Refusal.INVALID_SPEC
Sent = TypeVar("Sent", bound=msgspec.Struct)


def sent_by(cmd: Sent, subject: str) -> Sent:
    """The command as its sender sent it: ``requested_by`` is the user of its subject (``proto.access``)."""
    return msgspec.structs.replace(cmd, requested_by=requester(subject, getattr(cmd, "requested_by", "")))


class Admission(Service):
    name = "admission"
    commands = Consumer(subjects.ADMISSION_COMMANDS, subjects.CMD_STREAM, [subjects.CMD_ALL],
                        decoder=codec.decode_command)
    leadership: Leadership  # one replica decides (set in __init__)
    in_order = True  # its fold and cycles decide on the stream's order: one message at a time

    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        super().__init__(settings, clock)
        self.state = AdmissionState(settings.retention_tombstones)
        self.book: Book = compile_book(QueuesConfig())
        self.config = ConfigSource(settings.queues_file, self.clock, self.log)
        self.schedules = sched.Schedules(status_of=self._run_status)
        self.wake = asyncio.Event()
        self.submit_rate = SubmitRate(settings.submit_rate_per_min, settings.submit_burst)  # folds ``submitted``
        self.command_rate = CommandRate(settings.command_rate_per_min, settings.command_burst)  # leader-local
        self.undecodable = 0  # messages of the op stream skipped: they do not decode
        self.measures = Measures()  # its decisions, cycles and the op stream's moves, for /metrics
        self.live = False  # the op stream is followed past its replay (what moves now is counted)
        self.progress = FoldProgress()  # how far the op stream is folded (commands wait for their op)
        self.leadership = Leadership(subjects.ADMISSION_ROLE, self.clock, settings.lease_ttl_s, settings.lease_renew_s,
                                     self.progress.reach, self.log)
        self.retention = Retention(self.state.fold, settings, self.clock, self.log,  # finished ops leave memory;
                                   is_leader=self.leadership.deciding,  # only the leader purges
                                   agents=self.agents)  # ... what no service's durable holds
        self.command_purge = CommandPurge(settings, self.log)  # consumed commands leave: the cap counts the rest

    async def start(self, bus: Bus) -> None:
        """Config, then cluster facts, then the op stream: replayed into state, then followed live."""
        await bus.replay(subjects.CONFIG_STREAM, subjects.CONFIG_ALL, self.on_config)
        await self.config.publish_file(bus, at_start=True)
        await bus.replay(subjects.CLUSTER_STREAM, subjects.CLUSTER_ALL, self.on_cluster)
        await bus.replay(subjects.OPS_STREAM, subjects.OPS_ALL, self.fold, headers=self.tracer is not None)
        await bus.serve(subjects.QUERY_WHY, self.answer, group="admission")
        await bus.serve(subjects.QUERY_QUEUES, self.answer, group="admission")
        await bus.serve(subjects.QUERY_SCHEDULES, self.answer, group="admission")
        self.log.info("state_rebuilt", ops=len(self.state.ops), nodes=len(self.state.nodes),
                      queues=self.book.names, config=self.book.source)
        self.live = True
        self.wake.set()

    def tasks(self) -> list[Task]:
        lead = self.leadership
        return [lead.run, self.config.watch_file, lead.while_leading(self.run_cycles),
                lead.while_leading(self.run_schedule_runs), self.retention.run, lead.while_leading(self.command_purge.run)]

    def agents(self) -> set[str]:
        """The named agents: declared in the queue config, or heard from (their dispatchers' durables)."""
        return {agent.name for agent in self.book.config.agents} | set(self.state.fold.heartbeats)

    # ---- the commands: each handler returns the events that follow; the requester is the subject's user ----
    @commands.handles(SubmitOperation)
    async def on_submit(self, cmd: SubmitOperation, ctx: Context) -> Event | list[Event] | None:
        cmd = sent_by(cmd, ctx.subject)
        return handlers.on_submit(cmd, ctx, self.state, self.book, self.submit_rate, self.commands_over(ctx))

    @commands.handles(StopOperation)
    async def on_stop(self, cmd: StopOperation, ctx: Context) -> Event | None:
        cmd = sent_by(cmd, ctx.subject)
        await self.known(cmd.op_id)
        handlers.check_owner("stop", cmd.op_id, ctx, self.state, self.book)
        return handlers.on_stop(cmd, ctx, self.state)

    @commands.handles(TouchOperation)
    async def on_touch(self, cmd: TouchOperation, ctx: Context) -> Event | None:
        cmd = sent_by(cmd, ctx.subject)
        await self.known(cmd.op_id)
        handlers.check_owner("touch", cmd.op_id, ctx, self.state, self.book)
        return handlers.on_touch(cmd, ctx, self.state)

    @commands.handles(ApproveOperation)
    async def on_approve(self, cmd: ApproveOperation, ctx: Context) -> Event | None:
        cmd = sent_by(cmd, ctx.subject)
        await self.known(cmd.op_id)
        return handlers.on_approve(cmd, ctx, self.state)

    @commands.handles(RejectOperation)
    async def on_reject(self, cmd: RejectOperation, ctx: Context) -> Event | None:
        cmd = sent_by(cmd, ctx.subject)
        await self.known(cmd.op_id)
        return handlers.on_reject(cmd, ctx, self.state, self.book)

    @commands.handles(StopOperations, ApproveOperations, RejectOperations)
    async def on_many(self, cmd: OperationsCommand, ctx: Context) -> list[Event]:
        """A stop, approve or reject of several ops: each distinct op judged as the singular command with the same
        ``request_id`` (its owner checked where the singular's is), answered on its own subjects: the singular's
        event, or an ``error`` event whose ``command_msg_id`` is the singular's msg id (never dead-lettered: a
        refusal of one op is an answer, not bad input)."""
        cmd = sent_by(cmd, ctx.subject)
        single = SINGULAR[type(cmd)]
        verb = verb_of(type(cmd))
        extra = {"reason": cmd.reason} if isinstance(cmd, StopOperations) else {"comment": getattr(cmd, "comment", "")}
        out: list[Event] = []
        for op_id in dict.fromkeys(cmd.op_ids):
            one = single(op_id=op_id, requested_at=cmd.requested_at, requested_by=cmd.requested_by,
                         request_id=cmd.request_id, **extra)
            await self.known(op_id)
            try:
                event = self._one_of_many(one, ctx)
            except InvalidInput as exc:
                out.extend(exc.events)
                out.append(ErrorRaised(op_id=op_id, at=ctx.clock.now(), service=self.name, subject=ctx.subject,
                                       reason=exc.reason, message=exc.message,
                                       command_msg_id=subjects.msg_id(op_id, verb, cmd.request_id)))
                continue
            if event is not None:
                out.append(event)
        return out

    def _one_of_many(self, cmd: Command, ctx: Context) -> Event | None:
        if isinstance(cmd, StopOperation):
            handlers.check_owner("stop", cmd.op_id, ctx, self.state, self.book)
            return handlers.on_stop(cmd, ctx, self.state)
        if isinstance(cmd, ApproveOperation):
            return handlers.on_approve(cmd, ctx, self.state)
        assert isinstance(cmd, RejectOperation)
        return handlers.on_reject(cmd, ctx, self.state, self.book)

    @commands.handles(RestartOperation, CopyOperation)
    async def on_rerun(self, cmd: RestartOperation | CopyOperation, ctx: Context) -> Event | list[Event] | None:
        cmd = sent_by(cmd, ctx.subject)
        await self.known(cmd.op_id)
        handlers.check_owner("restart or copy", cmd.op_id, ctx, self.state, self.book)
        return handlers.on_rerun(cmd, ctx, self.state, self.book, self.submit_rate, self.commands_over(ctx))

    @commands.handles(ResumeOperation)
    async def on_resume(self, cmd: ResumeOperation, ctx: Context) -> Event | None:
        cmd = sent_by(cmd, ctx.subject)
        await self.known(cmd.op_id)
        handlers.check_owner("resume", cmd.op_id, ctx, self.state, self.book)
        return handlers.on_resume(cmd, ctx, self.state, self.book)

    @commands.handles(CreateSchedule)
    async def on_create_schedule(self, cmd: CreateSchedule, ctx: Context) -> ScheduleCreated | None:
        cmd = sent_by(cmd, ctx.subject)
        return sched.on_create(cmd, ctx.clock.now(), self.schedules)

    @commands.handles(DeleteSchedule)
    async def on_delete_schedule(self, cmd: DeleteSchedule, ctx: Context) -> ScheduleDeleted | None:
        cmd = sent_by(cmd, ctx.subject)
        return sched.on_delete(cmd, ctx.clock.now(), self.schedules)

    @commands.handles(SetQueues)
    async def on_set_queues(self, cmd: SetQueues, ctx: Context) -> QueuesConfigured:
        cmd = sent_by(cmd, ctx.subject)
        return queues_configured(cmd, ctx.clock.now(), self.book.source)

    @commands.handles(SetQueueStop)
    async def on_set_queue_stop(self, cmd: SetQueueStop, ctx: Context) -> QueueStopSet:
        """Hold, drain or resume a queue (``queue_stops``): its ``QueueStopSet``, or a refusal."""
        cmd = sent_by(cmd, ctx.subject)
        return handlers.on_set_queue_stop(cmd, self.state.stops, self.book, ctx.clock.now())

    # ---- the command rate: every command charged to its requester as it is taken (``command_rate``) ----
    def arrived(self, msg: Received, message: object | None) -> None:
        cost = len(message.op_ids) if isinstance(message, OperationsCommand) else 1  # a bulk command: one per op
        self.command_rate.charge(self._requester(msg, message), msg.stream_seq, self.clock.now(), cost)

    def refusal_text(self, msg: Received, reason: str, text: str) -> str | None:
        return self.command_rate.refused(self._requester(msg, None), msg.stream_seq, text, self.clock.now(),
                                         self.log)

    def commands_over(self, ctx: Context) -> handlers.OverRate | None:
        """The command rate's verdict on the command in hand: None within it, else who is over and for how long."""
        wait_s = self.command_rate.verdict(ctx.stream_seq)
        return None if wait_s is None else handlers.OverRate(self.command_rate, wait_s)

    @staticmethod
    def _requester(msg: Received, message: object | None) -> str:
        """Who sent ``msg``: its subject's user (on an open server, the name a decoded command claims)."""
        claimed = getattr(message, "requested_by", "") if message is not None else ""
        return requester_of(msg.subject, claimed if isinstance(claimed, str) else "")

    # ---- a command that cannot be decoded: a submit refused by the contract ends its op rejected ----
    async def events_for_malformed(self, msg: Received, error: str) -> list[OperationRejected]:
        """A submit naming a valid op id admission does not know, refused on decode (an out-of-bounds spec):
        the op ends ``rejected`` (``invalid_spec``) with the reason, as well as the error event and dead letter."""
        op_id = guess_op_id(msg.data)
        if op_id == UNKNOWN_OP or not subjects.is_submit(msg.subject):
            return []
        await self.known(op_id)
        if op_id in self.state.ops or op_id in self.state.fold.gone:
            return []  # its submit was judged already: a malformed repeat changes nothing
        return [OperationRejected(op_id=op_id, at=self.clock.now(), reason=INVALID_SPEC, message=error[:2000])]

    # ---- the streams, replayed on start and followed live ----
    async def on_config(self, data: bytes, seq: int) -> None:
        await self.config.on_message(data, seq)
        self._queue_stop(data)  # a queue held, drained or resumed (``queue_stops``)
        latest = self.config.latest
        if latest is None or latest.source == self.book.source:
            return
        try:
            self.book = compile_book(latest.config, latest.source)
        except QueuesConfigError as exc:
            self.log.error("config_not_applied", source=latest.source, error=str(exc))
            return
        self.state.queues.configure_queues(latest.config.queues, self.clock.now())
        self.log.info("queues_configured", source=latest.source, queues=self.book.names)
        self.wake.set()

    def _queue_stop(self, data: bytes) -> None:
        try:
            message = codec.decode_config(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # logged by the config source
        if not isinstance(message, QueueStopSet) or not self.state.stops.apply(message):
            return
        self.state.queues.parked.pop(message.queue, None)  # resumed (or held): look at it again
        self.log.info("queue_stop_set", queue=message.queue, stop_policy=message.stop_policy, by=message.by)
        self.wake.set()

    async def on_cluster(self, data: bytes, seq: int) -> None:
        try:
            event = codec.decode_cluster(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        if self.state.observe(event):
            self.wake.set()

    async def fold(self, data: bytes, seq: int, headers: Mapping[str, str] | None = None) -> None:
        try:
            self._fold(data, seq, headers)
        finally:
            self.progress.advance(seq)

    async def known(self, op_id: str) -> None:
        """Before a command about ``op_id`` is judged: fold everything stored so far if the op is new."""
        if op_id not in self.state.ops and op_id not in self.state.fold.gone and self.bus is not None:
            await self.progress.reach(await self.bus.last_stored(subjects.OPS_STREAM, subjects.OPS_ALL))

    def _fold(self, data: bytes, seq: int = 0, headers: Mapping[str, str] | None = None) -> None:
        """Never raises: a message that does not decode is skipped (counted, logged; producers' bad messages
        are dead-lettered where they are consumed), an event the fold cannot take ends its op (``fold``)."""
        try:
            event = codec.decode_ops_stream(data)
        except Exception as exc:  # noqa: BLE001 - whatever the decoder (or a struct's own check) raised
            if is_claim(data):
                return  # a leader's claim: the fence, not an op's event
            self.undecodable += 1
            refused = refused_creation(data)  # a stored schedule that predates a bound: disabled, with why
            if refused is not None and self.schedules.refuse_stored(refused, str(exc)):
                self.log.warning("schedule_refused", schedule_id=refused, error=str(exc))
            else:
                self.log.warning("undecodable_event_skipped", seq=seq, error=f"{exc!r}"[:500],
                                 skipped=self.undecodable)
            return
        if isinstance(event, ScheduleEvent):
            try:
                self.schedules.apply(event)
            except Exception as exc:  # noqa: BLE001 - a fold never raises
                self.log.error("fold_failed", op_id=event.op_id, event_type=codec.type_of(event), error=f"{exc!r}")
            return
        if isinstance(event, OperationSubmitted):
            self.submit_rate.observe(event)
        before = self.state.ops.get(event.op_id) if self.live else None
        was = before.status if before is not None else None
        if self.state.apply(event, seq):
            self.wake.set()
        if self.live:
            self.measures.saw(event, self.state.ops, was)
        if headers is not None:  # tracing on: an op's trace context (``traces``)
            traces.remember(self.state.ops, event, headers)

    # ---- the queries ----
    async def answer(self, data: bytes) -> bytes:
        try:
            request = codec.decode_query(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return codec.encode(queries.WhyAnswer(op_id="-", found=False, reasons=[
                pending(Reason.BAD_REQUEST, error=str(exc))]))
        if isinstance(request, WhyRequest):
            return codec.encode(queries.why(self.state, self.book, request.op_id, self.clock.now()))
        if isinstance(request, QueuesRequest):
            return codec.encode(queries.queues(self.state, self.book, self.clock.now()))
        if isinstance(request, SchedulesRequest):
            return codec.encode(self.schedules.statuses(self.clock.now(), self._status_label, request.ids))
        return codec.encode(queries.WhyAnswer(op_id="-", found=False))

    # ---- the background tasks ----
    async def run_cycles(self, bus: Bus, stop: asyncio.Event) -> None:
        """While leading: a cycle whenever something changed (at once when the turn begins)."""
        self.wake.set()
        while not stop.is_set():
            try:
                await asyncio.wait_for(first(self.wake.wait(), stop.wait()), timeout=0.5)  # the turn's end: at once
            except asyncio.TimeoutError:
                if not self.state.queues.due(self.clock.now()):
                    continue
            self.wake.clear()
            if not stop.is_set():
                await self.cycle_once(bus, self.leadership.fence)

    async def cycle_once(self, bus: Bus, fence: Fence | None = None) -> None:
        """Decide on the state now and publish each decision (behind ``fence``, the leader's claim)."""
        now, began, began_ns = self.clock.now(), time.perf_counter(), time.time_ns()
        decisions = cycle.decide(self.state, self.book, now, self.settings.namespace,
                                 Sealer.of(self.settings.env_key_file))
        self.measures.decided(decisions, time.perf_counter() - began, self.state.ops, now)
        for index, decision in enumerate(decisions):
            try:
                with traces.deciding(self.tracer, decision, self.state.ops.get(decision.op_id), began_ns,
                                     len(decisions)):  # the decision's span (tracing on): its event carries it
                    decision = await self._publish_decision(bus, decisions, index, fence, now)
            except unpublishable.UNPUBLISHABLE as exc:  # its op's end could not be published either
                self._unpublished(decisions[index], exc, now)
                continue  # ended here all the same: the ops behind it are not held up
            except Exception as exc:  # noqa: BLE001 - forget this and every later assumption
                self.log.warning("publish_failed", op_id=decision.op_id, error=f"{exc!r} {exc}")
                for unpublished in decisions[index:]:
                    self.state.fold.unassume(unpublished.op_id, now, type(unpublished))
                if isinstance(exc, Fenced):  # another replica leads now: it decides again, not us
                    self.leadership.refused()
                    return
                self.stalls.failed("cycle", f"publishing {codec.type_of(decision)} of {decision.op_id}: {exc!r}",
                                   now)
                self.wake.set()
                await asyncio.sleep(0.2)
                return
            self.log.info(codec.type_of(decision), op_id=decision.op_id)
        await self._submit_hooks(bus)
        self.stalls.succeeded("cycle")

    async def _submit_hooks(self, bus: Bus) -> None:
        """Submit the hooks of every op whose end is stored (``hooks``): once each, by its op id; one whose publish
        fails stays due, tried again at the next cycle."""
        due = self.state.hooks
        for op_id in list(due.ops):
            op = self.state.ops.get(op_id)
            for cmd in hooks.due(op, self.clock.now()) if op is not None else []:
                if cmd.op_id in self.state.ops or cmd.op_id in self.state.fold.gone:
                    continue  # submitted already (a replayed end)
                try:
                    await bus.publish(cmd)
                except Exception as exc:  # noqa: BLE001 - the next cycle tries again; the end is not lost
                    self.log.warning("hook_submit_failed", op_id=op_id, hook_op_id=cmd.op_id, error=f"{exc!r}")
                    self.wake.set()
                    return
                self.log.info("hook_submitted", op_id=op_id, hook_op_id=cmd.op_id)
            due.done(op_id)

    async def _publish_decision(self, bus: Bus, decisions: list[Event], index: int, fence: Fence | None,
                                now: datetime) -> Event:
        """Publish ``decisions[index]``; one that cannot be published (too large, or refused by the server) ends
        its op instead (never retried), published in its place (``unpublishable``)."""
        try:
            await bus.publish(decisions[index], fence=fence)
        except unpublishable.UNPUBLISHABLE as exc:
            decisions[index] = self._end_instead(decisions[index], exc, now)
            await bus.publish(decisions[index], fence=fence)
        return decisions[index]

    def _unpublished(self, end: Event, exc: MessageTooLarge | NotPermitted, now: datetime) -> None:
        """The end of an op whose decision could not be published could not be published either: it stays ended
        here (holding nothing), logged and reported by readiness; a restart replays the op and decides it again."""
        self.log.error("op_end_unpublishable", op_id=end.op_id, event_type=codec.type_of(end), error=str(exc))
        if isinstance(exc, NotPermitted):
            self.refused(exc)

    def metric_families(self) -> list:
        return [*metrics.families(self.state, self.book), *self.measures.families()]

    def _end_instead(self, decision: Event, exc: MessageTooLarge | NotPermitted, now: datetime) -> Event:
        """Forget ``decision`` and assume the end of its op instead (``unpublishable``)."""
        self.log.error("decision_unpublishable", op_id=decision.op_id, event_type=codec.type_of(decision),
                       error=str(exc))
        if isinstance(exc, NotPermitted):
            self.refused(exc)
        if isinstance(decision, FailureFinal):
            raise exc  # its op ended already (failed): nothing ends it instead; told as an end unpublishable
        self.state.fold.unassume(decision.op_id, now, type(decision))
        end = unpublishable.ending(self.state.ops[decision.op_id], decision, exc, now)
        self.state.apply(end)
        return end

    def too_large(self, message: object, msg: Received, exc: MessageTooLarge) -> list:
        """A submit, restart or copy whose ``submitted`` is too large: the op is rejected with the reason."""
        return unpublishable.refused_command(message, exc, self.clock.now()) or super().too_large(message, msg, exc)

    async def run_schedule_runs(self, bus: Bus, stop: asyncio.Event) -> None:
        await schedule_runner.run_schedules(bus, self.clock, self.schedules,
                                            schedule_runner.submitter(bus, self.clock), stop, self.log)

    def _status_label(self, op_id: str) -> str:
        status = self.state.fold.status_of(op_id)
        return status.label if status is not None else ""

    def _run_status(self, op_id: str) -> str | None:
        return sched.run_status(self.state.fold.status_of(op_id))


def build(settings: Settings, clock: Clock | None = None) -> Admission:
    return Admission(settings, clock)
