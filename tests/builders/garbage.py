"""Garbage on a service's delivery inbox (issue 28): messages any client allowed to publish on ``_INBOX.>`` can put
where a pull consumer's deliveries come, each as nats-py would hand it to a fetch. ``land`` puts them there, on
the in-memory bus (``PullSubscription.inject``) or a real nats-server (a publish on the inbox subject)."""
from __future__ import annotations

from typing import Any

from nats.aio.msg import Msg

from opsched.proto import subjects
from opsched.proto.events import CostEstimated
from opsched.services.runtime import inbox
from tests.waiting import eventually

# (subject suffix, reply, headers, data): what each is not
SHAPES: list[tuple[str | None, dict[str, str] | None, bytes]] = [
    (None, None, b"garbage"),  # a plain message: no reply subject, no metadata
    ("_INBOX.elsewhere", {"Opsched-Type": "submitted"}, b"{}"),  # a reply subject, not JetStream's
    (None, {"Status": "503", "Description": "No Responders"}, b""),  # a status no pull request asked for
    (f"$JS.ACK.{subjects.OPS_STREAM}.someone-else.1.1.1.1700000000000000000.0", None, b"{}"),  # another consumer's
    ("$JS.ACK.OPS.short", None, b"{}"),  # a $JS.ACK reply that is no delivery's
]


def forged_ack(reply: str | None) -> bool:
    return (reply or "").startswith("$JS.ACK.")


async def land(pull: Any, *, publish: Any = None) -> int:
    """Garbage onto ``pull``'s inbox: through ``publish(subject, data, reply, headers)`` (a nats connection's) when
    it is a nats pull subscription, else injected into the in-memory one. How many landed: every shape in memory;
    on the secured nats-server not those with a forged ``$JS.ACK`` reply: nats-server (2.15) refuses a client's
    publish with a ``$JS.ACK`` reply subject, whatever its user may publish (tests/security/test_inbox.py)."""
    subject = inbox.inbox_of(pull)
    landed = 0
    for reply, headers, data in SHAPES:
        if subject is not None and forged_ack(reply):
            continue
        landed += 1
        if subject is None:
            pull.inject(Msg(_client=None, subject="_INBOX.in-memory", reply=reply or "", data=data,  # type: ignore[arg-type]
                            headers=headers))
        else:
            await publish(subject, data, reply=reply or "", headers=headers)
    return landed


async def survived(events: Any, service: Any, landed: int, real: list[str]) -> None:
    """``service`` handled every ``real`` op (their ``cost_estimated``), dropped exactly the ``landed`` garbage, and
    neither retried nor dead-lettered anything for it."""
    for op_id in real:
        await events.expect(CostEstimated, op_id, timeout=15)

    async def all_dropped() -> bool:
        return service.stats.inbox_garbage == landed
    assert await eventually(all_dropped, f"the {landed} garbage messages dropped", timeout=10)
    assert (service.stats.retried, service.stats.dead_lettered) == (0, 0)  # nothing handled, answered nor dead-lettered
