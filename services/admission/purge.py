"""Retention, the task: every ``OPSCHED_RETENTION_INTERVAL_S`` admission lets finished ops past their
ttl leave memory (``retention``) and, where it decides (``is_leader``: only one instance writes and
purges), first writes each one's summary to the ops bucket and removes its events from the op stream,
one purge per kind of event it had (``ops.<kind>.<op_id>``; ``submitted`` last, so that an interrupted
round leaves an op that replays whole and is purged again). ``cost_recorded`` and ``budget_exceeded``
stay until no budget window holds their spend (one purge by sequence for all). Nothing is removed that
a durable consumer of the stream has not acked (``Bus.consumed_up_to``)."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from proto import codec, subjects
from proto.summaries import OpSummary
from services.admission.fold import OpFold
from services.admission.records import OpRecord
from services.admission.retention import Stray, expired, summary_of
from services.runtime.bus import Bus
from services.runtime.clock import Clock
from services.runtime.settings import Settings


def purge_order(op: OpRecord) -> list[str]:
    """The kinds of the op's events to remove, ``submitted`` last; spend kept for its windows."""
    kinds = sorted(op.kinds - set(subjects.KEPT_PAST_PURGE) - {"submitted"})
    return kinds + (["submitted"] if "submitted" in op.kinds else [])


class Retention:
    def __init__(self, fold: OpFold, settings: Settings, clock: Clock, log: Any,
                 is_leader: Callable[[], bool] = lambda: True) -> None:
        self.fold, self.settings, self.clock, self.log = fold, settings, clock, log
        self.is_leader = is_leader  # only the deciding instance writes summaries and purges
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
        consumed = await bus.consumed_up_to(subjects.OPS_STREAM)
        due = [op for op in self.fold.ops.values() if expired(op, now, ttl, consumed)]
        due.sort(key=lambda op: (op.ended_at, op.op_id))
        leader = self.is_leader()
        for op in due[:batch]:
            if leader:
                await self._summarize(bus, op.op_id, summary_of(op), replace=True)
                for kind in purge_order(op):
                    await bus.purge(subjects.OPS_STREAM, subjects.event(kind, op.op_id))
            self.fold.forget(op.op_id)
        for stray in self.fold.strays.due(now, ttl, consumed, batch):
            if leader:
                await self._purge_stray(bus, stray)
        keep_from = self.fold.spend.forget_before(now, consumed)
        if leader and keep_from is not None:
            for kind in subjects.KEPT_PAST_PURGE:
                await bus.purge(subjects.OPS_STREAM, subjects.events_of(kind), before_seq=keep_from)
        if due:
            self.purged += min(len(due), batch)
            self.log.info("ops_left_memory", ops=min(len(due), batch), held=len(self.fold.ops),
                          purged=leader)
        return min(len(due), batch)

    async def _purge_stray(self, bus: Bus, stray: Stray) -> None:
        if stray.status is not None:  # an op that ended before admission held it: a summary, if none yet
            await self._summarize(bus, stray.op_id, OpSummary(op_id=stray.op_id, status=stray.status.label,
                                                              ended_at=stray.at), replace=False)
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


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except asyncio.TimeoutError:
        pass
