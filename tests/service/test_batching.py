"""Publishes that meet on the way go out as one atomic batch (``bus.batching``), on a real nats-server: one ack
for many, every caller answered with its own sequence, and each one's own answer kept whenever the stream refuses
the batch (a duplicate, a fence that moved) or takes none."""
from __future__ import annotations

import asyncio

import nats.js.errors
import pytest
from nats.js import api

from opsched.bus.batching import Batching
from opsched.bus.requesting import Requester
from opsched.proto import subjects
from tests.builders.identities import HARNESS


@pytest.fixture
async def nc(nats_server):
    """A plain connection (the harness user's: it may make streams of its own): ``S`` takes batches, ``N`` not."""
    bus = await nats_server.connect(name="test", identity=HARNESS)
    js = bus.nc.jetstream()
    await js.add_stream(api.StreamConfig(name="S", subjects=["s.>"], allow_atomic=True))
    await js.add_stream(api.StreamConfig(name="N", subjects=["n.>"]))
    yield bus.nc
    await bus.close()


def _at_once(batching: Batching, stream: str, subjects_ids: list[tuple[str, str]], extra: dict | None = None):
    return asyncio.gather(*(batching.publish(stream, subject, mid.encode(), {"Nats-Msg-Id": mid, **(extra or {})})
                            for subject, mid in subjects_ids), return_exceptions=True)


async def _stored(nc, stream: str) -> list[tuple[int, str, bytes]]:
    js, out = nc.jetstream(), []
    last = (await js.stream_info(stream)).state.last_seq
    for seq in range(1, last + 1):
        msg = await js.get_msg(stream, seq)
        out.append((seq, msg.subject, msg.data))
    return out


async def test_publishes_that_meet_go_as_one_batch_each_answered_with_its_own_sequence(nc):
    batching = Batching(nc, Requester(nc), 2.0)
    acks = await _at_once(batching, "S", [(f"s.{i}", f"m{i}") for i in range(10)])
    # the first went alone; the nine that met it waited for its ack, then went together
    assert [(a.stream, a.seq, a.duplicate) for a in acks] == [("S", i, False) for i in range(1, 11)]
    assert (batching.batches, batching.batched) == (1, 9)
    assert await _stored(nc, "S") == [(i + 1, f"s.{i}", f"m{i}".encode()) for i in range(10)]


async def test_a_lone_publish_is_not_held(nc):
    batching = Batching(nc, Requester(nc), 2.0)
    for i in range(3):
        ack = await batching.publish("S", "s.x", b"x", {"Nats-Msg-Id": f"x{i}"})
        assert ack.seq == i + 1
    assert batching.batches == 0


async def test_a_batch_with_a_repeat_falls_back_to_each_its_own_answer(nc):
    """A redelivered message publishes its events again: the stream refuses the whole batch (a duplicate in it);
    published again one by one, the repeat is acked as a duplicate and the rest stored, once each."""
    batching = Batching(nc, Requester(nc), 2.0)
    await batching.publish("S", "s.a", b"a", {"Nats-Msg-Id": "a"})
    acks = await _at_once(batching, "S", [("s.first", "first"), ("s.b", "b"), ("s.a", "a"), ("s.c", "c")])
    assert [a.duplicate for a in acks] == [False, False, True, False]
    assert acks[2].seq == 1
    assert batching.batches == 0
    assert sorted(subject for _, subject, _ in await _stored(nc, "S")) == ["s.a", "s.b", "s.c", "s.first"]


async def test_a_broken_fence_refuses_each_publish_as_it_would_alone(nc):
    js = nc.jetstream()
    claim = (await js.publish("s.lease", b"claim")).seq
    await js.publish("s.lease", b"another instance claims")
    fence = {"Nats-Expected-Last-Subject-Sequence": str(claim), "Nats-Expected-Last-Subject-Sequence-Subject": "s.lease"}
    batching = Batching(nc, Requester(nc), 2.0)
    results = await _at_once(batching, "S", [(f"s.{i}", f"f{i}") for i in range(5)], fence)
    assert all(isinstance(r, nats.js.errors.BadRequestError) and r.err_code == 10071 for r in results)
    assert [s for _, s, _ in await _stored(nc, "S")] == ["s.lease", "s.lease"]


async def test_a_stream_without_batches_turns_them_off_and_loses_nothing(nc):
    batching = Batching(nc, Requester(nc), 2.0)
    first = await _at_once(batching, "N", [(f"n.{i}", f"n{i}") for i in range(6)])
    again = await _at_once(batching, "N", [(f"n.{i}", f"again{i}") for i in range(6)])
    assert sorted(a.seq for a in first + again) == list(range(1, 13))
    assert batching.batches == 0 and not batching._streams["N"].batching  # noqa: SLF001 - the switch under test
    assert len(await _stored(nc, "N")) == 12


async def test_no_answer_is_every_held_publishs_error(nc):
    """Nothing answers (no stream takes the subject): each caller gets the error it would have alone."""
    batching = Batching(nc, Requester(nc), 0.5)
    results = await _at_once(batching, "X", [(f"x.{i}", f"x{i}") for i in range(4)])
    assert all(isinstance(r, nats.js.errors.NoStreamResponseError) for r in results)
    assert not batching._streams["X"].busy  # noqa: SLF001 - idle again: the next publish is not held


async def test_the_bus_batches_the_op_streams_publishes(nats_server):
    """What the services run: ``Bus.publish_raw`` on the project's streams (created with batches allowed)."""
    bus = await nats_server.connect(name="opsched-admission")
    await bus.ensure_streams()
    acks = await asyncio.gather(*(bus.publish_raw(subjects.event("submitted", f"op{i}"), b"{}", {"Nats-Msg-Id": f"note{i}"})
                                  for i in range(8)))
    assert len({a.seq for a in acks}) == 8
    assert bus.batching.batches == 1 and bus.batching.batched == 7
    await bus.close()
