"""Exactly one instance of a role decides at a time; the others stand by, ready to take over.

Every instance runs ``Leadership.run``: a standby tries to acquire the role's lease (``lease.KVLease``,
key ``role`` in ``proto.subjects.LEASE_BUCKET``) whenever the holder's has run out; the holder renews it
every ``renew_s``. An instance that acquires it

1. publishes a claim (``proto.leases.LeaderClaimed``) on ``proto.subjects.lease_claim(role)``, in the op
   stream; its stream sequence S is the ``fence`` of everything it decides: a publish carrying it is refused
   by JetStream once another instance has claimed after S (``bus.Fence``, ``errors.Fenced``);
2. waits until its own fold has read the stream up to S (``catch_up``), so it knows every decision the
   previous leader got stored (any later one of those is refused);
3. then leads (``leading`` is set) until it steps down: a renewal lost to another writer, a renewal not
   confirmed before ``valid_until`` (ttl minus a margin, on its own clock, so before anyone may take over),
   a publish refused by the fence (``refused``), or the service stopping. On a clean stop it releases the
   lease (written run out) so a standby takes over at once; killed, its lease runs out by itself.
"""
from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from typing import Any, TypeVar

from opsched.bus.bus import Fence
from opsched.proto import subjects
from opsched.proto.leases import LeaderClaimed
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.lease import KVLease

LEADER, STANDBY = "leader", "standby"
STOPPING = "stopping"  # why a leader steps down when its process is told to stop (logged at info, not warning)
MARGIN_FRACTION = 1 / 6  # a holder stops counting on its lease this share of the ttl before it runs out
RETRY_FRACTION = 1 / 4  # after a failed try, try again after this share of the renewal interval
CatchUp = Callable[[int], Awaitable[bool]]  # wait until stream sequence n is folded; False: not yet
Task = Callable[[Any, asyncio.Event], Coroutine[Any, Any, None]]  # task(bus, stop), as Service.tasks
T = TypeVar("T")


