"""Bad input: an error event on the bus and a dead-letter copy of the original message."""
from __future__ import annotations

import json

from opsched.bus.bus import Bus, Received
from opsched.bus.errors import MessageTooLarge
from opsched.bus.sizes import wire_size
from opsched.proto import subjects
from opsched.proto.events import NO_OP_ID, ErrorRaised
from opsched.services.runtime.clock import Clock

UNKNOWN_OP = NO_OP_ID  # never a valid op id, so it cannot collide with one


def guess_op_id(data: bytes) -> str:
    """The op id named by a payload, if it names a valid one; else ``unknown``."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return UNKNOWN_OP
    op_id = doc.get("opId") if isinstance(doc, dict) else None
    return op_id if isinstance(op_id, str) and subjects.valid_token(op_id) else UNKNOWN_OP


async def dead_letter(bus: Bus, clock: Clock, service: str, msg: Received, *,
                      reason: str, message: str, op_id: str | None = None) -> ErrorRaised:
    """Publish the dead-letter copy and the error event (both idempotent by consumer and stream sequence)."""
    op = op_id or guess_op_id(msg.data)
    headers = {
        "Nats-Msg-Id": subjects.dead_letter_msg_id(service, msg.durable, msg.stream_seq),
        "Opsched-Original-Subject": msg.subject,
        "Opsched-Error-Reason": reason,
        "Opsched-Error": message[:1000],
    }
    try:
        await bus.publish_raw(subjects.dead_letter(service), msg.data, headers)
    except MessageTooLarge as exc:  # the original was near the limit: its copy's headers tip it over
        await bus.publish_raw(subjects.dead_letter(service), *fitted(msg.data, headers, exc.limit))
    error = ErrorRaised(
        op_id=op, at=clock.now(), service=service, subject=msg.subject, reason=reason,
        message=message, payload=msg.data[:200].decode("utf-8", errors="replace"),
        command_msg_id=(msg.headers or {}).get("Nats-Msg-Id", "")[:200],  # its sender matches its refusal by it
    )
    await bus.publish(error, msg_id=subjects.error_msg_id(service, msg.durable, msg.stream_seq))
    return error


def fitted(data: bytes, headers: dict[str, str], limit: int) -> tuple[bytes, dict[str, str]]:
    """A dead-letter copy that fits ``limit`` (the server's max payload): the error text shortened, then,
    if still too large, the payload cut (``Opsched-Truncated-From`` says its full size)."""
    room = limit - wire_size(data, {k: v for k, v in headers.items() if k != "Opsched-Error"} | {"Opsched-Error": ""})
    if room >= 0:
        return data, headers | {"Opsched-Error": headers["Opsched-Error"].encode()[:room].decode(errors="ignore")}
    cut = {**headers, "Opsched-Error": "", "Opsched-Truncated-From": str(len(data))}
    return data[: max(0, limit - wire_size(b"", cut))], cut
