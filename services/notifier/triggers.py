"""What an op event triggers: Polyaxon's notification triggers on an op, the admin's subscriptions.

An op's ``plugins.notifications[].trigger`` is Polyaxon's, the same rule as a hook's
(``proto.lifecycle.HOOK_TRIGGERS``: ``succeeded``; ``failed`` = failed or timed out; ``stopped``;
``done`` = any end but a rejection). An admin's subscription may name those, any end's own event type
(``timed_out``, ``rejected``, ``skipped``...) and non-final events: ``preempted``, ``budget_exceeded``,
``on_hold``."""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from opsched.proto.lifecycle import HOOK_TRIGGERS, Status

ENDS = frozenset({Status.SUCCEEDED.label, Status.FAILED.label, Status.TIMED_OUT.label, Status.STOPPED.label,
                  Status.REJECTED.label, Status.SKIPPED.label})
NON_FINAL = frozenset({"preempted", "budget_exceeded", "on_hold"})
TRIGGERING = ENDS | NON_FINAL  # the event types the match stage consumes
SUBSCRIBABLE = frozenset(HOOK_TRIGGERS) | TRIGGERING


def fires(trigger: str, event_type: str) -> bool:
    """Whether ``trigger`` (an op's or a subscription's) fires on an event of ``event_type``."""
    if trigger == event_type:
        return True
    ends = HOOK_TRIGGERS.get(trigger)
    return ends is not None and any(s.label == event_type for s in ends)


@dataclass(frozen=True)
class OpNotification:
    """One ``notifications`` entry of an op: its trigger and the connections it names."""
    trigger: str
    connections: tuple[str, ...]


class Subscribing(Protocol):
    """An admin's subscription (``connections.Subscription``)."""
    @property
    def on(self) -> list[str]: ...

    @property
    def connections(self) -> list[str]: ...

    def covers(self, queue: str) -> bool: ...


def connections_for(event_type: str, queue: str, own: Iterable[OpNotification],
                    subscriptions: Iterable[Subscribing]) -> list[str]:
    """The connections an event of ``event_type`` on an op in ``queue`` is delivered to, de-duplicated,
    in first-named order: the op's own notifications, then the admin's subscriptions."""
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
