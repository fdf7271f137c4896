"""The op stream as the harness follows it live: each op's row (the client's own fold, ``OpsView``) and the
time of every event, so a run can wait until the ops it submitted are all terminal (never on a sleep)."""
from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime

from opsched.bus.bus import Bus
from opsched.proto import codec, subjects
from opsched.proto.events import Event, OperationSubmitted
from opsched.view import OpsView


class OpWatch:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.view = OpsView()
        self.times: list[tuple[str, datetime]] = []  # (type, ``at``) of every op event, in stream order
        self.terminal: set[str] = set()
        self.submitted: dict[str, datetime] = {}  # op -> ``at`` of its submitted
        self.ended: dict[str, datetime] = {}  # op -> ``at`` of the event that made it terminal
        self._changed = asyncio.Condition()
        self._sub = None

    async def start(self) -> "OpWatch":
        self._sub = await self.bus.follow(subjects.OPS_STREAM, subjects.OPS_ALL, self._on)
        return self

    async def _on(self, data: bytes, seq: int) -> None:
        try:
            event: Event = codec.decode_event(data)
        except Exception:  # noqa: BLE001 - not an op event
            return
        row = self.view.fold(event)
        self.times.append((codec.type_of(event), event.at))
        if isinstance(event, OperationSubmitted):
            self.submitted.setdefault(event.op_id, event.at)
        if row is not None and row.terminal:
            self.terminal.add(event.op_id)
            self.ended.setdefault(event.op_id, event.at)
        else:
            self.terminal.discard(event.op_id)
        async with self._changed:
            self._changed.notify_all()

    def pending(self, op_ids: Iterable[str]) -> list[str]:
        return [op_id for op_id in op_ids if op_id not in self.terminal]

    async def until_terminal(self, op_ids: Iterable[str], timeout: float) -> list[str]:
        """Wait until every op of ``op_ids`` is terminal; return those that are not after ``timeout``."""
        ids = list(op_ids)
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: not self.pending(ids)), timeout)
            except asyncio.TimeoutError:
                pass
        return self.pending(ids)

    async def until(self, count: int, timeout: float) -> bool:
        """Wait until at least ``count`` ops are terminal (a fault strikes mid-run)."""
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: len(self.terminal) >= count), timeout)
            except asyncio.TimeoutError:
                return False
        return True

    def durations(self) -> list[float]:
        """Seconds from submitted to the end, of every op that ended."""
        return [(self.ended[op] - at).total_seconds() for op, at in self.submitted.items() if op in self.ended]

    def first_after(self, moment: datetime, kinds: tuple[str, ...] = ()) -> datetime | None:
        """The earliest ``at`` after ``moment`` of an event of ``kinds`` (any kind when empty)."""
        return min((at for kind, at in self.times if at > moment and (not kinds or kind in kinds)), default=None)

    async def stop(self) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception:  # noqa: BLE001 - the connection may be gone already
                pass
