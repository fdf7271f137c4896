"""The Python SDK: submit operations, list them, watch them, stop them — all over the bus."""
from __future__ import annotations

import asyncio
import functools
import hashlib
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from opsched import logstream
from opsched.bus import tracing
from opsched.bus.bus import Bus
from opsched.bus.credentials import Credentials
from opsched.directreads import reads_for
from opsched.logstream import LogsRefused, LogsUnanswered  # noqa: F401 - the SDK's callers catch them from here
from opsched.proto import codec, subjects
from opsched.proto.commands import (
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
from opsched.proto.events import Event
from opsched.proto.health import HealthAnswer, HealthRequest
from opsched.proto.lifecycle import TERMINAL_LABELS
from opsched.proto.limits import MAX_OPS_PER_COMMAND
from opsched.proto.queries import (
    CostAnswer,
    CostRequest,
    LogsRequest,
    QueuesAnswer,
    QueuesRequest,
    SchedulesAnswer,
    SchedulesRequest,
    WhyAnswer,
    WhyRequest,
)
from opsched.proto.queue_stops import SetQueueStop
from opsched.proto.queues import QueuesConfig
from opsched.proto.schedules import (
    MAX_SCHEDULE_ID,
    CreateSchedule,
    DeleteSchedule,
    ScheduleSpec,
)
from opsched.proto.spec import OpSpec
from opsched.proto.summaries import OpSummary
from opsched.rules.spec_size import SpecTooLarge, too_large
from opsched.verdicts import (  # noqa: F401 - VerdictUnknown: the SDK's callers catch it from here
    VERDICT_TIMEOUT_S,
    CommandRefused,
    Request,
    Verdict,
    VerdictUnknown,
    await_queue_stop,
    await_queues_set,
    await_verdict,
    await_verdicts,
    new_request_id,
)
from opsched.view import OpRow, OpsView


def new_op_id() -> str:
    return uuid.uuid4().hex[:12]


def new_op_ids(given: str | None, specs: list) -> list[str]:
    """The ids of a file's ops: ``given``, a sweep's ``<given>-0``, ``<given>-1``, ...; random ids otherwise."""
    if given:
        return [f"{given}-{i}" for i in range(len(specs))] if specs[0].batch else [given]
    return [new_op_id() for _ in specs]


def new_schedule_id(name: str = "") -> str:
    """``<name as a token, cut>-<6 hex>``: short, so run op ids ``<id>-<run>`` stay valid tokens."""
    slug = "".join(c if c.isalnum() and c.isascii() else "-" for c in name.lower()).strip("-")
    slug = "-".join(part for part in slug.split("-") if part)[: MAX_SCHEDULE_ID - 7].strip("-")
    return f"{slug}-{uuid.uuid4().hex[:6]}" if slug else uuid.uuid4().hex[:12]



def _decoded(data: bytes) -> Event | None:
    try:
        return codec.decode_event(data)
    except Exception:  # noqa: BLE001 - somebody's malformed message: no op's event
        return None


class ActingAs:
    """A bus whose commands go on another user's subjects (``cmd.<user>.…``, ``bus.addressing.subject_for``): what
    the gateway sends for a token's identity. Everything else is the connection's own; the server still allows only
    what the connection's user may publish."""

    def __init__(self, bus: Bus, user: str) -> None:
        self._bus, self.user = bus, user

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bus, name)

    async def publish(self, message: msgspec.Struct, *, subject: str | None = None, **options: Any) -> Any:
        from opsched.bus.addressing import subject_for

        return await self._bus.publish(message, subject=subject or subject_for(message, self.user), **options)


