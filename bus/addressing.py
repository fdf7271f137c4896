"""How a message goes on the bus: its subject, its Nats-Msg-Id (a repeat is stored once) and its
CloudEvents headers, each decided once from the message itself."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import msgspec

from opsched.proto import cloudevents, codec, subjects
from opsched.proto.commands import Command, OperationsCommand, SubmitOperation, verb_of
from opsched.proto.config import PricesConfigured, QueuesConfigured, SetQueues
from opsched.proto.events import (
    BudgetExceeded,
    ErrorRaised,
    Event,
    NotificationAttempted,
    NotificationDue,
    NotificationFailed,
)
from opsched.proto.leases import LeaderClaimed
from opsched.proto.queue_stops import QueueStopSet, SetQueueStop


def subject_for(message: msgspec.Struct, user: str = subjects.ANONYMOUS) -> str:
    """Commands go on the sending ``user``'s subjects (``cmd.<user>.…``)."""
    if isinstance(message, Event):  # a request to a named agent's dispatcher: on its own subject
        return subjects.routed(codec.type_of(message), message.op_id, getattr(message, "agent", ""))
    if isinstance(message, SubmitOperation):
        return subjects.submit(message.spec.queue, user)
    if isinstance(message, Command) and not isinstance(message, SubmitOperation):
        return subjects.command(codec.type_of(message), user)
    if isinstance(message, SetQueues):
        return subjects.command(subjects.SET_QUEUES, user)
    if isinstance(message, OperationsCommand):  # on the singular verb's subject: the same permissions
        return subjects.command(verb_of(type(message)), user)
    if isinstance(message, (SetQueueStop, QueueStopSet)):  # the command, and its answer on the config stream
        return (subjects.command(subjects.SET_QUEUE_STOP, user) if isinstance(message, SetQueueStop)
                else subjects.queue_stop_subject(message.queue))
    if isinstance(message, QueuesConfigured):
        return subjects.CONFIG_QUEUES
    if isinstance(message, PricesConfigured):
        return subjects.CONFIG_PRICES
    if isinstance(message, LeaderClaimed):
        return subjects.lease_claim(message.role)
    raise TypeError(f"no subject for {type(message).__name__}")


def default_msg_id(message: msgspec.Struct) -> str:
    kind = codec.type_of(message)
    if isinstance(message, Event):
        return _event_msg_id(message, kind)
    if isinstance(message, OperationsCommand):
        return subjects.many_msg_id(kind, message.request_id)
    if isinstance(message, Command):
        if message.request_id:  # one per request its sender made (``opsched.verdicts`` matches the answer by it)
            return subjects.msg_id(message.op_id, kind, message.request_id)
        # a rerun is one per new op id; a resume one per request; the others one per op
        distinct = getattr(message, "new_op_id", None) or (
            int(message.requested_at.timestamp() * 1000) if kind == "resume" and message.requested_at else 0)
        return subjects.msg_id(message.op_id, kind, distinct)
    if isinstance(message, SetQueues) and message.request_id:  # one per request (``opsched.verdicts`` matches it)
        return subjects.set_queues_msg_id(message.request_id)
    if isinstance(message, (SetQueues, QueuesConfigured)):  # the answer: one per content and request
        return f"{kind}.{config_digest(message.config)}" + (f".{message.request_id}" if message.request_id else "")
    if isinstance(message, (SetQueueStop, QueueStopSet)):  # the command and its answer (in another stream): one
        return subjects.queue_stop_msg_id(message.queue, message.request_id or config_digest(message))  # per request
    if isinstance(message, PricesConfigured):
        return subjects.prices_msg_id(config_digest(message.prices))
    if isinstance(message, LeaderClaimed):
        return subjects.lease_claim_msg_id(message.role, message.lease_revision)
    raise TypeError(f"no message id for {type(message).__name__}")


def _event_msg_id(message: Event, kind: str) -> str:
    if isinstance(message, BudgetExceeded):  # one per budget, limit and window, whichever op crossed it
        return subjects.budget_exceeded_msg_id(message.scope, message.name, message.window, message.unit,
                                               message.window_start)
    if isinstance(message, (NotificationDue, NotificationFailed)):  # one per delivery, however often its trigger came
        return f"{message.delivery_id}.{kind}"
    if isinstance(message, NotificationAttempted):  # one per attempt of a delivery
        return f"{message.delivery_id}.{kind}.{message.delivery_attempt}"
    if isinstance(message, ErrorRaised) and message.command_msg_id:  # one refusal per command (a bulk command's:
        return f"{message.command_msg_id}.error"  # one per op), however many refusals its op had before
    return subjects.msg_id(message.op_id, kind, message.attempt)


def config_digest(config: msgspec.Struct) -> str:
    return hashlib.sha256(codec.encode(config)).hexdigest()[:12]


def cloudevent_headers(message: msgspec.Struct, mid: str, source: str) -> dict[str, str]:
    time = getattr(message, "at", None) or getattr(message, "requested_at", None)
    subject = getattr(message, "op_id", None) or getattr(message, "node", None)  # cluster events: the node
    return cloudevents.headers(codec.type_of(message), mid, source, subject, time)


@dataclass(frozen=True)
class Fence:
    """Publish only while ``subject``'s last message is still the one at stream sequence ``seq`` (a leader's
    claim, ``proto.leases.LeaderClaimed``): once another instance has claimed since, JetStream refuses the
    publish and ``Bus.publish`` raises ``Fenced``. Applies to the messages bound for the claim's stream."""

    subject: str
    seq: int

    def headers_for(self, subject: str) -> dict[str, str]:
        if subjects.stream_of(subject) != subjects.stream_of(self.subject):
            return {}
        return {"Nats-Expected-Last-Subject-Sequence": str(self.seq),
                "Nats-Expected-Last-Subject-Sequence-Subject": self.subject}
