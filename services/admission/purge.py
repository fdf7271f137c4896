"""Retention, the task: every ``OPSCHED_RETENTION_INTERVAL_S`` admission lets finished ops past their
ttl leave memory (``retention``) and, where it decides (``is_leader``: only one instance writes and
purges), first rolls the budget scopes' spend up (``spend_rolled``, ``rules.spend_totals``: their
charges may then go), then writes each op's summary to the ops bucket and removes its events from the op
stream with one purge (``ops.*.<op_id>``; an op that announced a ``budget_exceeded`` keeps it, and is
purged kind by kind, ``submitted`` last, so that an interrupted round leaves an op that replays whole).
Every op due leaves in the round, ``OPSCHED_RETENTION_BATCH`` at a time with their calls in flight at
once. ``budget_exceeded`` (and charges of ops admission does not hold) stay until no budget window holds
them (one purge by sequence for all). Nothing is removed that a durable consumer of the stream has not
acked (``Bus.consumed_up_to``) of the services' own durables (a stray durable holds nothing back).

``CommandPurge``, the other task: every ``OPSCHED_CMD_PURGE_INTERVAL_S`` the commands admission's durable has acked
leave the command stream, so that the stream's per-subject cap (``OPSCHED_CMD_BACKLOG_PER_SUBJECT``) counts what is
still queued: the backlog each user may have of each verb."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from opsched.bus.bus import Bus
from opsched.proto import codec, permissions, subjects
from opsched.proto.summaries import OpSummary
from opsched.services.admission.model.records import OpRecord
from opsched.services.admission.state.fold import OpFold
from opsched.services.admission.state.retention import Stray, expired, summary_of
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.settings import Settings

IN_FLIGHT = 64  # an op's summary and purge calls in flight at once


def purge_order(op: OpRecord) -> list[str]:
    """The subjects of the op's events to remove: all at once, or, when it announced a budget limit (kept
    for its window), kind by kind, ``submitted`` last."""
    routed = subjects.all_events_for(op.op_id)[1:] if op.routed else []  # requests to a named agent's dispatcher
    if "budget_exceeded" not in op.history.kinds:
        return [subjects.event("*", op.op_id), *routed]
    kinds = sorted(op.history.kinds - {"budget_exceeded", "submitted"})
    return routed + [subjects.event(kind, op.op_id) for kind in kinds + (["submitted"] if "submitted" in op.history.kinds else [])]


class Retention:
    def __init__(self, fold: OpFold, settings: Settings, clock: Clock, log: Any,
                 is_leader: Callable[[], bool] = lambda: True, agents: Callable[[], Iterable[str]] = tuple) -> None:
        self.fold, self.settings, self.clock, self.log = fold, settings, clock, log
        self.is_leader = is_leader  # only the deciding instance writes summaries and purges
        self.agents = agents  # the named agents now (their dispatchers' durables hold the op stream too)
        self.summaries: Any = None  # the ops bucket, opened on the first round
        self.purged = 0  # ops removed from the stream so far (and strays)

    async def run(self, bus: Bus, stop: asyncio.Event) -> None:
        """The task: a round every interval, until ``stop``; a failed round is tried again next time."""
        while not stop.is_set():
            try:
                await self.round(bus)
            except Exception as exc:  # noqa: BLE001 - NATS away: the next round does it (all idempotent)
                self.log.warning("retention_round_failed", error=repr(exc))
            await _wait(stop, self.settings.retention_interval_s)

    async def round(self, bus: Bus) -> int:
        """Ops (and strays) past their ttl leave memory and the stream. Returns how many ops left."""
        now, ttl, batch = self.clock.now(), self.settings.retention_ttl_s, self.settings.retention_batch
        durables = permissions.all_durables(tuple(sorted(set(self.agents()))))
        consumed = await bus.consumed_up_to(subjects.OPS_STREAM, durables)
        due = [op for op in self.fold.ops.values() if expired(op, now, ttl, consumed)]
        due.sort(key=lambda op: (op.history.ended_at, op.op_id))
        leader = self.is_leader()
        if leader and due:
            await self._roll_up(bus, min(consumed, self.fold.position), now)
        for begin in range(0, len(due), batch):
            chunk = due[begin:begin + batch]
            if leader:
                await _bounded([self._leave(bus, op) for op in chunk], IN_FLIGHT)
            for op in chunk:
                self.fold.forget(op.op_id)
        for stray in self.fold.strays.due(now, ttl, consumed, batch):
            if leader:
                await self._purge_stray(bus, stray)
        keep_from = self.fold.spend.forget_before(now, consumed)
        if leader and keep_from is not None:
            for kind in subjects.KEPT_PAST_PURGE:
                await bus.purge(subjects.OPS_STREAM, subjects.events_of(kind), before_seq=keep_from)
        if due:
            self.purged += len(due)
            self.log.info("ops_left_memory", ops=len(due), held=len(self.fold.ops), purged=leader)
        return len(due)

    async def _roll_up(self, bus: Bus, through_seq: int, now: Any) -> None:
        """Each budget scope with charges since its last rollup: its totals through ``through_seq`` (which
        every op due was folded by), before those charges leave; its older rollups go."""
        for rolled in self.fold.spend.rollups(through_seq, now):
            await bus.publish(rolled, msg_id=subjects.msg_id(rolled.op_id, "spend_rolled", through_seq))
            await bus.purge(subjects.OPS_STREAM, subjects.event("spend_rolled", rolled.op_id), keep=1)

    async def _leave(self, bus: Bus, op: OpRecord) -> None:
        await self._summarize(bus, op.op_id, summary_of(op), replace=True)
        for subject in purge_order(op):
            await bus.purge(subjects.OPS_STREAM, subject)

    async def _purge_stray(self, bus: Bus, stray: Stray) -> None:
        summary = stray.summary()  # an op that ended before admission held it: a summary, if none yet
        if summary is not None:
            await self._summarize(bus, stray.op_id, summary, replace=False)
        await bus.purge(subjects.OPS_STREAM, stray.subject, before_seq=stray.seq + 1)

    async def _summarize(self, bus: Bus, op_id: str, summary: OpSummary, *, replace: bool) -> None:
        if self.summaries is None:
            self.summaries = await bus.ensure_cache_bucket(subjects.OPS_BUCKET,
                                                           max_age_s=self.settings.summaries_max_age_s)
        data = codec.encode(summary)
        if replace:
            await self.summaries.put(op_id, data)
            return
        try:
            await self.summaries.create(op_id, data)
        except Exception as exc:  # noqa: BLE001 - the op's own summary is there already: keep it
            if type(exc).__name__ != "KeyWrongLastSequenceError":
                raise


class CommandPurge:
    """The commands admission consumed leave the command stream (the leader's task).

    Why a purge and not a work-queue stream (acked = removed by the server): NATS refuses to change an existing
    stream's retention, so every installed command stream would have to be deleted, with the commands queued in
    it; a work queue also refuses any second consumer whose filter overlaps (a new durable, a reader's ephemeral
    one: tests and operators read the stream) and any consumer without explicit acks. Purging below the ack floor
    of admission's own durable is what the op stream's retention does already; the cap then counts what is still
    queued, up to one interval late."""

    def __init__(self, settings: Settings, log: Any) -> None:
        self.settings, self.log = settings, log
        self.purged_below = 0  # the first sequence that may still be stored (what the last purge kept)

    async def run(self, bus: Bus, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await _wait(stop, self.settings.cmd_purge_interval_s)  # an interval after taking the lead, then each
            if stop.is_set():
                return
            try:
                await self.round(bus)
            except Exception as exc:  # noqa: BLE001 - NATS away: the next round does it (idempotent)
                self.log.warning("command_purge_failed", error=repr(exc))

    async def round(self, bus: Bus) -> int:
        """Purge the commands every one of admission's durables acked; returns the first sequence kept."""
        consumed = await bus.consumed_up_to(subjects.CMD_STREAM, permissions.durables_of(permissions.STREAM_KEEPER))
        if consumed + 1 > self.purged_below:
            await bus.purge(subjects.CMD_STREAM, subjects.CMD_ALL, before_seq=consumed + 1)
            self.purged_below = consumed + 1
        return self.purged_below


async def _bounded(calls: list[Awaitable[None]], limit: int) -> None:
    """Await ``calls``, at most ``limit`` at once; the first failure is raised once all have ended."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Awaitable[None]) -> None:
        async with gate:
            await call
    results = await asyncio.gather(*(one(c) for c in calls), return_exceptions=True)
    failed = next((r for r in results if isinstance(r, BaseException)), None)
    if failed is not None:
        raise failed


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except asyncio.TimeoutError:
        pass