class Client:
    def __init__(self, bus: Bus, reads: Any = None) -> None:
        self.bus = bus
        self.reads = reads if reads is not None else reads_for(bus)  # how it reads the streams

    @classmethod
    async def connect(cls, nats_url: str, name: str = "opsched-client",
                      credentials: Credentials | None = None, *, ca_file: Path | str | None = None) -> "Client":
        """As ``credentials``' user, in the clients' account (none: an open server, one account for all); its
        commands go on ``cmd.<user>.``. ``ca_file``: the CA that signed the server's certificate (TLS, the server
        verified). A user reads the streams through what the services' account exports (``DirectReads``); on an
        open server the client creates the streams if the services have not yet (its commands are kept)."""
        bus = await Bus.connect(nats_url, name, connect_timeout=3.0, max_reconnect_attempts=2,
                                credentials=credentials, tls_ca_file=ca_file)
        if bus.user == subjects.ANONYMOUS:
            await bus.ensure_streams()
        return cls(bus)

    @classmethod
    async def from_context(cls, path: Path | str | None = None, name: str = "opsched-client") -> "Client":
        """Connect as a context file says (``path``, else ``$OPSCHED_CONTEXT``, else ``.opsched/context.json``,
        which `opsched up` writes): its URL, CA and user, each overridden by ``NATS_URL``, ``OPSCHED_NATS_CA``,
        ``OPSCHED_NATS_USER`` (+ ``_PASSWORD_FILE`` or ``_CREDS``) when set (``opsched.context``)."""
        from opsched import context

        target = context.resolve(context=path)
        return await cls.connect(target.url, name, target.credentials, ca_file=target.ca_file)

    async def close(self) -> None:
        await self.bus.close()

    def acting_as(self, user: str) -> "Client":
        """This client sending its commands as ``user`` (``ActingAs``), on the same connection and reads."""
        return Client(ActingAs(self.bus, user), self.reads)  # type: ignore[arg-type]

    async def submit(self, spec: OpSpec, op_id: str | None = None, requested_by: str = "sdk",
                     traceparent: str | None = None) -> str:
        """Publish a submit command; the same op_id submitted twice is one operation. A spec over
        ``MAX_SPEC_BYTES`` is refused before anything is published (``SpecTooLarge``). ``traceparent`` (W3C): the
        op's trace continues the caller's; tracing on (``OTEL_TRACES_EXPORTER``), the submit is a PRODUCER span."""
        oversized = too_large(spec)
        if oversized is not None:
            raise SpecTooLarge(oversized)
        if traceparent is not None and not tracing.valid_traceparent(traceparent):
            raise ValueError(f"traceparent {traceparent!r} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")
        op_id = op_id or new_op_id()
        cmd = codec.checked(SubmitOperation(op_id=op_id, spec=spec, requested_at=datetime.now(timezone.utc),
                                            requested_by=requested_by))  # raises codec.Refused, naming the field
        given = {tracing.TRACEPARENT: traceparent} if traceparent else None
        tracer = tracing.tracer("client")
        if tracer is None:
            await self.bus.publish(cmd, headers=given)
            return op_id
        subject = subjects.submit(spec.queue, self.bus.user)
        attributes = {"messaging.system": "nats", "messaging.operation.type": "send", "messaging.operation.name":
                      "send", "messaging.destination.name": subject, "opsched.op_id": op_id, "opsched.queue": spec.queue}
        with tracing.span(tracer, "send submit", kind="PRODUCER", parent=given, attributes=attributes):
            await self.bus.publish(cmd)
        return op_id

    async def stop(self, op_id: str, reason: str = "stopped by user", *, wait: bool = True,
                   timeout: float = VERDICT_TIMEOUT_S) -> Verdict | None:
        """Stop an op; with ``wait`` (the default) return admission's verdict (``opsched.verdicts``): raises
        ``CommandRefused`` (unknown op, already ended, not allowed, ...) or ``VerdictUnknown`` (no answer in
        ``timeout`` s). ``wait=False``: publish and return None at once."""
        return await self._command(StopOperation(op_id=op_id, reason=reason), wait, timeout)

    async def touch(self, op_id: str, *, wait: bool = True, timeout: float = VERDICT_TIMEOUT_S) -> Verdict | None:
        """Say a running service is in use: its culling idle time starts again. The verdict as ``stop``'s (refused
        ``not_a_running_service`` when the op is not a service, or not running)."""
        return await self._command(TouchOperation(op_id=op_id), wait, timeout)

    async def approve(self, op_id: str, comment: str = "", requested_by: str = "sdk", *, wait: bool = True,
                      timeout: float = VERDICT_TIMEOUT_S) -> Verdict | None:
        """Release an op held for approval; the verdict as ``stop``'s (approved twice: ``nothing_to_do``)."""
        return await self._command(ApproveOperation(op_id=op_id, comment=comment, requested_by=requested_by),
                                   wait, timeout)

    async def reject(self, op_id: str, comment: str = "", requested_by: str = "sdk", *, wait: bool = True,
                     timeout: float = VERDICT_TIMEOUT_S) -> Verdict | None:
        """Refuse an op held for approval (it ends rejected); the verdict as ``stop``'s."""
        return await self._command(RejectOperation(op_id=op_id, comment=comment, requested_by=requested_by),
                                   wait, timeout)

    async def stop_many(self, op_ids: Sequence[str], reason: str = "stopped by user", *,
                        timeout: float = VERDICT_TIMEOUT_S) -> dict[str, Verdict | None]:
        """Stop several ops in one command message per ``MAX_OPS_PER_COMMAND`` ids: op id -> admission's verdict
        (as ``stop``'s; a refusal is a verdict here, not raised), None for an op not answered within ``timeout``."""
        return await self._many(StopOperations, op_ids, timeout, reason=reason)

    async def approve_many(self, op_ids: Sequence[str], comment: str = "", requested_by: str = "sdk", *,
                           timeout: float = VERDICT_TIMEOUT_S) -> dict[str, Verdict | None]:
        """Release several ops held for approval (a sweep's): the verdicts as ``stop_many``'s."""
        return await self._many(ApproveOperations, op_ids, timeout, comment=comment, requested_by=requested_by)

    async def reject_many(self, op_ids: Sequence[str], comment: str = "", requested_by: str = "sdk", *,
                          timeout: float = VERDICT_TIMEOUT_S) -> dict[str, Verdict | None]:
        """Refuse several ops held for approval: the verdicts as ``stop_many``'s."""
        return await self._many(RejectOperations, op_ids, timeout, comment=comment, requested_by=requested_by)

    async def _many(self, kind: type[OperationsCommand], op_ids: Sequence[str], timeout: float,
                    **fields: Any) -> dict[str, Verdict | None]:
        ids, out, verb = list(dict.fromkeys(op_ids)), dict[str, Verdict | None](), verb_of(kind)
        for i in range(0, len(ids), MAX_OPS_PER_COMMAND):
            chunk = ids[i:i + MAX_OPS_PER_COMMAND]
            cmd = kind(op_ids=chunk, requested_at=datetime.now(timezone.utc), request_id=new_request_id(), **fields)
            out |= await await_verdicts(self.reads, verb, chunk, cmd.request_id, functools.partial(self.bus.publish, cmd),
                                        timeout)
        return out

    async def restart(self, op_id: str, params: dict | None = None, copy: bool = False,
                      as_op_id: str | None = None, requested_by: str = "sdk", *, wait: bool = True,
                      timeout: float = VERDICT_TIMEOUT_S) -> str:
        """A new op from ``op_id``'s spec (a copy also gets the original's outputs to start from): its id, once
        submitted (``wait``; refused: ``CommandRefused``, no answer: ``VerdictUnknown``). ``rerun`` returns the
        verdict itself."""
        if not wait:
            kind = CopyOperation if copy else RestartOperation
            new_id = as_op_id or new_op_id()
            await self.bus.publish(kind(op_id=op_id, new_op_id=new_id, params=params or {}, requested_by=requested_by,
                                        requested_at=datetime.now(timezone.utc), request_id=new_request_id()))
            return new_id
        return (await self.rerun(op_id, params, copy, as_op_id, requested_by, timeout=timeout)).new_op_id

    async def rerun(self, op_id: str, params: dict | None = None, copy: bool = False, as_op_id: str | None = None,
                    requested_by: str = "sdk", *, timeout: float = VERDICT_TIMEOUT_S) -> Verdict:
        """``restart`` (or ``copy``), returning admission's verdict: the new op submitted (``new_op_id``)."""
        kind = CopyOperation if copy else RestartOperation
        cmd = kind(op_id=op_id, new_op_id=as_op_id or new_op_id(), params=params or {}, requested_by=requested_by)
        verdict = await self._command(cmd, True, timeout)
        assert verdict is not None
        return verdict

    async def resume(self, op_id: str, params: dict | None = None, requested_by: str = "sdk", *, wait: bool = True,
                     timeout: float = VERDICT_TIMEOUT_S) -> Verdict | None:
        """Continue a stopped, failed or timed-out op in place; the verdict as ``stop``'s (``not_resumable``...)."""
        return await self._command(ResumeOperation(op_id=op_id, params=params or {}, requested_by=requested_by),
                                   wait, timeout)

    async def _command(self, cmd: Command, wait: bool, timeout: float) -> Verdict | None:
        """Publish ``cmd`` with a new request id; with ``wait``, follow its op first and return the verdict."""
        cmd = msgspec.structs.replace(cmd, requested_at=datetime.now(timezone.utc), request_id=new_request_id())
        if not wait:
            await self.bus.publish(cmd)
            return None
        request = Request(codec.type_of(cmd), cmd.op_id, cmd.request_id, getattr(cmd, "new_op_id", ""))
        verdict = await await_verdict(self.reads, request, lambda: self.bus.publish(cmd), timeout)
        if verdict.refused:
            raise CommandRefused(verdict)
        return verdict

    async def create_schedule(self, spec: ScheduleSpec, op: OpSpec, schedule_id: str | None = None,
                              requested_by: str = "sdk") -> str:
        """Ask admission to submit ``op`` on ``spec``'s schedule; run n is the op ``<schedule_id>-<n>``.

        Admission validates it (an error event ``ops.error.<schedule_id>`` says why not). The same
        command sent twice is one schedule; a schedule id is used once."""
        schedule_id = schedule_id or new_schedule_id(op.name)
        cmd = CreateSchedule(schedule_id=schedule_id, spec=spec, op=op, requested_by=requested_by)
        digest = hashlib.sha256(codec.encode(cmd)).hexdigest()[:12]
        cmd = codec.checked(msgspec.structs.replace(cmd, requested_at=datetime.now(timezone.utc)))
        await self.bus.publish(cmd, subject=subjects.command(subjects.SCHEDULE_CREATE, self.bus.user),
                               msg_id=subjects.schedule_command_msg_id(schedule_id, "create_schedule", digest))
        return schedule_id

    async def delete_schedule(self, schedule_id: str, requested_by: str = "sdk") -> None:
        """No new runs of the schedule; runs already submitted go on."""
        cmd = DeleteSchedule(schedule_id=schedule_id, requested_by=requested_by,
                             requested_at=datetime.now(timezone.utc))
        await self.bus.publish(cmd, subject=subjects.command(subjects.SCHEDULE_DELETE, self.bus.user),
                               msg_id=subjects.schedule_command_msg_id(schedule_id, "delete_schedule"))

    async def why(self, op_id: str, timeout: float = 5.0) -> WhyAnswer:
        """Ask admission why an op is pending: ranked reasons and its position in its queue."""
        data = await self.bus.request(subjects.QUERY_WHY, WhyRequest(op_id=op_id), timeout=timeout)
        return msgspec.json.decode(data, type=WhyAnswer)

    async def logs(self, op_id: str, *, follow: bool = False, replica: str = "", attempt: int | None = None,
                   container: str = "", tail: int | None = None, timestamps: bool = False) -> AsyncIterator[str]:
        """What a container of the op printed, line by line (``opsched.logstream``): its latest attempt's main pod, or
        ``replica`` (``<role>-<index>``) of ``attempt``; ``follow``: until the container ends (an op not running yet:
        from when it starts, unless it ends first). Raises ``LogsRefused`` (its ``reason``: unknown op, no pod yet, pod
        gone, unknown replica, ...) or ``LogsUnanswered``."""
        request = LogsRequest(op_id=op_id, follow=follow, replica=replica, attempt=attempt, container=container,
                              tail=tail, timestamps=timestamps)

        async def ended() -> bool:
            return (await self.why(op_id)).status in TERMINAL_LABELS
        async for chunk in logstream.chunks(self.bus.nc, request, ended):
            for line in chunk.lines:
                yield line

    async def queues(self, timeout: float = 5.0) -> QueuesAnswer:
        data = await self.bus.request(subjects.QUERY_QUEUES, QueuesRequest(), timeout=timeout)
        return msgspec.json.decode(data, type=QueuesAnswer)

    async def schedules(self, ids: Sequence[str] = (), timeout: float = 5.0) -> SchedulesAnswer:
        """Ask admission for its schedules (``ids``: only those): state, next run, last runs."""
        data = await self.bus.request(subjects.QUERY_SCHEDULES, SchedulesRequest(ids=list(ids)), timeout=timeout)
        return msgspec.json.decode(data, type=SchedulesAnswer)

    async def cost(self, timeout: float = 5.0) -> CostAnswer:
        """Ask the cost service: spend per queue and project (day/week/month), burn rate, budgets left."""
        data = await self.bus.request(subjects.QUERY_COST, CostRequest(), timeout=timeout)
        return msgspec.json.decode(data, type=CostAnswer)

    async def health(self, service: str, timeout: float = 2.0) -> HealthAnswer:
        """Ask ``service`` (one of its replicas) how it is: what keeps it from progressing, what it waits for, what
        of it is not alive (``proto.health``; none: fine)."""
        data = await self.bus.request(subjects.health_query(service), HealthRequest(), timeout=timeout)
        return msgspec.json.decode(data, type=HealthAnswer)

    async def set_queues(self, config: QueuesConfig, requested_by: str = "sdk", *,
                         timeout: float = VERDICT_TIMEOUT_S) -> Verdict:
        """Replace the queue configuration: admission's verdict (``opsched.verdicts.await_queues_set``) once it is in
        force; raises ``CommandRefused`` (``invalid_queues``; ``queues_from_resources`` while the cluster's queue
        resources are the configuration; not allowed) or ``VerdictUnknown``."""
        cmd = SetQueues(config=config, requested_by=requested_by, request_id=new_request_id())
        verdict = await await_queues_set(
            self.reads, cmd, lambda: self.bus.publish(cmd), timeout)
        if verdict.refused:
            raise CommandRefused(verdict)
        return verdict

    async def stop_queue(self, queue: str, policy: str, comment: str = "", requested_by: str = "sdk", *,
                         timeout: float = VERDICT_TIMEOUT_S) -> Verdict:
        """Hold (``"Hold"``: nothing more of ``queue`` is admitted, its running ops go on), drain
        (``"HoldAndDrain"``: its running ops are preempted too) or resume (``"None"``) a queue; an admin's. The
        verdict (``opsched.verdicts.await_queue_stop``): raises ``CommandRefused`` (``unknown_queue``, not
        allowed) or ``VerdictUnknown``; a queue already so is ``nothing_to_do``."""
        cmd = SetQueueStop(queue=queue, stop_policy=policy, comment=comment,  # type: ignore[arg-type]
                           requested_by=requested_by, requested_at=datetime.now(timezone.utc),
                           request_id=new_request_id())
        verdict = await await_queue_stop(self.reads, cmd, lambda: self.bus.publish(cmd), timeout)
        if verdict.refused:
            raise CommandRefused(verdict)
        return verdict

    async def queue_config(self) -> QueuesConfig | None:
        """The queue configuration last put in force (the config stream's ``config.queues``; None: none yet)."""
        seq = await self.reads.last_stored(subjects.CONFIG_STREAM, subjects.CONFIG_QUEUES)
        stored = await self.reads.stored(subjects.CONFIG_STREAM, seq) if seq else None
        if stored is None:
            return None
        message = codec.decode_config(stored.data)
        return message.config if isinstance(message, QueuesConfigured) else None

    async def view(self) -> OpsView:
        """Every op: those that left admission's memory from their summaries, the others from the stream."""
        view = OpsView()
        for data in await self.reads.read_bucket(subjects.OPS_BUCKET):
            view.add_summary(msgspec.json.decode(data, type=OpSummary))
        for data in await self.reads.read_all(subjects.OPS_STREAM, subjects.VIEW_EVENTS):
            view.fold_bytes(data)
        return view

    async def summary(self, op_id: str) -> OpSummary | None:
        """The summary of an op that ended and left admission's memory (None: it did not, or is unknown)."""
        data = await self.reads.read_key(subjects.OPS_BUCKET, op_id)
        return msgspec.json.decode(data, type=OpSummary) if data else None

    async def ops(self) -> list[OpRow]:
        return list((await self.view()).rows.values())

    async def known(self, op_id: str) -> bool:
        """Whether ``op_id`` names an op: events of it on the stream, or its summary."""
        if await self.reads.last_stored(subjects.OPS_STREAM, subjects.events_for(op_id)):
            return True
        return await self.summary(op_id) is not None

    async def batch_ops(self, batch: str) -> list[str]:
        """The ids of a sweep's ops (``batch`` as ``opsched submit`` printed it), in submit order."""
        return [row.op_id for row in (await self.view()).rows.values() if row.batch == batch]

    async def follow_ops(self, op_ids: Sequence[str],
                         timeout: float | None = None) -> AsyncIterator[tuple[Event | None, OpRow]]:
        """``watch`` for several ops (a sweep): ``(None, row)`` for each op that already ended and left admission's
        memory (its summary), then every event of the others, past and live, with its op's row, until all have
        ended. ``timeout``: the longest quiet spell (``asyncio.TimeoutError``)."""
        view, wanted = OpsView(), set(op_ids)
        for op_id in op_ids:
            summary = await self.summary(op_id)
            if summary is not None:
                wanted.discard(op_id)
                yield None, view.add_summary(summary)
        if not wanted:
            return
        queue: asyncio.Queue[bytes] = asyncio.Queue()

        async def on_message(data: bytes, seq: int) -> None:
            queue.put_nowait(data)

        subject = subjects.all_events_for(next(iter(wanted))) if len(wanted) == 1 else subjects.VIEW_EVENTS
        sub = await self.reads.follow(subjects.OPS_STREAM, subject, on_message)
        try:
            while wanted:
                data = await asyncio.wait_for(queue.get(), timeout=timeout)
                event = _decoded(data)
                if event is None or event.op_id not in wanted:
                    continue
                row = view.fold(event)
                if row is not None:
                    yield event, row
                    if row.terminal:
                        wanted.discard(row.op_id)
        finally:
            await sub.unsubscribe()

    async def watch(self, op_id: str, timeout: float | None = None) -> AsyncIterator[tuple[Event, OpRow]]:
        """Every event of one op (past, then live) with the op's row after it, until it is terminal.
        Nothing for an op that ended and left admission's memory: its events are gone (``summary``)."""
        if await self.summary(op_id) is not None:
            return
        queue: asyncio.Queue[bytes] = asyncio.Queue()

        async def on_message(data: bytes, seq: int) -> None:
            queue.put_nowait(data)

        view = OpsView()
        sub = await self.reads.follow(subjects.OPS_STREAM, subjects.all_events_for(op_id), on_message)
        try:
            while True:
                data = await asyncio.wait_for(queue.get(), timeout=timeout)
                event = codec.decode_event(data)
                row = view.fold(event)
                if row is not None:
                    yield event, row
                    if row.terminal:
                        return
        finally:
            await sub.unsubscribe()
