"""The bus itself, on both buses: what the services rely on holds on the in-memory bus as on nats-server
(dedupe, subject wildcards, per-subject limits, durable consumers shared by name with ack / nak / term /
max_deliver, ordered follow, request/reply in a queue group, the key-value bucket's compare-and-set, purges
and what the durable consumers have consumed)."""
from __future__ import annotations

import asyncio

import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import api
from nats.js.errors import NoStreamResponseError

from opsched.bus.refusals import NotPermitted
from opsched.proto import permissions, subjects
from opsched.proto.queries import WhyRequest
from tests.builders.identities import HARNESS

QUIET_S = 0.3  # how long "nothing more is delivered" is watched for


def msg(msg_id: str) -> dict[str, str]:
    return {"Nats-Msg-Id": msg_id}


@pytest.fixture
async def other(connect, bus_url, bus):
    """A second connection to the same bus (as another service or replica has), the harness's too."""
    b = await connect(bus_url, "other", HARNESS)
    yield b
    await b.close()


async def test_a_connection_may_publish_only_what_its_nats_user_may_and_is_told_so(connect, bus_url, bus):
    """The permissions of the generated nats-server configuration (``proto.permissions``), on both buses: a
    service publishes its own events, not another's; a client its own ``cmd.<user>.``, not another user's."""
    cost, client = await connect(bus_url, "opsched-cost"), await connect(bus_url, "test-client")
    try:
        assert (cost.user, client.user) == ("cost", "admin")
        admitted = subjects.event("admitted", "x")
        with pytest.raises(NotPermitted) as refused:
            await cost.publish_raw(admitted, b"{}", msg("x.admitted.0"))
        assert (refused.value.user, refused.value.subject) == ("cost", admitted)
        await cost.publish_raw(subjects.event("cost_estimated", "x"), b"{}", msg("x.cost_estimated.0"))
        with pytest.raises(NotPermitted, match="refused user 'admin' publishing to cmd.ann.stop"):
            await client.publish_raw(subjects.command("stop", "ann"), b"{}", msg("ann-stop"))
        await client.publish_raw(subjects.command("stop", "admin"), b"{}", msg("admin-stop"))
        assert await bus.read_all(subjects.OPS_STREAM, subjects.OPS_ALL) == [b"{}"]  # the harness reads all
        assert await bus.read_all(subjects.CMD_STREAM, subjects.CMD_ALL) == [b"{}"]
    finally:
        await cost.close()
        await client.close()


async def test_a_message_id_seen_before_is_stored_once(bus):
    first = await bus.publish_raw(subjects.event("submitted", "a"), b"1", msg("a.submitted.0"))
    again = await bus.publish_raw(subjects.event("submitted", "a"), b"2", msg("a.submitted.0"))
    assert (again.seq, again.duplicate) == (first.seq, True) and not first.duplicate
    assert await bus.read_all(subjects.OPS_STREAM, subjects.OPS_ALL) == [b"1"]
    assert await bus.last_seq(subjects.OPS_STREAM) == first.seq


async def test_a_publish_on_a_subject_no_stream_holds_has_no_stream_response(bus, monkeypatch):
    # a no-stream answer is waited out as a leaderless stream's is (``PUBLISH_PATIENCE_S``, 20 s): a second will do
    monkeypatch.setattr("opsched.bus.bus.PUBLISH_PATIENCE_S", 1.0)
    with pytest.raises(NoStreamResponseError):
        await bus.publish_raw("nowhere.at.all", b"x", msg("x"))


async def test_wildcards_select_subjects_and_the_cluster_stream_keeps_the_latest_per_node(bus):
    for i, (kind, op_id) in enumerate([("submitted", "a"), ("submitted", "b"), ("admitted", "a")]):
        await bus.publish_raw(subjects.event(kind, op_id), f"{i}".encode(), msg(f"m{i}"))
    assert await bus.read_all(subjects.OPS_STREAM, subjects.events_for("a")) == [b"0", b"2"]
    assert await bus.read_all(subjects.OPS_STREAM, subjects.events_of("submitted")) == [b"0", b"1"]
    for i, node in enumerate(["n1", "n2", "n1"]):
        await bus.publish_raw(subjects.node(node), f"{node}-{i}".encode(), msg(f"node{i}"))
    assert await bus.read_all(subjects.CLUSTER_STREAM, subjects.CLUSTER_ALL) == [b"n2-1", b"n1-2"]


