"""A message a handler loop holds, kept in the JetStream KV bucket ``subjects.IN_HAND_BUCKET`` under
``<durable>.<stream seq>`` from before its handler starts until the message is settled (ack, nak, term).
A record found on a later delivery means the earlier ones were never settled: the process holding them
died (OOM-kill, segfault, kill -9). ``services.runtime.inhand`` dead-letters a message found in hand that
often (a poison message) instead of handling it again."""
from __future__ import annotations

from proto.spec import Wire


class InHand(Wire, kw_only=True):
    deliveries: int  # deliveries of the message taken in hand and never settled (the current one included)
    holder: str = ""  # the process that took the latest of them
