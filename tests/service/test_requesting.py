"""The runtime's own request path (``bus.requesting``) on a real nats-server: the stream's ack,
a duplicate, and every refusal raised as nats-py raises it (the callers tell outages, fences and bugs apart
by these classes)."""
from __future__ import annotations

import nats
import nats.errors
import nats.js.errors
import pytest

from opsched.bus.requesting import Requester
from opsched.proto import subjects
from tests.builders.identities import HARNESS


@pytest.fixture
async def nc(nats_server):
    """A plain nats-py connection (the harness user's: it may make a stream of its own)."""
    from nats.js import api

    bus = await nats_server.connect(name="test", identity=HARNESS)
    conn = bus.nc
    await conn.jetstream().add_stream(api.StreamConfig(name="S", subjects=["s.>"]))
    yield conn
    await bus.close()


async def test_a_publish_is_acked_with_its_sequence_and_a_repeat_as_a_duplicate(nc):
    requester = Requester(nc)
    first = await requester.publish("s.a", b"1", {"Nats-Msg-Id": "m1"}, 1.0)
    again = await requester.publish("s.a", b"1", {"Nats-Msg-Id": "m1"}, 1.0)
    assert (first.stream, first.seq, first.duplicate) == ("S", 1, False)
    assert (again.seq, again.duplicate) == (1, True)


async def test_refusals_are_nats_pys_errors(nc):
    requester = Requester(nc)
    with pytest.raises(nats.js.errors.NoStreamResponseError):
        await requester.publish("nostream.a", b"1", {}, 1.0)
    with pytest.raises(nats.js.errors.BadRequestError) as refused:
        await requester.publish("s.a", b"1", {"Nats-Expected-Last-Subject-Sequence": "7"}, 1.0)
    assert refused.value.err_code == 10071  # the fence's code (``Bus.publish`` tells a fence by it)


async def test_a_request_nobody_answers_times_out_and_leaves_nothing_behind(nc):
    await nc.subscribe("silent")  # interest, no reply
    requester = Requester(nc)
    with pytest.raises(nats.errors.TimeoutError):
        await requester.request("silent", b"?", None, 0.1)
    assert nc._resp_map == {}


@pytest.fixture
async def bucket(nats_server):
    bus = await nats_server.connect(name="opsched-cache")  # a service: it makes its buckets
    yield await bus.ensure_cache_bucket(subjects.CACHE_BUCKET)  # its own: a service writes only those
    await bus.close()


async def test_a_bucket_reads_and_writes_as_nats_pys_does(bucket):
    with pytest.raises(nats.js.errors.KeyNotFoundError):
        await bucket.get("k")
    first = await bucket.create("k", b"1")
    with pytest.raises(nats.js.errors.KeyWrongLastSequenceError):
        await bucket.create("k", b"again")
    with pytest.raises(nats.js.errors.KeyWrongLastSequenceError):
        await bucket.update("k", b"2", last=first + 5)
    second = await bucket.update("k", b"2", last=first)
    entry = await bucket.get("k")
    assert (entry.value, entry.revision) == (b"2", second)
    assert await bucket.put("k", b"3") > second


async def test_a_deleted_key_reads_as_deleted_and_can_be_created_again(bucket):
    await bucket.put("k", b"1")
    await bucket.delete("k")  # nats-py's own call: a delete marker
    with pytest.raises(nats.js.errors.KeyDeletedError):
        await bucket.get("k")
    revision = await bucket.create("k", b"again")
    assert (await bucket.get("k")).revision == revision