async def test_follow_delivers_the_stored_messages_then_live_ones_in_order(bus):
    seen: asyncio.Queue[tuple[bytes, int]] = asyncio.Queue()

    async def on_message(data: bytes, seq: int) -> None:
        await seen.put((data, seq))
    await bus.publish_raw(subjects.event("submitted", "a"), b"old", msg("1"))
    await bus.publish_raw(subjects.event("submitted", "b"), b"other", msg("2"))
    sub = await bus.follow(subjects.OPS_STREAM, subjects.events_for("a"), on_message)
    await bus.publish_raw(subjects.event("admitted", "a"), b"new", msg("3"))
    got = [await asyncio.wait_for(seen.get(), 5) for _ in range(2)]
    assert got == [(b"old", 1), (b"new", 3)]
    await sub.unsubscribe()


async def test_a_purge_removes_a_subject_or_what_came_before_a_sequence(bus):
    for i, (kind, op_id) in enumerate([("submitted", "a"), ("admitted", "a"), ("cost_recorded", "a"),
                                       ("submitted", "b"), ("cost_recorded", "b")]):
        await bus.publish_raw(subjects.event(kind, op_id), f"{kind}.{op_id}".encode(), msg(f"m{i}"))
    await bus.purge(subjects.OPS_STREAM, subjects.event("admitted", "a"))
    await bus.purge(subjects.OPS_STREAM, subjects.event("submitted", "a"))
    await bus.purge(subjects.OPS_STREAM, subjects.events_of("cost_recorded"), before_seq=5)
    assert await bus.read_all(subjects.OPS_STREAM, subjects.OPS_ALL) == [b"submitted.b", b"cost_recorded.b"]
    assert await bus.last_stored(subjects.OPS_STREAM, subjects.events_for("a")) == 0


async def test_the_last_message_of_a_subject_is_read_in_one_request(bus):
    for i, data in enumerate([b"first", b"second"]):
        await bus.publish_raw(subjects.event("submitted", "a"), data, msg(f"l{i}"))
    await bus.publish_raw(subjects.event("admitted", "a"), b"other", msg("l2"))
    last = await bus.last_message(subjects.OPS_STREAM, subjects.event("submitted", "a"))
    assert last is not None and (last.data, last.subject, last.stream_seq) == (
        b"second", subjects.event("submitted", "a"), 2)
    assert await bus.last_message(subjects.OPS_STREAM, subjects.event("submitted", "none")) is None


async def test_replay_returns_when_the_last_messages_were_purged(bus):
    for i, op_id in enumerate(["a", "b", "c"]):
        await bus.publish_raw(subjects.event("submitted", op_id), op_id.encode(), msg(f"m{i}"))
    await bus.purge(subjects.OPS_STREAM, subjects.events_for("c"))
    seen: list[bytes] = []

    async def on_message(data: bytes, seq: int) -> None:
        seen.append(data)
    sub = await asyncio.wait_for(bus.replay(subjects.OPS_STREAM, subjects.OPS_ALL, on_message), 5)
    assert seen == [b"a", b"b"]
    await sub.unsubscribe()


async def test_what_a_durable_consumer_has_not_acked_is_not_consumed(bus):
    services = permissions.all_durables(("gpu-east",))
    pull = await bus.durable(subjects.COST_LEDGER, subjects.OPS_STREAM, [subjects.events_of("submitted")],
                             max_deliver=5)
    for i, kind in enumerate(["submitted", "admitted", "submitted"]):
        await bus.publish_raw(subjects.event(kind, f"o{i}"), b"x", msg(f"c{i}"))
    assert await bus.consumed_up_to(subjects.OPS_STREAM, services) == 0
    first = (await pull.fetch(1, timeout=2))[0]
    await first.ack_sync()  # the server confirmed the ack: a plain ack() may still be in flight
    assert await bus.consumed_up_to(subjects.OPS_STREAM, services) == 2  # 2 is no submitted: never its to take
    for m in await pull.fetch(5, timeout=2):
        await m.ack_sync()
    assert await bus.consumed_up_to(subjects.OPS_STREAM, services) == 3


