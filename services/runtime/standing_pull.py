"""A handler loop's pull consumer, fed by standing pull requests instead of a request per fetch.

nats-py's ``PullSubscription.fetch`` sends a pull request every time it is called (a ``no_wait`` one, then a
lingering one when nothing was waiting) and the server answers each that it does not fill with a status message:
at a few ops a second every delivery cost a request and a status besides itself (issue 36 counted them: about
four messages an op in the bus pipeline, more over an op's whole life). A ``StandingPull`` keeps a request open at
the server instead, as nats.go's ``Consume`` does: it asks for ``batch`` messages with a long expiry and an idle
heartbeat, takes what arrives, and asks again for what was taken only when the credit left (asked for and not
yet arrived, or arrived and not yet taken) falls to half the batch. An idle consumer costs a heartbeat every
``HEARTBEAT_S`` and a request every ``EXPIRES_S``.

Credit is asked for only from ``take``, which the handler loop calls when it has handed on what it took before:
at most ``batch`` messages wait in the process beyond those in the loop's hands, as with a fetch. A request the
server no longer holds is asked again: one that expired or that the server ended (a ``408``/``409`` status gives
back its unfilled credit, ``Nats-Pending-Messages``), after a reconnect (the server forgot the requests of the old
connection), or when neither a message nor a heartbeat came for ``MISSED_HEARTBEATS`` heartbeats. While the loop
may not fetch (a standby) it does not call ``take``, so nothing is asked; what an earlier request still brings is
given back (``give_back``), and a leader-led loop asks with a short expiry (``LED_EXPIRES_S``) so that a
request a standby still holds ends soon. ``close`` stops the inbox (the server drops a request nobody listens to) and
gives back (naks) what arrived and was never taken, so another instance has it at once rather than after the
ack wait. A ``take`` waiting for the first message returns at once (with nothing) when the loop's ``stop`` is
set: a service stops without waiting out the rest of its fetch timeout.

A subscription that is not nats-py's (the unit tests' in-memory bus) is fetched from as before."""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from opsched.services.runtime.inbox import TOLERATED_STATUS

EXPIRES_S = 30.0  # a request's life at the server; when it ends (a ``408``), the next ``take`` asks again
HEARTBEAT_S = 2.0  # the server's idle heartbeat on an open request (at most a quarter of its expiry)
LED_EXPIRES_S = 2.0  # the expiry of a loop that one instance leads: a standby's request ends this soon
MISSED_HEARTBEATS = 3  # this long without a message or a heartbeat: the request is gone, ask again


