"""Configuration changes on the bus: the queue configuration in force is the latest
``QueuesConfigured`` in the config stream, whether it came from a file or a command; the price
catalogue in force is the latest ``PricesConfigured``; each queue's stop policy is the latest ``QueueStopSet``
on its subject (``proto.queue_stops``)."""
from __future__ import annotations

from datetime import datetime

from opsched.proto.prices import Prices
from opsched.proto.queue_stops import QueueStopSet
from opsched.proto.queues import QueuesConfig
from opsched.proto.spec import Wire


class SetQueues(Wire, tag_field="type", tag="set_queues", kw_only=True):
    """Command: replace the queue configuration (validated by admission; errors are events)."""

    config: QueuesConfig
    requested_by: str = ""


class QueuesConfigured(Wire, tag_field="type", tag="queues_configured", kw_only=True):
    """Event: this configuration is now in force."""

    config: QueuesConfig
    at: datetime
    source: str  # "file:<path>#<sha>" or "command:<who>"


class PricesConfigured(Wire, tag_field="type", tag="prices_configured", kw_only=True):
    """Event: this price catalogue is now in force (for the estimates and the ledger prices of ops
    submitted from now on)."""

    prices: Prices
    at: datetime
    source: str  # "file:<path>#<sha>"


CONFIG_MESSAGES = (QueuesConfigured, PricesConfigured, QueueStopSet)  # what the config stream holds
