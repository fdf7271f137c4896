"""What the handler loop does with one message's parts: read it from NATS, name the op a failed handler
leaves (``handler_failed``), settle it quietly, and take a handler's result as a list of events."""
from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Any

import msgspec

from opsched.bus.bus import Received
from opsched.proto import codec, subjects
from opsched.proto.events import HandlerFailed
from opsched.services.runtime.clock import Clock


def received(raw: Any, durable: str = "") -> Received:
    md = raw.metadata
    return Received(raw.subject, raw.data, raw.headers or {}, md.sequence.stream, md.num_delivered, raw,
                    durable)


def handler_failed(service: str, subject: str, message: Any, error: str, clock: Clock) -> HandlerFailed | None:
    op_id = getattr(message, "op_id", None)
    if not isinstance(op_id, str) or not subjects.valid_token(op_id):
        return None
    attempt = getattr(message, "attempt", 0)
    return HandlerFailed(op_id=op_id, at=clock.now(), attempt=attempt if isinstance(attempt, int) else 0,
                         service=service, subject=subject, failed_type=codec.type_of(message), error=error[:1000])


async def quietly(settling: Awaitable[Any]) -> None:
    """Ack-side calls (in progress, nak) while NATS may be away: lost at worst, then the ack wait decides."""
    try:
        await settling
    except Exception:  # noqa: BLE001, S110 - best effort by design
        pass


def as_list(result: Any) -> list:
    if result is None:
        return []
    if isinstance(result, Iterable) and not isinstance(result, msgspec.Struct):
        return list(result)
    return [result]
