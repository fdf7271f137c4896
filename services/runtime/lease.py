"""A lease in a JetStream key-value bucket: at most one holder of a key at a time, by compare-and-set.

The value (``proto.leases.Lease``) says who holds it and until when. ``acquire`` takes a key that is
absent (``create``: revision 0), run out, or already this holder's (``update`` with the revision read);
``renew`` extends it by ``update`` with the revision of the last write, so any write in between (another
holder) is a conflict and the lease is lost. The holder counts on it only until ``ttl - margin`` after it
*sent* its last confirmed write (``valid_until``, on its own clock): it steps down before anyone else may
take the lease over (after ``expires_at``, on theirs). ``release`` writes it run out, so a standby takes
over at once after a clean shutdown. Time comes from the injected clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import msgspec

from opsched.proto.leases import Lease
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.kvstore import KVStore, is_conflict


@dataclass(frozen=True)
class Held:
    revision: int  # of the last write of ours
    valid_until: datetime  # on our clock: step down now unless a later renewal is confirmed


class KVLease(KVStore):
    def __init__(self, kv, key: str, holder: str, clock: Clock, ttl_s: float, margin_s: float) -> None:
        super().__init__(kv, f"lease {key}")
        if not 0 <= margin_s < ttl_s:
            raise ValueError(f"lease margin {margin_s}s must be below its ttl {ttl_s}s")
        self.key, self.holder, self.clock = key, holder, clock
        self.ttl, self.margin = timedelta(seconds=ttl_s), timedelta(seconds=margin_s)
        self.held: Held | None = None
        self.seen: Lease | None = None  # the value last read or written (whose the lease is, until when)

    def valid(self) -> bool:
        """Held, and its last confirmed write recent enough to count on it now."""
        return self.held is not None and self.clock.now() < self.held.valid_until

    async def acquire(self) -> bool:
        """Take the lease if no one else holds it (absent, run out, or ours): True if taken."""
        sent = self.clock.now()
        current, revision = await self._read(self.key, Lease)
        self.seen = current
        if current is not None and current.holder != self.holder and current.expires_at > sent:
            return False
        return await self._write(sent, revision)

    async def renew(self) -> bool:
        """Extend the lease held; False (and no longer held) if anyone wrote it since our last write."""
        if self.held is None:
            return False
        return await self._write(self.clock.now(), self.held.revision)

    async def release(self) -> None:
        """Hand the lease back (written run out, unless someone else wrote it since); no longer held."""
        held, self.held = self.held, None
        if held is None:
            return
        now = self.clock.now()
        try:
            await self.kv.update(self.key, _encode(Lease(holder=self.holder, expires_at=now)), last=held.revision)
        except Exception as exc:
            if not is_conflict(exc):
                raise

    def forget(self) -> None:
        """Stop counting on the lease without writing it (it runs out by itself)."""
        self.held = None

    async def _write(self, sent: datetime, revision: int) -> bool:
        value = Lease(holder=self.holder, expires_at=sent + self.ttl)
        try:
            if revision:
                new = await self.kv.update(self.key, _encode(value), last=revision)
            else:
                new = await self.kv.create(self.key, _encode(value))
        except Exception as exc:
            if not is_conflict(exc):
                raise
            self.held = None
            return False
        self.seen = value
        self.held = Held(new, sent + self.ttl - self.margin)
        return True


def _encode(value: Lease) -> bytes:
    return msgspec.json.encode(value)
