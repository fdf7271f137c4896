"""The Python SDK: submit operations, list them, watch them, stop them — all over the bus."""
from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from opsched.view import OpRow, OpsView
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
from proto.config import SetQueues
from proto.events import Event
from proto.queries import (
    CostAnswer,
    CostRequest,
    QueuesAnswer,
    QueuesRequest,
    WhyAnswer,
    WhyRequest,
)
from proto.queues import QueuesConfig
from proto.schedules import (
    MAX_SCHEDULE_ID,
    CreateSchedule,
    DeleteSchedule,
    ScheduleSpec,
)
from proto.spec import OpSpec
from proto.spec_size import SpecTooLarge, too_large
from proto.summaries import OpSummary
from services.runtime import tracing
from services.runtime.bus import Bus
from services.runtime.credentials import Credentials


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


class Client:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    @classmethod
    async def connect(cls, nats_url: str, name: str = "opsched-client",
                      credentials: Credentials | None = None, *, ca_file: Path | str | None = None) -> "Client":
        """As ``credentials``' user (none: an open server); its commands go on ``cmd.<user>.``. ``ca_file``: the
        CA that signed the server's certificate (TLS, the server verified)."""
        bus = await Bus.connect(nats_url, name, connect_timeout=3.0, max_reconnect_attempts=2,
                                credentials=credentials, tls_ca_file=ca_file)
        await bus.ensure_streams()
        return cls(bus)

    async def close(self) -> None:
        await self.bus.close()

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

    async def stop(self, op_id: str, reason: str = "stopped by user") -> None:
        await self.bus.publish(StopOperation(op_id=op_id, reason=reason,
                                             requested_at=datetime.now(timezone.utc)),
                               msg_id=subjects.msg_id(op_id, "stop", int(datetime.now().timestamp())))

    async def approve(self, op_id: str, comment: str = "", requested_by: str = "sdk") -> None:
        await self.bus.publish(ApproveOperation(op_id=op_id, comment=comment, requested_by=requested_by,
                                                requested_at=datetime.now(timezone.utc)))

    async def reject(self, op_id: str, comment: str = "", requested_by: str = "sdk") -> None:
        await self.bus.publish(RejectOperation(op_id=op_id, comment=comment, requested_by=requested_by,
                                               requested_at=datetime.now(timezone.utc)))

    async def restart(self, op_id: str, params: dict | None = None, copy: bool = False,
                      as_op_id: str | None = None, requested_by: str = "sdk") -> str:
        """A new op from ``op_id``'s spec (a copy also gets the original's outputs to start from)."""
        new_id = as_op_id or new_op_id()
        kind = CopyOperation if copy else RestartOperation
        await self.bus.publish(kind(op_id=op_id, new_op_id=new_id, params=params or {},
                                    requested_by=requested_by, requested_at=datetime.now(timezone.utc)))
        return new_id

    async def resume(self, op_id: str, params: dict | None = None, requested_by: str = "sdk") -> None:
        await self.bus.publish(ResumeOperation(op_id=op_id, params=params or {}, requested_by=requested_by,
                                               requested_at=datetime.now(timezone.utc)))

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

    async def queues(self, timeout: float = 5.0) -> QueuesAnswer:
        data = await self.bus.request(subjects.QUERY_QUEUES, QueuesRequest(), timeout=timeout)
        return msgspec.json.decode(data, type=QueuesAnswer)

    async def cost(self, timeout: float = 5.0) -> CostAnswer:
        """Ask the cost service: spend per queue and project (day/week/month), burn rate, budgets left."""
        data = await self.bus.request(subjects.QUERY_COST, CostRequest(), timeout=timeout)
        return msgspec.json.decode(data, type=CostAnswer)

    async def set_queues(self, config: QueuesConfig, requested_by: str = "sdk") -> None:
        """Replace the queue configuration (admission validates it; an error event says why not)."""
        await self.bus.publish(SetQueues(config=config, requested_by=requested_by))

    async def view(self) -> OpsView:
        """Every op: those that left admission's memory from their summaries, the others from the stream."""
        view = OpsView()
        for data in await self.bus.read_bucket(subjects.OPS_BUCKET):
            view.add_summary(msgspec.json.decode(data, type=OpSummary))
        for data in await self.bus.read_all(subjects.OPS_STREAM, subjects.VIEW_EVENTS):
            view.fold_bytes(data)
        return view

    async def summary(self, op_id: str) -> OpSummary | None:
        """The summary of an op that ended and left admission's memory (None: it did not, or is unknown)."""
        data = await self.bus.read_key(subjects.OPS_BUCKET, op_id)
        return msgspec.json.decode(data, type=OpSummary) if data else None

    async def ops(self) -> list[OpRow]:
        return list((await self.view()).rows.values())

    async def known(self, op_id: str) -> bool:
        """Whether ``op_id`` names an op: events of it on the stream, or its summary."""
        if await self.bus.last_stored(subjects.OPS_STREAM, subjects.events_for(op_id)):
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
        sub = await self.bus.follow(subjects.OPS_STREAM, subject, on_message)
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
        sub = await self.bus.follow(subjects.OPS_STREAM, subjects.all_events_for(op_id), on_message)
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
