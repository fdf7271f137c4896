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

RESOURCES = "resources"  # the source of a configuration made of the cluster's opsched.io resources


def resources_source(digest: str) -> str:
    """The ``QueuesConfigured.source`` of a configuration the dispatcher assembled from the queue resources
    (``rules.queue_resources``): while it is in force, they are the configuration's only source."""
    return f"{RESOURCES}#{digest}"


def from_resources(source: str) -> bool:
    return source.startswith(RESOURCES + "#")


class SetQueues(Wire, tag_field="type", tag="set_queues", kw_only=True):
    """Command: replace the queue configuration (validated by admission; errors are events). Sent by a user
    (`opsched queues --apply`) or by the dispatcher, whose configuration is the cluster's queue resources';
    ``handback``: the dispatcher's, when those resources are all gone: the configuration is a command's again."""

    config: QueuesConfig
    requested_by: str = ""
    request_id: str = ""  # its Nats-Msg-Id is ``set_queues.<request_id>``; the ``QueuesConfigured`` carries it
    handback: bool = False


class QueuesConfigured(Wire, tag_field="type", tag="queues_configured", kw_only=True):
    """Event: this configuration is now in force."""

    config: QueuesConfig
    at: datetime
    source: str  # "file:<path>#<sha>", "command:<who>#<sha>" or "resources#<sha>" (``resources_source``)
    request_id: str = ""  # the ``SetQueues`` that set it (none: the file)


class PricesConfigured(Wire, tag_field="type", tag="prices_configured", kw_only=True):
    """Event: this price catalogue is now in force (for the estimates and the ledger prices of ops
    submitted from now on)."""

    prices: Prices
    at: datetime
    source: str  # "file:<path>#<sha>"


CONFIG_MESSAGES = (QueuesConfigured, PricesConfigured, QueueStopSet)  # what the config stream holds
