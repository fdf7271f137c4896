"""Poison messages: a message that crashed its service twice is dead-lettered before a third try.

A crash (the process died while handling it: OOM-kill, segfault, kill -9, a liveness restart) settles
nothing, so JetStream delivers the message again after the ack wait, and it may kill the next process the
same way, on every restart. A Python exception is retried then dead-lettered by the handler loop, and a
last delivery nobody settled by the max-deliveries advisory (``maxdeliveries``); this catches the crash
earlier, before the message is handled a third time.

Before the handler loop starts on a message it records it in hand (``take``: the bucket
``subjects.IN_HAND_BUCKET``, key ``<durable>.<stream seq>``, value ``proto.in_hand.InHand``), and it
removes the record once it settled the message (``release``: after an ack, a nak, a term — any outcome
but the process dying). A first delivery costs one put (its ack awaited: the record is stored before the
handler runs) and one delete (not awaited); a redelivery reads the record first (nothing can have died in
hand before a first delivery). A record found on a redelivery counts the deliveries that died in hand:
once they reach ``OPSCHED_POISON_CRASHES`` (2; 0 turns the records off) the message is not handled but
dead-lettered at once (reason ``poison_message``, after a ``handler_failed`` about its op, as for a
handler that gave up); its record stays (expiring), so a copy that could not be stored (the message given
back) makes it poison again on its next delivery, never handled.

A record's delete lost to a NATS outage would count a delivery that did not die: the keys expire after
``RECORD_MAX_AGE_S`` (a message held longer than that before its process died is counted short, never
over)."""
from __future__ import annotations

from typing import Any

import msgspec
import structlog

from proto import subjects
from proto.in_hand import InHand
from services.runtime.bus import Received, as_unavailable
from services.runtime.kvstore import KVStore

POISON = "poison_message"  # the reason of its dead letter
RECORD_MAX_AGE_S = 600.0  # above the ack wait: a record is read on the delivery after its own


def key_of(msg: Received) -> str:
    return f"{msg.durable}.{msg.stream_seq}"


def poisoned_text(died: int) -> str:
    return (f"not handled: {died} deliveries of it died in hand (the process handling it was killed each time: "
            "out of memory, a crash, kill -9); a poison message is dead-lettered before it is handled again")


class Unrecorded:
    """The records turned off (``OPSCHED_POISON_CRASHES=0``), or not opened yet: every message is handled."""

    async def take(self, msg: Received) -> int | None:
        return None

    async def release(self, msg: Received, log: Any) -> None:
        return None


class InHandRecords(KVStore):
    """The messages this service's handler loops hold, in the shared bucket (every replica's)."""

    def __init__(self, bus: Any, kv: Any, holder: str, crashes: int) -> None:
        super().__init__(kv, subjects.IN_HAND_BUCKET)
        self.bus, self.holder, self.crashes = bus, holder, crashes

    async def take(self, msg: Received) -> int | None:
        """Record ``msg`` in hand and return None (handle it), or, when ``crashes`` earlier deliveries of it
        died in hand, return their number and record nothing (it is poison: dead-letter it). NATS away: raised
        (the loop waits it out); any other failure of the bucket: handled unrecorded."""
        try:
            return await self._take(msg)
        except Exception as exc:
            if as_unavailable(exc) is not None:
                raise
            structlog.get_logger().error("in_hand_not_recorded", key=key_of(msg), error=f"{exc!r}")
            return None

    async def _take(self, msg: Received) -> int | None:
        died = 0
        if msg.num_delivered > 1:
            current, _ = await self._read(key_of(msg), InHand)
            died = current.deliveries if current is not None else 0
        if died >= self.crashes:
            return died
        await self.kv.put(key_of(msg), msgspec.json.encode(InHand(deliveries=died + 1, holder=self.holder)))
        return None

    async def release(self, msg: Received, log: Any) -> None:
        """``msg`` is settled: no longer in hand. Not waiting for the stream's ack (the loop goes on at once);
        a delete lost to an outage expires with the bucket's keys."""
        try:
            await self.bus.forget(subjects.IN_HAND_BUCKET, key_of(msg))
        except Exception as exc:  # noqa: BLE001 - NATS away: the key expires
            log.warning("in_hand_release_failed", key=key_of(msg), error=f"{exc!r}")


async def open_records(bus: Any, holder: str, crashes: int) -> InHandRecords | Unrecorded:
    if crashes <= 0:
        return Unrecorded()
    kv = await bus.ensure_cache_bucket(subjects.IN_HAND_BUCKET, max_age_s=RECORD_MAX_AGE_S)
    return InHandRecords(bus, kv, holder, crashes)
