"""Errors a handler may raise. ``InvalidInput`` is permanent: the message is dead-lettered at once.
Anything else is temporary: the message is redelivered with backoff, then dead-lettered."""
from __future__ import annotations


class InvalidInput(Exception):
    """``events`` are published before the message is dead-lettered (e.g. the op rejected with the reason)."""

    def __init__(self, reason: str, message: str, op_id: str | None = None, events: list | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.op_id = op_id
        self.events = list(events or [])
