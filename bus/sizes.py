"""What the NATS server accepts: a message's size as the server counts it, checked before it is sent.

The server counts the headers toward its max payload (``max_payload`` in its INFO, 1 MiB by default); the
client checks only the body, so a message a little under the limit with its headers over it is sent, and
the server answers by closing the connection. ``check_size`` refuses it first, as bad input."""
from __future__ import annotations

from opsched.bus.errors import MessageTooLarge

_HEADER_LINE = len(b"NATS/1.0\r\n")  # what nats-py writes before the headers (then "\r\n" after them)


def wire_size(data: bytes, headers: dict[str, str] | None) -> int:
    """The size the NATS server counts against its max payload: the body plus the headers as nats-py encodes
    them (``NATS/1.0``, each ``key: value`` line, a blank line); the client itself checks only the body."""
    if headers is None:
        return len(data)
    lines = sum(len(k.strip().encode()) + len(v.strip().encode()) + 4 for k, v in headers.items() if k.strip())
    return len(data) + _HEADER_LINE + lines + 2


def check_size(subject: str, data: bytes, headers: dict[str, str] | None, limit: int) -> None:
    """Refuse (``MessageTooLarge``) a message the server would refuse by closing the connection."""
    size = wire_size(data, headers)
    if size > limit:
        raise MessageTooLarge(subject, size, limit)