def holder_id() -> str:
    """One process: its host (the pod's name in Kubernetes), pid and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class Leadership:
    def __init__(self, role: str, clock: Clock, ttl_s: float, renew_s: float, catch_up: CatchUp, log: Any,
                 holder: str | None = None) -> None:
        if not 0 < renew_s < ttl_s * (1 - MARGIN_FRACTION):
            raise ValueError(f"lease renewal every {renew_s}s must be well within its ttl {ttl_s}s")
        self.role, self.clock, self.catch_up, self.log = role, clock, catch_up, log.bind(role=role)
        self.holder = holder or holder_id()
        self.ttl_s, self.renew_s = ttl_s, renew_s
        self.leading = asyncio.Event()  # set while this instance decides
        self.standing_by = asyncio.Event()  # ... and this one while it does not
        self.standing_by.set()
        self.fence: Fence | None = None  # of this instance's last claim
        self.since: datetime | None = None  # when it began to lead
        self.lease: KVLease | None = None
        self._tenure = 0  # the lease revision this instance acquired (0: not held)
        self._claimed = 0  # the tenure whose claim is published
        self._fenced = asyncio.Event()
        self._catching: asyncio.Task[None] | None = None

    @property
    def state(self) -> str:
        return LEADER if self.leading.is_set() else STANDBY

    def deciding(self) -> bool:
        """Leading, and its lease still counted on by its own clock."""
        return self.leading.is_set() and self.lease is not None and self.lease.valid()

    def refused(self) -> None:
        """A publish of ours was refused by the fence: another instance claimed since. Stop deciding now
        (the loop forgets the lease at once, without writing it)."""
        if self.leading.is_set():
            self.log.warning("fenced_stepping_down", holder=self.holder)
        self._stand_by()
        self._fenced.set()

    async def run(self, bus: Any, stop: asyncio.Event) -> None:
        """Acquire, claim, lead and renew, or stand by, until ``stop``; then release the lease."""
        kv = await bus.ensure_cache_bucket(subjects.LEASE_BUCKET)
        self.lease = KVLease(kv, self.role, self.holder, self.clock, self.ttl_s, self.ttl_s * MARGIN_FRACTION)
        self.log.info("standing_by", holder=self.holder, ttl_s=self.ttl_s, renew_s=self.renew_s)
        try:
            while not stop.is_set():
                await self._pause(await self._tick(bus), stop)
        finally:
            held = self.lease.held is not None
            self._step_down(STOPPING if stop.is_set() else "killed", forget=not stop.is_set())
            if held and stop.is_set():
                await self._release()

    async def _tick(self, bus: Any) -> float:
        """One step; returns how long to wait before the next."""
        assert self.lease is not None
        if self._fenced.is_set():
            self._fenced.clear()
            self._step_down("a publish was refused by the fence: another instance claimed since")
        try:
            if self.lease.held is None:
                if not await self.lease.acquire():
                    return self._until_run_out()
                self._tenure = self._held_revision()
                self.log.info("lease_acquired", holder=self.holder, revision=self._tenure)
            elif not await self._before_deadline(self.lease.renew()):
                self._step_down("the lease was written by another instance")
                return self._until_run_out()
            if self._claimed != self._tenure:
                await self._claim(bus)
        except Exception as exc:  # noqa: BLE001 - NATS away, or too slow: try again soon, step down in time
            self.log.warning("lease_not_confirmed", error=repr(exc))
            if not self.lease.valid():
                self._step_down(f"the lease could not be renewed in time: {exc!r}")
            return self.renew_s * RETRY_FRACTION
        return self.renew_s

    def _held_revision(self) -> int:
        held = self.lease.held if self.lease is not None else None
        return held.revision if held is not None else 0

    async def _claim(self, bus: Any) -> None:
        claim = LeaderClaimed(role=self.role, holder=self.holder, lease_revision=self._tenure, at=self.clock.now())
        ack = await self._before_deadline(bus.publish(claim))
        self.fence = Fence(subjects.lease_claim(self.role), ack.seq)
        self._claimed = self._tenure
        self.log.info("leader_claimed", holder=self.holder, revision=self._tenure, seq=ack.seq)
        self._catching = asyncio.create_task(self._lead_after(ack.seq, self._tenure))

    async def _lead_after(self, seq: int, tenure: int) -> None:
        """Lead once the fold has read everything up to our claim (still ours by then)."""
        while not await self.catch_up(seq):
            self.log.info("catching_up", seq=seq)
        if self._tenure == tenure and self.lease is not None and self.lease.valid():
            self.since = self.clock.now()
            self.standing_by.clear()
            self.leading.set()
            self.log.info("leading", holder=self.holder, revision=tenure, fence_seq=seq)

    async def _before_deadline(self, call: Awaitable[T]) -> T:
        """``call``'s result, or TimeoutError once the lease may no longer be counted on (our clock)."""
        assert self.lease is not None and self.lease.held is not None
        left = (self.lease.held.valid_until - self.clock.now()).total_seconds()
        work = asyncio.ensure_future(call)
        timer = asyncio.ensure_future(self.clock.sleep(max(left, 0.0)))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not work.done():
                work.cancel()
        if work.cancelled():
            raise TimeoutError(f"not confirmed within the {left:.1f}s the lease had left")
        return work.result()

    def _step_down(self, why: str, forget: bool = True) -> None:
        if self._catching is not None:
            self._catching.cancel()
            self._catching = None
        was = self._tenure != 0
        self._stand_by()
        self._tenure = self._claimed = 0
        self.since = None
        if forget and self.lease is not None:
            self.lease.forget()
        if was:  # a planned stop (SIGTERM, Ctrl-C on `opsched up`) is no warning: the lease is handed on
            log = self.log.info if why == STOPPING else self.log.warning
            log("stepped_down", holder=self.holder, why=why)

    def _stand_by(self) -> None:
        self.leading.clear()
        self.standing_by.set()

    def while_leading(self, task: Task) -> Task:
        """``task(bus, turn)`` run each time this instance leads; ``turn`` is set when it stops leading (or
        the service stops): the task returns then."""
        async def run(bus: Any, stop: asyncio.Event) -> None:
            while not stop.is_set():
                await first(stop.wait(), self.leading.wait())
                if stop.is_set():
                    return
                turn = asyncio.Event()
                ender = asyncio.create_task(first(stop.wait(), self.standing_by.wait()))
                ender.add_done_callback(lambda _: turn.set())
                try:
                    await task(bus, turn)
                finally:
                    ender.cancel()
        return run

    async def _release(self) -> None:
        assert self.lease is not None
        try:
            await asyncio.wait_for(self.lease.release(), timeout=self.renew_s)
            self.log.info("lease_released", holder=self.holder)
        except Exception as exc:  # noqa: BLE001 - it runs out by itself
            self.log.warning("lease_not_released", error=repr(exc))

    def _until_run_out(self) -> float:
        """A standby looks again when the holder's lease runs out, or after ``renew_s`` at most."""
        seen = self.lease.seen if self.lease is not None else None
        if seen is None:
            return self.renew_s
        left = (seen.expires_at - self.clock.now()).total_seconds()
        return min(self.renew_s, max(left, 0.0) + 0.01)

    async def _pause(self, seconds: float, stop: asyncio.Event) -> None:
        await first(self.clock.sleep(seconds), stop.wait(), self._fenced.wait())


async def first(*waits: Awaitable[Any]) -> None:
    """Return when the first of ``waits`` is done (the others are cancelled)."""
    futures = {asyncio.ensure_future(w) for w in waits}
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            future.cancel()
