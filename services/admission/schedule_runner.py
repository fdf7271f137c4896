"""The schedule runner: fire the runs ``services.admission.schedules`` says are due, on the bus.

One pass (``fire_due``) submits each due run BEFORE it publishes its ``ScheduleFired`` (a run recorded
as fired has been submitted; fired again after a crash it is the same op id), then publishes the
``ScheduleFinished`` of every schedule that will never fire again, including those disabled with a
reason (``Schedules.finished``). ``run_schedules`` loops passes on the injected clock.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from opsched.proto import codec, subjects
from opsched.proto.commands import SubmitOperation
from opsched.proto.schedules import ScheduleEvent, ScheduleFired
from opsched.proto.spec import OpSpec
from opsched.services.admission.schedules import Schedules

Submit = Callable[[str, OpSpec], Awaitable[Any]]
MAX_STEP_S = 1.0


def submitter(bus: Any, clock: Any, requested_by: str = "schedule") -> Submit:
    """A ``submit`` for ``run_schedules``: publish ``SubmitOperation`` (msg id ``<op_id>.submit.0``)."""
    async def submit(op_id: str, spec: OpSpec) -> None:
        await bus.publish(SubmitOperation(op_id=op_id, spec=spec, requested_at=clock.now(),
                                          requested_by=requested_by))
    return submit


async def fire_due(bus: Any, clock: Any, schedules: Schedules, submit: Submit) -> list[ScheduleEvent]:
    """One pass: submit and record every due run, then record finished schedules. Returns the events."""
    now = clock.now()
    published: list[ScheduleEvent] = []
    for fired in schedules.due(now):
        record = schedules.records[fired.op_id]
        await submit(fired.run_op_id, record.op)  # first: a run recorded as fired has been submitted
        await bus.publish(fired, msg_id=subjects.schedule_fired_msg_id(fired.op_id, fired.run))
        schedules.apply(fired)
        published.append(fired)
    for done in schedules.finished(now):
        await bus.publish(done)
        schedules.apply(done)
        published.append(done)
    return published


async def run_schedules(bus: Any, clock: Any, schedules: Schedules, submit: Submit, stop: asyncio.Event,
                        log: Any = None) -> None:
    """Fire runs until ``stop`` is set. Sleeps on ``clock`` until the next slot, at most ``MAX_STEP_S``
    at a time, so schedules created (folded into ``schedules`` by the caller) are noticed."""
    held: dict[str, tuple[str, str]] = {}
    while not stop.is_set():
        delay = MAX_STEP_S
        try:
            for event in await fire_due(bus, clock, schedules, submit):
                _log(log, codec.type_of(event), event)
            now = clock.now()
            held = _log_held(log, held, schedules.waiting(now))
            nxt = schedules.next_fire(now)
            if nxt is not None:
                delay = min(MAX_STEP_S, (nxt - now).total_seconds())
        except Exception as exc:  # noqa: BLE001 - a failed round must not end the schedules' loop: the next retries
            if log is not None:
                log.warning("schedules_publish_failed", error=repr(exc))
        if delay > 0:
            await _sleep(clock, delay, stop)
        else:
            await asyncio.sleep(0)


async def _sleep(clock: Any, seconds: float, stop: asyncio.Event) -> None:
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, stopper):
            task.cancel()


def _log(log: Any, kind: str, event: ScheduleEvent) -> None:
    if log is None:
        return
    extra = ({"run": event.run, "op_id": event.run_op_id, "scheduled_for": event.scheduled_for.isoformat()}
             if isinstance(event, ScheduleFired) else {"reason": getattr(event, "reason", "")})
    log.info(kind, schedule_id=event.op_id, **extra)


def _log_held(log: Any, before: dict[str, tuple[str, str]], now: dict[str, tuple[str, str]]):
    if log is not None:
        for sid, (op_id, status) in now.items():
            if before.get(sid) != (op_id, status):
                log.info("schedule_waiting_on_previous_run", schedule_id=sid, op_id=op_id, status=status)
    return now
