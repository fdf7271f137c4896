"""Poison messages: a message that crashed its service twice is dead-lettered before a third try.

A crash (the process died while handling it: OOM-kill, segfault, kill -9, a liveness restart) settles
nothing, so JetStream delivers the message again after the ack wait, and it may kill the next process the
same way, on every restart. A Python exception is retried then dead-lettered by the handler loop, and a
last delivery nobody settled by the max-deliveries advisory (``maxdeliveries``); this catches the crash
earlier, before the message is handled a third time.

Every delivery of a message ends in one of three ways: acked (there is no next delivery), given back (a nak:
the retry path of a failed handler, a service that stops while it waits for a dependency, a standby that is
no longer the leader), or not settled at all: the process holding it died (or held it past the ack wait, which
a live loop never does: it keeps a message it waits with ``in_progress``, and a stuck one is restarted by its
liveness probe). So a loop records only what is rare: before it gives a message back it counts that delivery as
given back (``give_back``: the bucket ``subjects.IN_HAND_BUCKET``, key ``<durable>.<stream seq>``, value
``proto.in_hand.InHand``); on a redelivery (``take``) the deliveries before it that were not given back died in
hand. A first delivery costs nothing (no record to read, none to write): the common path of every message is
free; a redelivery costs one read. Once ``OPSCHED_POISON_CRASHES`` (2; 0 turns the records off) earlier
deliveries died in hand the message is not handled but dead-lettered at once (reason ``poison_message``, after a
``handler_failed`` about its op, as for a handler that gave up); a copy that could not be stored (the message
given back) leaves it poison on its next delivery, never handled.

A give-back whose record is lost to a NATS outage (the nak is then usually lost too) counts as a death; records
expire after ``RECORD_MAX_AGE_S``."""
from __future__ import annotations

from typing import Any

import structlog

from opsched.bus.bus import Received, as_unavailable
from opsched.proto import subjects
from opsched.proto.in_hand import InHand
from opsched.proto.reasons import DeadLetter
from opsched.services.runtime.kvstore import KVStore

POISON = DeadLetter.POISON_MESSAGE  # the reason of its dead letter
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

    async def give_back(self, msg: Received) -> None:
        return None


class InHandRecords(KVStore):
    """The deliveries given back, in the shared bucket (every replica's)."""

    def __init__(self, kv: Any, holder: str, crashes: int) -> None:
        super().__init__(kv, subjects.IN_HAND_BUCKET)
        self.holder, self.crashes = holder, crashes

    async def take(self, msg: Received) -> int | None:
        """None (handle it), or, when ``crashes`` earlier deliveries of it died in hand, their number (it is
        poison: dead-letter it). A first delivery reads nothing. NATS away: raised (the loop waits it out); any
        other failure of the bucket: handled."""
        if msg.num_delivered <= 1:
            return None
        try:
            current, _ = await self._read(key_of(msg), InHand)
        except Exception as exc:
            if as_unavailable(exc) is not None:
                raise
            structlog.get_logger().error("in_hand_not_read", key=key_of(msg), error=f"{exc!r}")
            return None
        died = msg.num_delivered - 1 - (current.given_back if current is not None else 0)
        return died if died >= self.crashes else None

    async def give_back(self, msg: Received) -> None:
        """Count this delivery as given back (before its nak), so that it is never taken for a death; best
        effort (NATS away: it counts as one, as its lost nak would)."""
        def counted(current: InHand | None) -> InHand:
            return InHand(given_back=(current.given_back if current is not None else 0) + 1, holder=self.holder)
        try:
            await self._mutate(key_of(msg), InHand, counted)
        except Exception as exc:  # noqa: BLE001 - best effort, see above
            structlog.get_logger().warning("in_hand_give_back_not_recorded", key=key_of(msg), error=f"{exc!r}")


async def open_records(bus: Any, holder: str, crashes: int) -> InHandRecords | Unrecorded:
    if crashes <= 0:
        return Unrecorded()
    kv = await bus.ensure_cache_bucket(subjects.IN_HAND_BUCKET, max_age_s=RECORD_MAX_AGE_S)
    return InHandRecords(kv, holder, crashes)
