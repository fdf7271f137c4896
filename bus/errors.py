"""Errors a handler may raise, one per kind of failure the handler loop treats differently:

- ``InvalidInput`` is permanent (bad input): the message is dead-lettered at once.
- ``DependencyUnavailable`` is an outage of something the service depends on (the Kubernetes API, NATS):
  the message is kept and the handler retried, with capped backoff, for as long as the outage lasts;
  never dead-lettered.
- Anything else is a bug: the message is redelivered with backoff, then dead-lettered, and a
  ``handler_failed`` event ends (or requeues) the op it was about."""
from __future__ import annotations

from opsched.proto.reasons import Failure


class InvalidInput(Exception):
    """``events`` are published before the message is dead-lettered (e.g. the op rejected with the reason)."""

    def __init__(self, reason: str, message: str, op_id: str | None = None, events: list | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.op_id = op_id
        self.events = list(events or [])


class DependencyUnavailable(Exception):
    """``dependency`` (e.g. ``kubernetes``, ``nats``) cannot be reached now; ``detail`` says how it failed.
    ``events`` are published once when the wait starts (e.g. the op's ``dispatch_delayed``), best effort."""

    def __init__(self, dependency: str, detail: str, events: list | None = None) -> None:
        super().__init__(f"{dependency} unavailable: {detail}")
        self.dependency = dependency
        self.detail = detail
        self.events = list(events or [])


class Fenced(Exception):
    """A publish was refused because another instance claimed the role since this one did
    (``bus.bus.Fence``): this instance no longer decides; its message is given back undone."""


class MessageTooLarge(InvalidInput):
    """A message (payload plus headers, as the NATS server counts them) over the server's max payload: refused
    before it is sent (the server would close the connection). Bad input, never an outage: not retried."""

    def __init__(self, subject: str, size: int, limit: int, op_id: str | None = None) -> None:
        super().__init__(Failure.MESSAGE_TOO_LARGE, f"a message on {subject} is {size} bytes with its headers, over "
                                              f"the NATS server's max payload of {limit} bytes", op_id=op_id)
        self.subject, self.size, self.limit = subject, size, limit