class StandingPull:
    def __init__(self, psub: Any, batch: int, expires_s: float = EXPIRES_S, stop: asyncio.Event | None = None) -> None:
        self.psub, self.batch = psub, batch
        self.stop = stop  # set: a waiting ``take`` returns what it has (nothing) at once
        self._stopping: asyncio.Future[Any] | None = None
        self.expires_s, self.heartbeat_s = expires_s, min(HEARTBEAT_S, expires_s / 4)
        sub = getattr(psub, "_sub", None)
        self.queue: asyncio.Queue[Any] | None = getattr(sub, "_pending_queue", None)
        self.native = (isinstance(self.queue, asyncio.Queue) and getattr(psub, "_nms", None) is not None
                       and getattr(psub, "_nc", None) is not None)
        self.credit = 0  # asked for and not yet taken in (arrived and waiting in the queue included)
        self.asked_at = 0.0  # the last request's time (monotonic)
        self.heard_at = 0.0  # the last message or heartbeat's
        self.reconnects = self._reconnects()
        self.requests = 0  # pull requests sent (the bench and the tests read it)

    async def take(self, timeout: float) -> list[Any]:
        """What arrived, at most ``batch`` messages, waiting up to ``timeout`` for the first; [] when none came
        (nats-py's fetch raises a timeout instead: the caller handles both)."""
        if not self.native:
            fetched = await self._unless_stopped(self.psub.fetch(self.batch, timeout=timeout), None)
            return [] if fetched is None else list(fetched)
        assert self.queue is not None
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while True:
            await self._ask()  # before each wait: a request that ended (a status just taken in) is asked again
            while not self.queue.empty() and len(out) < self.batch:
                self._take_in(self.queue.get_nowait(), out)
            left = deadline - time.monotonic()
            if out or left <= 0:
                return out
            try:
                msg = await self._unless_stopped(self.queue.get(), left)
            except asyncio.TimeoutError:
                return out
            if msg is None:  # stopping
                return out
            self._take_in(msg, out)

    async def _unless_stopped(self, wait: Any, timeout: float | None) -> Any:
        """``wait``'s result (within ``timeout``, else asyncio's timeout; None: its own), or None as soon as ``stop``
        is set, ``wait`` cancelled: a queue's get or a fetch cancelled before it returns takes nothing from the
        queue or the consumer (what the server still sends is given back at ``close``, or by its ack wait)."""
        if self.stop is None:
            return await (wait if timeout is None else asyncio.wait_for(wait, timeout))
        if self.stop.is_set():
            wait.close()  # a coroutine never started
            return None
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self.stop.wait())
        waiting = asyncio.ensure_future(wait)
        try:
            await asyncio.wait({waiting, self._stopping}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # this task cancelled: so is what it waited on, as with wait_for
            waiting.cancel()
            raise
        if not waiting.done():
            waiting.cancel()
            await asyncio.wait({waiting})  # a cancellation of this task itself still raises here
        if not waiting.cancelled():
            return waiting.result()  # it returned (or raised) before the cancellation reached it: nothing is dropped
        if self._stopping.done():
            return None
        raise asyncio.TimeoutError

    async def give_back(self) -> int:
        """Nak what arrived and was not taken (a standby's loop: the leader takes it at once); how many."""
        if not self.native:
            return 0
        assert self.queue is not None
        arrived: list[Any] = []
        while not self.queue.empty():
            self._take_in(self.queue.get_nowait(), arrived)
        for msg in arrived:
            try:
                await msg.nak()
            except Exception:  # noqa: BLE001 - its ack wait gives it back all the same
                pass
        return len(arrived)

    async def close(self) -> None:
        """Stop the inbox (the server drops a request nobody listens to) and give back what was not taken."""
        if self._stopping is not None:
            self._stopping.cancel()
        if not self.native:
            return
        try:
            await self.psub._sub.unsubscribe()  # noqa: SLF001 - nats-py's inbox subscription, which fetch uses too
        except Exception:  # noqa: BLE001 - closing: the connection may be gone already
            pass
        await self.give_back()

    def _take_in(self, msg: Any, out: list[Any]) -> None:
        self.psub._sub._pending_size -= len(msg.data)  # noqa: SLF001 - nats-py's count, kept as its fetch does
        self.heard_at = time.monotonic()
        status = _status(msg)
        if not status:
            self.credit = max(0, self.credit - 1)
            out.append(msg)
        elif status in ("408", "409"):  # the request ended: what it still owed will not come
            pending = (msg.headers or {}).get("Nats-Pending-Messages")
            self.credit = max(0, self.credit - int(pending)) if pending and pending.isdigit() else 0
        elif status not in TOLERATED_STATUS:
            self.credit = 0

    async def _ask(self) -> None:
        """Ask for what the loop took since the last request, once the credit left is half the batch or less;
        first forget a request the server no longer holds (a reconnect, heartbeats missed)."""
        now = time.monotonic()
        reconnects = self._reconnects()
        if reconnects != self.reconnects or (
                self.credit and now - max(self.heard_at, self.asked_at) > MISSED_HEARTBEATS * self.heartbeat_s):
            self.reconnects, self.credit = reconnects, 0
        if self.credit > self.batch // 2:  # the credit counts what arrived and waits here too: taken in, not before
            return
        wanted = self.batch - self.credit
        request = {"batch": wanted, "expires": int(self.expires_s * 1e9), "idle_heartbeat": int(self.heartbeat_s * 1e9)}
        await self.psub._nc.publish(self.psub._nms, json.dumps(request).encode(), self.psub._deliver)  # noqa: SLF001
        self.credit += wanted
        self.asked_at = now
        self.requests += 1

    def _reconnects(self) -> int:
        nc = getattr(self.psub, "_nc", None)
        return int(getattr(nc, "stats", {}).get("reconnects", 0)) if nc is not None else 0


def _status(msg: Any) -> str | None:
    return (getattr(msg, "headers", None) or {}).get("Status")