async def test_a_consumer_leader_that_has_not_seen_the_last_commands_holds_them_back_all_the_same(nats_server,
                                                                                                    monkeypatch):
    """A consumer leader on a node still catching up (restarted after a kill -9) says nothing is left for its
    durable (``num_pending`` 0) while the stream's leader holds commands it never delivered: a purge up to the
    stream's end removed them, undelivered (200 ops at 40/s, a NATS node killed: 23 submits never admitted). What
    is left is asked of the stream's leader, never taken from the consumer's count."""
    bus = await nats_server.connect(name="test", identity=HARNESS)
    await bus.ensure_streams()
    admission = permissions.durables_of(permissions.STREAM_KEEPER)
    pull = await bus.durable(admission[0], subjects.CMD_STREAM, [subjects.CMD_ALL], max_deliver=5)
    for i in range(4):
        await bus.publish_raw(subjects.submit("default", "alice"), b"x", msg(f"c{i}"))
    for m in await pull.fetch(2, timeout=2):
        await m.ack_sync()
    one, every = bus.js.consumer_info, bus.js.consumers_info

    def caught_up(info: api.ConsumerInfo) -> api.ConsumerInfo:
        info.num_pending, info.num_ack_pending = 0, 0  # "nothing left", by its own count
        return info

    async def one_seen_by_a_lagging_leader(*args, **kwargs):
        return caught_up(await one(*args, **kwargs))

    async def every_one_seen_by_a_lagging_leader(*args, **kwargs):
        return [caught_up(info) for info in await every(*args, **kwargs)]
    monkeypatch.setattr(bus.js, "consumer_info", one_seen_by_a_lagging_leader)
    monkeypatch.setattr(bus.js, "consumers_info", every_one_seen_by_a_lagging_leader)
    assert await bus.consumed_up_to(subjects.CMD_STREAM, admission) == 2
    await bus.close()


async def test_a_durable_no_service_owns_holds_no_purge_back_and_a_named_agents_dispatcher_does(nats_server):
    """A stray durable (here the harness's: any user of the services' account might leave one) never acks:
    it would pin every purge at 0. Only the services' own durables count, a named agent's dispatcher's too."""
    bus = await nats_server.connect(name="test", identity=HARNESS)
    await bus.ensure_streams()
    agent = subjects.dispatcher_durable("gpu-east")
    await bus.durable("stray", subjects.OPS_STREAM, [subjects.OPS_ALL], max_deliver=5)
    dispatcher = await bus.durable(agent, subjects.OPS_STREAM, [subjects.OPS_ALL], max_deliver=5)
    for i in range(3):
        await bus.publish_raw(subjects.event("submitted", f"o{i}"), b"x", msg(f"s{i}"))
    assert await bus.consumed_up_to(subjects.OPS_STREAM, permissions.all_durables()) == 3  # neither is known
    assert await bus.consumed_up_to(subjects.OPS_STREAM, permissions.all_durables(("gpu-east",))) == 0
    for m in await dispatcher.fetch(3, timeout=2):
        await m.ack_sync()
    assert await bus.consumed_up_to(subjects.OPS_STREAM, permissions.all_durables(("gpu-east",))) == 3
    stray = await bus.js.consumer_info(subjects.OPS_STREAM, "stray")
    assert stray.num_pending == 3  # it holds all three, unacked: ignored
    await bus.close()


