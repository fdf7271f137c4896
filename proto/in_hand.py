"""The deliveries of a message that a handler loop gave back (nak), kept in the JetStream KV bucket
``subjects.IN_HAND_BUCKET`` under ``<durable>.<stream seq>``. Every earlier delivery of a redelivered message
that was not given back was never settled: the process holding it died (OOM-kill, segfault, kill -9).
``services.runtime.inhand`` dead-letters a message that died in hand that often (a poison message) instead of
handling it again."""
from __future__ import annotations

from opsched.proto.spec import Wire


class InHand(Wire, kw_only=True):
    given_back: int = 0  # deliveries of the message given back (nak) by a handler loop
    holder: str = ""  # the process that gave back the latest of them
