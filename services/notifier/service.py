"""The notifier (issue 33 §2): notifications and webhooks out. It consumes the op events that can trigger
a notification and the ``notification_due`` it derives from them, in two stages so that delivery never slows
scheduling and nothing is lost.

1. *match* (durable ``notifier-match``): the op events that can trigger (``triggers.TRIGGERING``: every end,
   ``preempted``, ``budget_exceeded``, ``on_hold``). For each, the op's own ``spec.notifications`` (read from its
   ``submitted`` event on the op stream) and the admin's subscriptions give the connections; one
   ``notification_due`` per connection, its delivery id deterministic (the trigger's message id + the connection),
   so a redelivered trigger is one delivery. A connection the admin did not declare is a ``notification_failed``
   at once, visible in ``why``.
2. *deliver* (durable ``notifier-deliver``, no delivery bound): each ``notification_due`` is POSTed to its
   connection (``sinks``, ``post``); every attempt is a ``notification_attempted``. A failed one is given back
   to JetStream with a delay (capped exponential backoff, ``retrying``) — no task sleeps; once the next try would
   fall past ``OPSCHED_NOTIFY_GIVE_UP_S`` from when it was due, a final ``notification_failed`` and a dead letter
   on ``dlq.notifier``.

Connections (urls, secrets) come from ``OPSCHED_CONNECTIONS_FILE``, given to the notifier alone; only their names
go on the bus. The notifier holds no state of its own: the op stream is its record."""
from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from opsched.bus.addressing import default_msg_id
from opsched.bus.errors import InvalidInput
from opsched.proto import codec, subjects
from opsched.proto.events import (
    EVENTS,
    Event,
    NotificationAttempted,
    NotificationDue,
    NotificationFailed,
    OperationSubmitted,
    event_type,
)
from opsched.proto.reasons import DeadLetter
from opsched.services.notifier import connections as conns
from opsched.services.notifier.post import Outcome, post
from opsched.services.notifier.retrying import Retrying
from opsched.services.notifier.sinks import Delivery, request
from opsched.services.notifier.triggers import TRIGGERING, OpNotification, connections_for, delivery_id
from opsched.services.runtime.backoff import Backoff
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.op_events import last_of
from opsched.services.runtime.service import Consumer, Context, RetryLater, Service
from opsched.services.runtime.settings import Settings

TRIGGER_TYPES = tuple(cls for cls in EVENTS if event_type(cls) in TRIGGERING)


class Notifier(Service):
    name = "notifier"
    match = Consumer(subjects.NOTIFIER_MATCH, subjects.OPS_STREAM,
                     [subjects.events_of(event_type(cls)) for cls in TRIGGER_TYPES])
    deliver = Consumer(subjects.NOTIFIER_DELIVER, subjects.OPS_STREAM, [subjects.events_of("notification_due")],
                       max_deliver=-1)  # its handler bounds the retries by time (``retrying``)

    def __init__(self, settings: Settings, clock: Clock | None = None,
                 connections: conns.ConnectionsFile | None = None) -> None:
        super().__init__(settings, clock)
        if connections is None:
            connections = conns.load(settings.connections_file) if settings.connections_file else \
                conns.ConnectionsFile()
        self.connections = connections
        self.known = connections.by_name()  # the file is read once, at start
        self.retrying = Retrying(Backoff(settings.notify_backoff_base_s, settings.notify_backoff_cap_s),
                                 give_up_after=timedelta(seconds=settings.notify_give_up_s))

    async def _submitted(self, op_id: str) -> OperationSubmitted | None:
        """The op's ``submitted`` event (its spec's notifications, its queue); None once purged."""
        assert self.bus is not None
        return await last_of(self.bus, OperationSubmitted, op_id)

    @match.handles(*TRIGGER_TYPES)
    async def matched(self, event: Event, ctx: Context) -> list[Event]:
        kind = event_type(type(event))
        submitted = await self._submitted(event.op_id)
        queue = submitted.queue if submitted is not None else ""
        own = [OpNotification(n.trigger, tuple(n.connections)) for n in submitted.spec.notifications] \
            if submitted is not None else []
        names = connections_for(kind, queue, own, self.connections.subscriptions)
        if not names:
            return []
        trigger_id = default_msg_id(event)
        data: dict[str, Any] = json.loads(codec.encode(event))
        out: list[Event] = []
        for name in names:
            dlv = delivery_id(trigger_id, name)
            if name not in self.known:
                ctx.log.warning("notification_unknown_connection", connection=name, trigger=kind)
                out.append(NotificationFailed(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt,
                                              delivery_id=dlv, connection=name, trigger=kind,
                                              error=f"unknown connection {name!r}: not in the notifier's "
                                                    "connections file"))
                continue
            out.append(NotificationDue(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt,
                                       delivery_id=dlv, connection=name, trigger=kind, queue=queue,
                                       trigger_seq=ctx.stream_seq, data=data))
        return out

    @deliver.handles(NotificationDue)
    async def delivered(self, due: NotificationDue, ctx: Context) -> NotificationAttempted:
        now = ctx.clock.now()
        number = ctx.num_delivered

        def attempted(outcome: Outcome, retry_in_s: float | None) -> NotificationAttempted:
            return NotificationAttempted(op_id=due.op_id, at=now, attempt=due.attempt, delivery_id=due.delivery_id,
                                         connection=due.connection, trigger=due.trigger, delivery_attempt=number,
                                         status=outcome.status, error=outcome.error[:500],
                                         delivered=outcome.delivered, retry_in_s=retry_in_s)

        conn = self.known.get(due.connection)
        if conn is None:
            outcome = Outcome(None, f"unknown connection {due.connection!r}: not in the notifier's connections file")
        else:
            d = Delivery(due.delivery_id, due.connection, due.trigger, due.op_id, due.at, due.data)
            outcome = await post(request(conn, d, sent_at=now), self.settings.notify_timeout_s)
        if outcome.delivered:
            ctx.log.info("notification_delivered", connection=due.connection, status=outcome.status,
                         delivery_attempt=number)
            return attempted(outcome, None)
        delay = self.retrying.next_try(due.at, number, now) if conn is not None else None
        if delay is not None:
            ctx.log.warning("notification_attempt_failed", connection=due.connection, status=outcome.status,
                            error=outcome.error, delivery_attempt=number, retry_in_s=round(delay, 3))
            raise RetryLater(delay, [attempted(outcome, round(delay, 3))])
        text = (f"delivery {due.delivery_id} to {due.connection!r} given up after {number} attempts: "
                f"{outcome.status or outcome.error}")
        failed = NotificationFailed(op_id=due.op_id, at=now, attempt=due.attempt, delivery_id=due.delivery_id,
                                    connection=due.connection, trigger=due.trigger, attempts=number, error=text)
        raise InvalidInput(DeadLetter.NOTIFICATION_UNDELIVERABLE, text, op_id=due.op_id,
                           events=[attempted(outcome, None), failed])


def build(settings: Settings, clock: Clock | None = None) -> Notifier:
    return Notifier(settings, clock)
