"""Wait on events on the bus, never on time: ``await log.expect(OperationRunning, op_id, timeout=10)``."""
from __future__ import annotations

import asyncio
from collections.abc import Callable

from opsched.bus.bus import Bus
from opsched.proto import codec, subjects
from opsched.proto.events import Event


class EventLog:
    """Every event of the op stream, from its start, in stream order (with stream sequences)."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.events: list[tuple[int, Event]] = []
        self._changed = asyncio.Condition()
        self._sub = None

    async def start(self) -> "EventLog":
        self._sub = await self.bus.follow(subjects.OPS_STREAM, subjects.OPS_ALL, self._on)
        return self

    async def _on(self, data: bytes, seq: int) -> None:
        try:
            event = codec.decode_event(data)
        except Exception:  # noqa: BLE001 - garbage published by a test on purpose
            return
        async with self._changed:
            self.events.append((seq, event))
            self._changed.notify_all()

    def of(self, op_id: str, kind: type | None = None) -> list[Event]:
        return [e for _, e in self.events if e.op_id == op_id and (kind is None or isinstance(e, kind))]

    def seq_of(self, kind: type, op_id: str) -> int:
        return next(s for s, e in self.events if isinstance(e, kind) and e.op_id == op_id)

    async def expect(self, kind: type, op_id: str, timeout: float = 20.0,
                     where: Callable[[Event], bool] = lambda e: True) -> Event:
        def found() -> Event | None:
            return next((e for _, e in self.events
                         if isinstance(e, kind) and e.op_id == op_id and where(e)), None)
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: found() is not None), timeout)
            except asyncio.TimeoutError:
                seen = [codec.type_of(e) for e in self.of(op_id)]
                raise AssertionError(f"no {kind.__name__} for {op_id} within {timeout}s; saw {seen}") from None
        return found()  # type: ignore[return-value]

    async def expect_terminal(self, op_id: str, timeout: float = 30.0) -> Event:
        from opsched.proto.lifecycle import OP_ENDS

        return await self.expect(OP_ENDS, op_id, timeout)  # type: ignore[arg-type]

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