async def test_a_durable_consumer_shared_by_two_connections_gives_each_message_to_one(bus, other):
    for i in range(4):
        await bus.publish_raw(subjects.command("stop"), f"{i}".encode(), msg(f"stop{i}"))
    mine = await bus.durable("shared", subjects.CMD_STREAM, [subjects.CMD_STOP], max_deliver=3)
    theirs = await other.durable("shared", subjects.CMD_STREAM, [subjects.CMD_STOP], max_deliver=3)
    a, b = await mine.fetch(2, timeout=5), await theirs.fetch(2, timeout=5)
    assert sorted(m.data for m in a + b) == [b"0", b"1", b"2", b"3"]
    for m in a + b:
        await m.ack()
    with pytest.raises(NatsTimeout):
        await mine.fetch(1, timeout=QUIET_S)


async def test_a_nak_redelivers_counting_deliveries_until_max_deliver_and_term_ends_it(bus):
    await bus.publish_raw(subjects.command("stop"), b"retry-me", msg("r"))
    await bus.publish_raw(subjects.command("stop"), b"bad", msg("t"))
    sub = await bus.durable("retries", subjects.CMD_STREAM, [subjects.CMD_STOP], max_deliver=2)
    first, bad = await sub.fetch(2, timeout=5)
    assert (first.data, first.metadata.num_delivered, first.metadata.sequence.stream) == (b"retry-me", 1, 1)
    await bad.term()
    await first.nak(delay=0.05)
    [again] = await sub.fetch(1, timeout=5)
    assert (again.data, again.metadata.num_delivered, again.headers["Nats-Msg-Id"]) == (b"retry-me", 2, "r")
    await again.nak()  # the second delivery was the last
    with pytest.raises(NatsTimeout):
        await sub.fetch(1, timeout=QUIET_S)


async def test_a_request_is_answered_by_one_server_of_the_queue_group(bus, other):
    answered: list[str] = []

    def server(name: str):
        async def answer(data: bytes) -> bytes:
            answered.append(name)
            return name.encode()
        return answer
    with pytest.raises(NoRespondersError):
        await bus.request(subjects.QUERY_WHY, WhyRequest(op_id="a"), timeout=2)
    await bus.serve(subjects.QUERY_WHY, server("one"), group="admission")
    await other.serve(subjects.QUERY_WHY, server("two"), group="admission")
    replies = [await bus.request(subjects.QUERY_WHY, WhyRequest(op_id="a"), timeout=5) for _ in range(6)]
    assert len(answered) == 6 and sorted(set(replies)) == sorted({n.encode() for n in answered})


async def test_the_cache_bucket_is_shared_and_changed_only_by_compare_and_set(bus, other):
    mine = await bus.ensure_cache_bucket(subjects.CACHE_BUCKET)
    theirs = await other.ensure_cache_bucket(subjects.CACHE_BUCKET)
    revision = await mine.create("k", b"1")
    assert (await theirs.get("k")).value == b"1"
    with pytest.raises(Exception) as lost:
        await theirs.create("k", b"2")
    assert type(lost.value).__name__ == "KeyWrongLastSequenceError"
    await theirs.update("k", b"2", last=revision)
    with pytest.raises(Exception) as stale:
        await mine.update("k", b"3", last=revision)
    assert type(stale.value).__name__ == "KeyWrongLastSequenceError"
    assert (await mine.get("k")).value == b"2"


