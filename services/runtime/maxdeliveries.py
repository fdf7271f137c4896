"""Messages JetStream stopped delivering unsettled, dead-lettered as those the handler gave up on.

A message is delivered at most ``max_deliver`` times. The handler loop settles the last delivery itself
(ack, or the dead letter and ``term``), and a terminated message is never announced. But when the
process dies with the message in hand on its last delivery (kill -9, OOM, a liveness restart), or gives
it back then (``nak``: it stopped while waiting for a dependency, or could not store the dead letter),
JetStream simply stops delivering it and publishes a max-deliveries advisory
(``subjects.max_deliveries_advisory``; core NATS, not stored: it is sent when a replica next pulls from
the consumer). Every replica of a service listens for its own consumers' advisories in one queue group,
so one of them acts on each: it reads the message back from the stream by its sequence and hands it to
``on_lost``, which dead-letters it the way the handler loop gives up (a ``handler_failed`` about its op,
then the copy on ``dlq.<service>`` and the ``error`` event). The copy's Nats-Msg-Id is derived from the
consumer and the stream sequence (``subjects.dead_letter_msg_id``), the same rule as the loop's own
give-up, so an advisory racing that give-up, or a second advisory, stores nothing twice, while another
consumer of the same service giving up the same message keeps its own copy."""
from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

import msgspec

from opsched.bus.bus import Bus, Received
from opsched.proto import subjects
from opsched.proto.advisories import decode_max_deliveries

OnLost = Callable[[str, Received], Awaitable[None]]  # (durable, the message read back)
Retrying = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]  # calls again while NATS is away


class Unsettled:
    """The ``raw`` of a message read back from the stream: no delivery of it is held, nothing to settle."""

    async def ack(self) -> None:
        return None

    async def nak(self, delay: float | None = None) -> None:
        return None

    async def term(self) -> None:
        return None

    async def in_progress(self) -> None:
        return None


async def listen(bus: Bus, consumers: Iterable[tuple[str, str]], on_lost: OnLost, retrying: Retrying,
                 log: Any) -> list[Any]:
    """Listen for the max-deliveries advisories of each ``(durable, stream)``; return the subscriptions.
    ``retrying(call)`` reads the stream, waiting out NATS as the handler loop does."""
    subs = []
    for durable, stream in consumers:
        async def on_advisory(data: bytes, durable: str = durable, stream: str = stream) -> None:
            read = functools.partial(bus.stored, stream)
            await _advised(durable, data, read, on_lost, retrying, log)
        subs.append(await bus.listen(subjects.max_deliveries_advisory(stream, durable), on_advisory,
                                     group=subjects.max_deliveries_group(durable)))
    return subs


async def _advised(durable: str, data: bytes, read: Callable[[int], Awaitable[Received | None]],
                   on_lost: OnLost, retrying: Retrying, log: Any) -> None:
    try:
        advisory = decode_max_deliveries(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("bad_max_deliveries_advisory", consumer=durable, error=str(exc))
        return
    log.error("max_deliveries_reached", consumer=durable, stream_seq=advisory.stream_seq,
              deliveries=advisory.deliveries)
    try:
        stored = await retrying(lambda: read(advisory.stream_seq))
        if stored is None:
            log.warning("lost_message_gone", consumer=durable, stream_seq=advisory.stream_seq)
            return
        await on_lost(durable, replace(stored, num_delivered=advisory.deliveries, raw=Unsettled(), durable=durable))
    except Exception as exc:  # noqa: BLE001 - a callback must not raise; the advisory is not sent again
        log.error("lost_message_not_dead_lettered", consumer=durable, stream_seq=advisory.stream_seq,
                  error=repr(exc))
