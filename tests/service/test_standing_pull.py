"""A handler loop's standing pull request (``services.runtime.standing_pull``, issue 36), on a real nats-server:
a trickle of messages costs a pull request per half batch, not one (and a status back) per message; a request
that ended is asked again; what arrived and was never taken is given back at once, not after the ack wait; a
take waiting for its first message returns as soon as its loop is stopping."""
from __future__ import annotations

import asyncio
import time
import uuid

from opsched.proto import subjects
from opsched.services.runtime.standing_pull import StandingPull
from tests.builders.identities import HARNESS
from tests.waiting import eventually

LONG_ACK_WAIT_S = 120.0  # far longer than any test waits: a message back sooner was given back


async def _consumer(nats_server, ack_wait: float = 30.0):
    bus = await nats_server.connect(name="test", identity=HARNESS)
    await bus.ensure_streams()
    durable = f"test-{uuid.uuid4().hex[:12]}"
    psub = await bus.durable(durable, subjects.OPS_STREAM, [subjects.events_of("submitted")], max_deliver=5,
                             ack_wait=ack_wait)
    return bus, durable, psub


async def _publish(bus, i: int) -> None:
    await bus.publish_raw(subjects.event("submitted", f"op-{i}"), f"m{i}".encode(), {"Nats-Msg-Id": f"m{i}"})


async def _until(predicate, what: str, timeout: float = 5.0) -> None:
    async def check() -> bool:
        return predicate()
    await eventually(check, what, timeout, interval=0.01)


def _arrived(pull: StandingPull) -> int:
    """The deliveries waiting in the pull's queue (the server's heartbeats may wait beside them)."""
    return sum(1 for m in list(getattr(pull.queue, "_queue", ())) if not (m.headers or {}).get("Status"))


async def test_a_trickle_of_messages_costs_a_pull_request_per_half_batch(nats_server):
    bus, _, psub = await _consumer(nats_server)
    pull = StandingPull(psub, batch=16)
    taken: list[bytes] = []
    for i in range(40):  # one at a time: a fetch would ask (and be answered "no more") for each
        await _publish(bus, i)
        got = await pull.take(timeout=5.0)
        assert [m.data for m in got] == [f"m{i}".encode()]
        taken += [m.data for m in got]
        for m in got:
            await m.ack()
    assert len(taken) == 40
    assert pull.requests <= 1 + 40 // 8  # 16 asked, then 8 more each time 8 were taken: not one per message
    await pull.close()
    await bus.close()


async def test_a_request_that_expired_is_asked_again_and_later_messages_still_come(nats_server):
    bus, _, psub = await _consumer(nats_server)
    pull = StandingPull(psub, batch=8, expires_s=0.4)
    deadline = time.monotonic() + 5.0
    while pull.requests < 2:  # the first request expires unfilled (a 408 gives its credit back): asked again
        assert await pull.take(timeout=0.2) == []
        assert time.monotonic() < deadline, "the expired request was not asked again"
    await _publish(bus, 1)
    got = await pull.take(timeout=5.0)
    assert [m.data for m in got] == [b"m1"]
    await pull.close()
    await bus.close()


async def test_what_arrived_and_was_never_taken_is_given_back_at_once(nats_server):
    bus, durable, psub = await _consumer(nats_server, ack_wait=LONG_ACK_WAIT_S)
    pull = StandingPull(psub, batch=8)
    assert await pull.take(timeout=0.05) == []  # the request stands
    for i in range(3):
        await _publish(bus, i)
    await _until(lambda: _arrived(pull) == 3, "three deliveries waiting")  # arrived, not taken
    await pull.close()
    other = await bus.js.pull_subscribe_bind(durable=durable, stream=subjects.OPS_STREAM)
    again = await other.fetch(3, timeout=5.0)  # not after the ack wait: given back
    assert sorted(m.data for m in again) == [b"m0", b"m1", b"m2"]
    assert all(m.metadata.num_delivered == 2 for m in again)
    await bus.close()


async def test_a_standby_gives_back_what_a_request_of_its_leading_days_still_brings(nats_server):
    bus, _, psub = await _consumer(nats_server, ack_wait=LONG_ACK_WAIT_S)
    pull = StandingPull(psub, batch=8)
    assert await pull.take(timeout=0.05) == []
    await _publish(bus, 7)
    await _until(lambda: _arrived(pull) == 1, "a delivery waiting")
    assert await pull.give_back() == 1
    again = await pull.take(timeout=5.0)  # back at once (its own request stands: it comes here again)
    assert [(m.data, m.metadata.num_delivered) for m in again] == [(b"m7", 2)]
    await pull.close()
    await bus.close()


async def test_after_a_reconnect_the_request_is_asked_again_at_once(nats_server):
    """A server killed (no word to its clients: a graceful stop would end the request with a 409) forgets the
    requests of the connection it lost: the next ``take`` after the reconnect asks again, rather than wait for
    heartbeats that will not come (``MISSED_HEARTBEATS``, seconds later)."""
    bus, _, psub = await _consumer(nats_server)
    pull = StandingPull(psub, batch=8)
    assert await pull.take(timeout=0.05) == []  # the request stands
    asked = pull.requests
    await asyncio.to_thread(nats_server.server.kill)
    await asyncio.to_thread(nats_server.start)
    await _until(lambda: bus.nc.is_connected and bus.nc.stats["reconnects"] > 0, "the reconnect", timeout=20.0)
    await _publish(bus, 1)
    deadline = time.monotonic() + 3.0  # the heartbeats would notice only after 6 s
    got: list = []
    while not got:
        assert time.monotonic() < deadline, "the request was not asked again after the reconnect"
        got = await pull.take(timeout=0.2)
    assert [m.data for m in got] == [b"m1"] and pull.requests > asked
    await pull.close()
    await bus.close()


async def test_a_take_waiting_for_its_first_message_returns_nothing_once_stop_is_set_and_takes_nothing(nats_server):
    """A stopping service does not wait out its loop's fetch timeout; the wait it cancelled took nothing."""
    bus, _, psub = await _consumer(nats_server, ack_wait=LONG_ACK_WAIT_S)
    stop = asyncio.Event()
    pull = StandingPull(psub, batch=8, stop=stop)
    taking = asyncio.create_task(pull.take(timeout=60.0))  # a minute: only stop ends it within the bound below
    await _until(lambda: pull.requests == 1, "the request asked")
    stop.set()
    assert await asyncio.wait_for(taking, 10.0) == []
    await _publish(bus, 1)
    await _until(lambda: _arrived(pull) == 1, "the delivery waiting")
    got = await pull.take(timeout=60.0)  # what arrives after is here, not in the cancelled wait's hands
    assert [m.data for m in got] == [b"m1"]
    await pull.close()
    await bus.close()
