"""What a handler loop's pull consumer inbox may hold, and what is dropped before a fetch sees it.

A pull consumer's deliveries come to an inbox subject of the service's connection (``_INBOX.<id>``): JetStream's
deliveries (each with its ``$JS.ACK.<stream>.<consumer>...`` reply subject, the metadata a handler loop reads)
and the server's status messages about its pull requests (``Status`` header). Any client allowed to publish on
``_INBOX.>`` can put anything else there. nats-py 2.16 (``PullSubscription.fetch``, ``_fetch_n``) would return a
plain message as one of the batch (its metadata then fails the whole batch), and raises ``APIError`` for a status
it does not expect (the batch collected so far is lost). So each delivery inbox is screened as messages arrive
(``screen``: the subscription's pending queue drops what is not a delivery of its consumer, before any fetch
reads it), and the handler loop checks each fetched message again (``garbage``: the in-memory bus has no queue).
Each message dropped is counted (``Stats.inbox_garbage``, ``opsched_inbox_garbage_dropped_total``) and logged
(``inbox_garbage_dropped``, the first ones, then one in ``LOG_EVERY``); it never fails a fetch or a batch.

What this cannot tell: a message that forges a delivery of this very consumer (its reply subject names the
consumer's stream and name) passes; only the subject permissions keep clients off others' inboxes."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

# the server's status messages a fetch takes in its stride (nats-py: a heartbeat, no messages, request timeout,
# a conflict); any other status would make it raise, and no server sends one to a well-formed pull request
TOLERATED_STATUS = frozenset({"100", "404", "408", "409"})
LOG_FIRST, LOG_EVERY = 10, 1000

Dropped = Callable[[Any, str], None]  # (the message, why) -> None


def garbage(msg: Any, stream: str, durable: str) -> str | None:
    """Why ``msg`` is not a JetStream delivery of consumer ``durable`` of ``stream`` (nor a status message a fetch
    expects), or None: it is."""
    headers = getattr(msg, "headers", None) or {}
    status = headers.get("Status")
    if status:
        return None if status in TOLERATED_STATUS else f"a status message ({status}) no pull request asked for"
    try:
        metadata = msg.metadata
        stream_of, consumer_of = metadata.stream, metadata.consumer
    except Exception:  # noqa: BLE001 - nats' NotJSMessageError, or a reply subject it cannot parse
        return "not a JetStream delivery (no $JS.ACK reply subject)"
    if (stream_of, consumer_of) != (stream, durable):
        return f"a delivery of another consumer ({stream_of}/{consumer_of})"
    return None


class _Screened(asyncio.Queue[Any]):
    """A nats subscription's pending queue that keeps only what ``garbage`` lets through."""

    def __init__(self, maxsize: int, sub: Any, stream: str, durable: str, dropped: Dropped) -> None:
        super().__init__(maxsize)
        self._sub, self._stream, self._durable, self._dropped = sub, stream, durable, dropped

    def put_nowait(self, item: Any) -> None:
        why = garbage(item, self._stream, self._durable)
        if why is None:
            super().put_nowait(item)
            return
        self._sub._pending_size -= len(item.data)  # noqa: SLF001 - nats-py's count, kept as its client does for a drop
        self._dropped(item, why)


def screen(psub: Any, stream: str, durable: str, dropped: Dropped) -> bool:
    """Screen the inbox of nats pull subscription ``psub`` (before any fetch: its queue is replaced, empty);
    False for anything else (the in-memory bus's, whose fetch the handler loop checks alone)."""
    sub: Any = getattr(psub, "_sub", None)
    queue = getattr(sub, "_pending_queue", None)
    if not isinstance(queue, asyncio.Queue) or isinstance(queue, _Screened):
        return isinstance(queue, _Screened)
    screened = _Screened(queue.maxsize, sub, stream, durable, dropped)
    while not queue.empty():
        screened.put_nowait(queue.get_nowait())
    sub._pending_queue = screened  # noqa: SLF001 - nats-py has no hook to screen a subscription's queue
    return True


def inbox_of(psub: Any) -> str | None:
    """The subject a nats pull subscription's deliveries come to (None: not one)."""
    return getattr(psub, "_deliver", None)