async def test_stream_limits_are_applied_to_an_existing_store_and_a_service_that_does_not_align_keeps_them(
        nats_server):
    from opsched.services.runtime.settings import Settings

    old = await nats_server.connect(name="before-limits", identity=HARNESS)
    await old.ensure_streams()  # a store made before streams had limits
    await old.ensure_cache_bucket(subjects.OPS_BUCKET)  # ... and buckets
    await old.publish_raw(subjects.command("stop", old.user), b"kept", msg("s1"))
    limits = Settings(cmd_max_age_s=3600, dlq_max_age_s=7200, dlq_max_bytes=1 << 20, cmd_max_bytes=1 << 21,
                      cmd_backlog_per_subject=7, ops_max_bytes=1 << 22, cluster_max_bytes=1 << 23,
                      config_max_bytes=1 << 24).stream_limits()
    service = await nats_server.connect(name="opsched-admission")
    service.bucket_bytes = Settings(summaries_max_bytes=1 << 25).bucket_bytes()
    await service.ensure_streams(limits)  # admission aligns the streams (and the buckets' sizes)
    cost = await nats_server.connect(name="opsched-cost")
    await cost.ensure_streams(align=False)  # the others create what is missing, and leave the rest alone
    await cost.close()
    cmd = (await service.js.stream_info(subjects.CMD_STREAM)).config
    dlq = (await service.js.stream_info(subjects.DLQ_STREAM)).config
    ops = (await service.js.stream_info(subjects.OPS_STREAM)).config
    cluster = (await service.js.stream_info(subjects.CLUSTER_STREAM)).config
    config = (await service.js.stream_info(subjects.CONFIG_STREAM)).config
    assert (cmd.max_age, dlq.max_age, dlq.max_bytes) == (3600, 7200, 1 << 20)
    # bounded by identity: a user's verb refuses past 7 queued, the stream past its bytes; queued ones never dropped
    assert (cmd.max_bytes, cmd.max_msgs_per_subject, cmd.discard, cmd.discard_new_per_subject) == (
        1 << 21, 7, api.DiscardPolicy.NEW, True)
    assert not ops.max_age  # replay depends on it: admission purges it; at its byte limit it refuses new events
    assert (ops.max_bytes, ops.discard) == (1 << 22, api.DiscardPolicy.NEW)
    assert dlq.discard == api.DiscardPolicy.OLD  # dead letters: the oldest go first
    assert (cluster.max_bytes, cluster.max_msgs_per_subject, cluster.discard) == (1 << 23, 1, api.DiscardPolicy.NEW)
    assert (config.max_bytes, config.discard) == (1 << 24, api.DiscardPolicy.NEW)
    summaries = (await service.js.stream_info(subjects.kv_stream(subjects.OPS_BUCKET))).config
    assert (summaries.max_bytes, summaries.discard) == (1 << 25, api.DiscardPolicy.NEW)  # a new key refused
    assert await service.read_all(subjects.CMD_STREAM, subjects.CMD_ALL) == [b"kept"]
    await old.close()
    await service.close()


async def test_a_bucket_at_its_byte_limit_refuses_a_new_key_keeps_the_old_and_still_replaces_one(nats_server):
    from opsched.bus.bus import StreamFull

    bus = await nats_server.connect(name="test", identity=HARNESS)
    bus.bucket_bytes = {subjects.CACHE_BUCKET: 8 * 1024}
    kv = await bus.ensure_cache_bucket(subjects.CACHE_BUCKET)
    with pytest.raises(StreamFull) as full:  # at once: not waited out as a leaderless bucket
        for i in range(20):
            await kv.put(f"k{i}", b"v" * 1024)
    assert full.value.stream == subjects.kv_stream(subjects.CACHE_BUCKET)
    assert "maximum bytes exceeded" in full.value.description
    assert (await kv.get("k0")).value == b"v" * 1024  # nothing old dropped
    await kv.put("k0", b"w" * 1024)  # one revision per key: a known key is still replaced
    assert (await kv.get("k0")).value == b"w" * 1024
    await bus.close()


async def test_a_stream_request_that_times_out_at_start_is_asked_again(nats_server, monkeypatch):
    """A loaded server may let a JetStream API request time out while a service starts: its streams are checked
    again (as a publish waits out a leaderless stream), not its start failed."""
    bus = await nats_server.connect(name="test", identity=HARNESS)
    info, timed_out = bus.js.stream_info, []

    async def first_one_times_out(name, *args, **kwargs):
        if name not in timed_out:
            timed_out.append(name)
            raise NatsTimeout
        return await info(name, *args, **kwargs)
    monkeypatch.setattr(bus.js, "stream_info", first_one_times_out)
    await bus.ensure_streams()
    assert set(timed_out) == set(subjects.STREAMS)
    assert (await info(subjects.OPS_STREAM)).config.name == subjects.OPS_STREAM
    await bus.close()
