"""Holding and draining a queue (Kueue's ``stopPolicy``): the admin command and the state in force.

``SetQueueStop`` (command, on ``cmd.<user>.queues.stop``): put a queue's stop policy in force. ``Hold`` admits
nothing more from the queue (its running ops go on); ``HoldAndDrain`` also preempts every op it runs (reason
``queue_drained``); ``None`` resumes it. Admission answers with a ``QueueStopSet`` on the config stream
(``config.queue_stop.<queue>``, the latest per queue in force), or refuses with an ``error`` event
(``unknown_queue``; ``queue_unchanged`` when the queue is already so). The state lives outside the queue
file, so applying a new queue configuration never lifts a maintenance hold."""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from opsched.proto.spec import Wire

StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
STOP_POLICIES: tuple[str, ...] = ("None", "Hold", "HoldAndDrain")
STATES = {"None": "active", "Hold": "held", "HoldAndDrain": "drained"}  # how people name each


class SetQueueStop(Wire, tag_field="type", tag="set_queue_stop", kw_only=True):
    """Command: put ``stop_policy`` in force for ``queue`` (an admin's)."""

    queue: str
    stop_policy: StopPolicy
    comment: str = ""
    requested_by: str = ""
    requested_at: datetime | None = None
    request_id: str = ""  # its Nats-Msg-Id is ``queue_stop.<queue>.<request_id>``; the answer carries it


class QueueStopSet(Wire, tag_field="type", tag="queue_stop_set", kw_only=True):
    """Config: ``stop_policy`` is in force for ``queue`` since ``at`` (set by ``by``)."""

    queue: str
    stop_policy: StopPolicy
    at: datetime
    by: str = ""
    comment: str = ""
    request_id: str = ""


QUEUE_STOP_COMMANDS = (SetQueueStop,)
