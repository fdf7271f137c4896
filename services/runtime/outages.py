"""A dependency unavailable: the handler loop waits it out, keeping the message (``Service.until_available``).

The call is tried again with capped exponential backoff and jitter for as long as it finds a dependency
unavailable (NATS, the API server); meanwhile the message is kept ours (``in_progress``: never redelivered,
never counted against max_deliver), readiness reports the wait (``waits``) and every try is a sign of life
(``liveness``). When the service stops meanwhile the message is given back undone (``Draining``)."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from opsched.bus.bus import Received, StreamFull, as_unavailable
from opsched.bus.errors import DependencyUnavailable
from opsched.services.runtime.backoff import Backoff
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.handling import quietly as _quietly
from opsched.services.runtime.liveness import HandlerLoops
from opsched.services.runtime.waits import Wait, Waits

if TYPE_CHECKING:
    from opsched.bus.bus import Bus

T = TypeVar("T")


class Draining(Exception):
    """The service stops while a dependency is unavailable: the message is given back (nak) undone."""


class WaitsOut:
    """The part of ``Service`` that waits out an unavailable dependency."""

    bus: "Bus | None"
    clock: Clock
    stopping: asyncio.Event
    waits: Waits
    backoff: Backoff
    handler_loops: HandlerLoops
    stats: Any
    in_hand: Any  # ``inhand``'s records of the deliveries given back
    stalls: Any  # ``stalls.Stalls``: a full stream is reported there (readiness' ``not_progressing``)

    async def give_back(self, msg: Received, delay: float | None = None) -> None:
        """Nak ``msg`` (it is delivered again, after ``delay`` if given), counted as given back first: never
        taken for a delivery that died in hand (``inhand``)."""
        await self.in_hand.give_back(msg)
        await _quietly(msg.raw.nak() if delay is None else msg.raw.nak(delay=delay))

    async def until_available(self, call: Callable[[], Awaitable[T]], msg: Received | None, log: Any) -> T:
        """``call()``, tried again with capped backoff for as long as it finds a dependency unavailable, or a
        stream full (``StreamFull``: the op stream refuses new events until retention frees space; readiness
        names it, ``stalls``) (raises ``Draining`` when the service stops meanwhile; any other error at once)."""
        wait: Wait | None = None
        full: StreamFull | None = None
        fulls = 0
        try:
            while True:
                self.handler_loops.trying()
                try:
                    result = await call()
                    if full is not None:  # space again
                        self.stalls.stored(full.stream)
                        log.info("stream_no_longer_full", stream=full.stream, refusals=fulls)
                    return result
                except StreamFull as exc:  # not an outage: reported as not progressing, the message kept
                    full, fulls = exc, fulls + 1
                    self.stalls.full(exc.stream, str(exc), self.clock.now())
                    delay = self.backoff.delay(fulls)
                    log.error("stream_full", stream=exc.stream, subject=exc.subject, error=exc.description,
                              refusals=fulls, retry_in_s=round(delay, 3))
                except Exception as exc:
                    unavailable = as_unavailable(exc)
                    if unavailable is None:
                        raise
                    wait = await self._waiting(wait, unavailable, log)
                    delay = self.backoff.delay(wait.failures)
                    log.warning("dependency_unavailable", dependency=wait.dependency, error=wait.detail,
                                failures=wait.failures, since=wait.since.isoformat(), retry_in_s=round(delay, 3))
                if msg is not None:
                    await _quietly(msg.raw.in_progress())  # keep it ours: no redelivery, no delivery counted
                with self.handler_loops.waiting():
                    paused = await self._pause(delay)
                if not paused:
                    if msg is not None:
                        await self.give_back(msg)  # another replica (or our restart) takes it
                    raise Draining
        finally:
            if wait is not None:
                self.waits.end(wait)
                log.info("dependency_available", dependency=wait.dependency, failures=wait.failures)

    async def _waiting(self, wait: Wait | None, unavailable: DependencyUnavailable, log: Any) -> Wait:
        """Note one more failure; on the first, open the wait and publish its events (best effort)."""
        if wait is None:
            wait = self.waits.begin(unavailable.dependency, self.clock.now(), unavailable.detail)
            for event in unavailable.events:
                try:
                    await self.bus.publish(event)  # type: ignore[union-attr]
                except Exception as exc:  # noqa: BLE001 - told again on the next wait, if any
                    log.warning("wait_event_not_published", error=f"{exc!r} {exc}")
        else:
            self.stats.dependency_retries += 1
        wait.failures += 1
        wait.dependency, wait.detail = unavailable.dependency, unavailable.detail
        return wait

    async def _pause(self, seconds: float) -> bool:
        """Sleep on the service's clock; False when the service stops first."""
        if self.stopping.is_set():
            return False
        waits = [asyncio.ensure_future(self.clock.sleep(seconds)), asyncio.ensure_future(self.stopping.wait())]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        return not self.stopping.is_set()
