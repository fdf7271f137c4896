"""The runtime's own request path (``services.runtime.requesting``) on a real nats-server: the stream's ack,
a duplicate, and every refusal raised as nats-py raises it (the callers tell outages, fences and bugs apart
by these classes)."""
from __future__ import annotations

import nats
import nats.errors
import nats.js.errors
import pytest

from services.runtime.requesting import Requester


@pytest.fixture
async def nc(nats_server):
    from nats.js import api

    conn = await nats.connect(nats_server.url)
    await conn.jetstream().add_stream(api.StreamConfig(name="S", subjects=["s.>"]))
    yield conn
    await conn.close()


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
