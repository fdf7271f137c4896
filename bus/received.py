"""One message as a handler loop sees it (``bus.bus``)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Received:
    """One message as a handler loop sees it."""

    subject: str
    data: bytes
    headers: Mapping[str, str]  # parsed when read (``natsclient.Headers``)
    stream_seq: int
    num_delivered: int
    raw: Any  # the nats Msg, for ack/nak/term
    durable: str = ""  # the consumer it was delivered to (set by the handler loop): dead-letter ids name it
