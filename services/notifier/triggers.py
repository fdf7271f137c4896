"""What an op event triggers: Polyaxon's notification triggers on an op, the admin's subscriptions.

Polyaxon's ``trigger`` is one of ``succeeded``, ``failed``, ``stopped``, ``done`` (any final status).
opsched maps its own ends onto them: ``timed_out`` is a failure, ``rejected`` and ``skipped`` are final
too (``done``). An admin's subscription may also name non-final events: ``preempted``,
``budget_exceeded``, ``on_hold``."""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

OP_TRIGGERS = frozenset({"succeeded", "failed", "stopped", "done"})
# the op event type -> the Polyaxon trigger it is (besides ``done``)
FINAL = {"succeeded": "succeeded", "failed": "failed", "timed_out": "failed", "stopped": "stopped",
         "rejected": None, "skipped": None}
NON_FINAL = frozenset({"preempted", "budget_exceeded", "on_hold"})
SUBSCRIBABLE = OP_TRIGGERS | frozenset(FINAL) | NON_FINAL
# the event types the match stage consumes
TRIGGERING = frozenset(FINAL) | NON_FINAL


class TriggerError(ValueError):
    """An unknown trigger; the message names it."""


def check_trigger(trigger: str) -> str:
    if trigger not in OP_TRIGGERS:
        raise TriggerError(f"unknown notification trigger {trigger!r}; one of {', '.join(sorted(OP_TRIGGERS))}")
    return trigger


def fires(trigger: str, event_type: str) -> bool:
    """Whether ``trigger`` (an op's or a subscription's) fires on an event of ``event_type``."""
    if trigger == event_type:
        return True
    if event_type in FINAL:
        return trigger == "done" or FINAL[event_type] == trigger
    return False


@dataclass(frozen=True)
class OpNotification:
    """One ``notifications`` entry of an op: its trigger and the connections it names."""
    trigger: str
    connections: tuple[str, ...]


class Subscribing(Protocol):
    """An admin's subscription (``connections.Subscription``)."""
    on: list[str]
    connections: list[str]

    def covers(self, queue: str) -> bool: ...


def connections_for(event_type: str, queue: str, own: Iterable[OpNotification],
                    subscriptions: Iterable[Subscribing]) -> list[str]:
    """The connections an event of ``event_type`` on an op in ``queue`` is delivered to, de-duplicated,
    in first-named order: the op's own notifications, then the admin's subscriptions (objects with
    ``on``, ``connections`` and ``covers(queue)``)."""
    out: dict[str, None] = {}
    for n in own:
        if fires(n.trigger, event_type):
            out.update(dict.fromkeys(n.connections))
    for s in subscriptions:
        if s.covers(queue) and any(fires(t, event_type) for t in s.on):
            out.update(dict.fromkeys(s.connections))
    return list(out)


def delivery_id(trigger_event_id: str, connection: str) -> str:
    """Deterministic: a redelivered trigger gives the same delivery (the Nats-Msg-Id and the receiver's key)."""
    return "dlv-" + hashlib.sha256(f"{trigger_event_id}\x00{connection}".encode()).hexdigest()[:24]


def known(connections: Mapping[str, object], names: Iterable[str]) -> list[str]:
    """The names not among ``connections`` (an op naming an unknown connection)."""
    return [n for n in names if n not in connections]
