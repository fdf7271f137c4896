"""What a pull consumer's delivery inbox keeps (``services.runtime.inbox``): JetStream's deliveries of its own
consumer and the status messages a fetch expects; anything else is dropped as it arrives, and said why."""
from __future__ import annotations

import asyncio

import pytest
from nats.aio.msg import Msg

from opsched.services.runtime import inbox
from tests.builders import case, case_name

ACK = "$JS.ACK.OPSCHED_OPS.cost-estimator.1.7.3.1700000000000000000.0"


def msg(reply: str = "", headers: dict[str, str] | None = None, data: bytes = b"x") -> Msg:
    return Msg(_client=None, subject="_INBOX.abc", reply=reply, data=data, headers=headers)  # type: ignore[arg-type]


@pytest.mark.parametrize("c", [
    case("a delivery of its own consumer is kept", m=msg(ACK), why=None),
    case("the server's no-messages status is kept (a fetch ends on it)", m=msg(headers={"Status": "404"}), why=None),
    case("a heartbeat is kept", m=msg(headers={"Status": "100"}), why=None),
    case("a request timeout is kept", m=msg(headers={"Status": "408"}), why=None),
    case("a plain message is dropped", m=msg(), why="not a JetStream delivery"),
    case("a reply subject that is not JetStream's is dropped", m=msg("_INBOX.x"), why="not a JetStream delivery"),
    case("a $JS.ACK reply of the wrong shape is dropped", m=msg("$JS.ACK.OPSCHED_OPS.x"), why="not a JetStream"),
    case("a delivery of another consumer is dropped", m=msg(ACK.replace("cost-estimator", "other")),
         why="another consumer"),
    case("a status no pull request asked for is dropped (nats-py would raise)", m=msg(headers={"Status": "503"}),
         why="status message (503)"),
], ids=case_name)
def test_what_an_inbox_keeps(c):
    why = inbox.garbage(c.m, "OPSCHED_OPS", "cost-estimator")
    assert (why is None) if c.why is None else (why is not None and c.why in why)


class FakePull:
    def __init__(self) -> None:
        self._sub = type("Sub", (), {})()
        self._sub._pending_queue = asyncio.Queue(maxsize=100)
        self._sub._pending_size = 0
        self._deliver = "_INBOX.abc"


async def test_a_screened_inbox_drops_garbage_as_it_arrives_and_keeps_its_pending_bytes_right():
    pull, dropped = FakePull(), []
    assert inbox.screen(pull, "OPSCHED_OPS", "cost-estimator", lambda m, why: dropped.append(why))
    assert inbox.inbox_of(pull) == "_INBOX.abc"
    for m in (msg(data=b"garbage"), msg(ACK, data=b"real"), msg(headers={"Status": "409"}, data=b"")):
        pull._sub._pending_size += len(m.data)  # as nats-py's client counts it before the put
        pull._sub._pending_queue.put_nowait(m)
    kept = [pull._sub._pending_queue.get_nowait() for _ in range(pull._sub._pending_queue.qsize())]
    assert [m.data for m in kept] == [b"real", b""] and len(dropped) == 1
    assert pull._sub._pending_size == len(b"real")
    assert inbox.screen(pull, "OPSCHED_OPS", "cost-estimator", lambda m, why: None)  # once is enough


def test_the_in_memory_pull_subscription_is_not_screened():
    assert not inbox.screen(object(), "OPSCHED_OPS", "cost-estimator", lambda m, why: None)
