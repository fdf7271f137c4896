"""Red team (issue 28, part 3: bounded by identity), on the secured nats-server: a submitter floods its own command
subject (an earlier run added 90 MB in 1.3 s); the server refuses it past the backlog cap of that user's verb, while
another user's submit still goes in and is admitted, and once admission consumed the flood the submitter gets in
again. The op stream at its byte limit refuses new events and loses none of the old: the service keeps the message
and says so (readiness' ``not_progressing``), and goes on once space is freed."""
from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import nats.js.errors
import pytest

from opsched.bus.bus import StreamFull
from opsched.proto import subjects
from opsched.proto.events import OperationAdmitted, OperationSubmitted
from opsched.services.runtime.runner import report
from opsched.services.runtime.settings import Settings
from tests.builders import identities, op
from tests.security.test_side_doors import SUBMITTER, Attacker
from tests.waiting import eventually

CAP = 5  # unconsumed commands of one verb (one submit route) a user may have queued
OPS_BYTES = 64 * 1024
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train-1gpu.yaml"  # no queue: the default route


async def test_a_submitter_flooding_its_own_subject_is_refused_past_the_cap_while_another_user_gets_in(
        nats_server, bus, stack_factory, client_as, events):
    await bus.ensure_streams(Settings(cmd_backlog_per_subject=CAP).stream_limits())  # as admission aligns them
    flooded = subjects.submit(None, SUBMITTER.user)
    stored = 0
    async with Attacker(nats_server, SUBMITTER) as mallory:  # past the SDK: JetStream publishes of its own
        js = mallory.nc.jetstream()
        with pytest.raises(nats.js.errors.APIError) as refused:
            for i in range(CAP + 100):
                await js.publish(flooded, b"x" * 4096, headers={"Nats-Msg-Id": f"flood-{i}"})
                stored += 1
    assert stored == CAP
    assert "maximum messages per subject exceeded" in (refused.value.description or "")
    ann, bob = await client_as("ann"), await client_as("bob")
    with pytest.raises(StreamFull) as told:  # the SDK says what it hit, naming the cap
        await ann.submit(op("ann-1").build())
    assert told.value.per_subject and "OPSCHED_CMD_BACKLOG_PER_SUBJECT" in str(told.value)
    cli = await asyncio.create_subprocess_exec(  # ... and so does the CLI, exiting non-zero
        sys.executable, "-m", "opsched.cli", "submit", str(EXAMPLE), "--id", "ann-cli",
        env={**os.environ, **nats_server.env(identities.user("ann"))},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(cli.communicate(), timeout=60)
    assert cli.returncode == 1, err
    assert "maximum messages per subject exceeded" in err.decode() and "OPSCHED_CMD_BACKLOG_PER_SUBJECT" in err.decode()
    assert b"ann-cli" not in out  # no id printed for what was not stored
    bobs = await bob.submit(op("bob-1").build())  # another user's subject: not capped by ann's flood
    await stack_factory(("admission", "cost", "cache"), cmd_backlog_per_subject=CAP, cmd_purge_interval_s=0.1)
    await events.expect(OperationAdmitted, bobs, timeout=15)

    async def ann_gets_in() -> str | None:  # the flood consumed (dead-lettered) and purged: the cap counts the rest
        try:
            return await ann.submit(op("ann-2").build())
        except StreamFull:
            return None
    anns = await eventually(ann_gets_in, "ann's submit to be taken again", timeout=15)
    await events.expect(OperationAdmitted, anns, timeout=15)


async def test_the_op_stream_at_its_byte_limit_refuses_new_events_keeps_the_old_and_the_service_says_so(
        nats_server, bus, stack_factory, client, events):
    stack = await stack_factory(("admission", "cost", "cache"), ops_max_bytes=OPS_BYTES)
    # it leads first: its claim is an event on the op stream too (a full one refuses it: docs/retention.md)
    await asyncio.wait_for(stack.service("admission").leadership.leading.wait(), timeout=15)
    in_hand = (await bus.js.stream_info(subjects.kv_stream(subjects.IN_HAND_BUCKET))).config
    assert in_hand.max_bytes == Settings().in_hand_max_bytes  # every bucket is created bounded too
    filler = subjects.event("filler", "x")  # no service consumes it (admission's fold skips it): no error events
    for size in (1024, 128, 16):  # the harness fills it, to the last bytes: refused, never taken for an outage
        with pytest.raises(StreamFull) as full:
            for i in range(OPS_BYTES // size + 10):
                await bus.publish_raw(filler, b"f" * size, {"Nats-Msg-Id": f"fill-{size}-{i}"})
        assert full.value.stream == subjects.OPS_STREAM and "maximum bytes exceeded" in full.value.description
    before = (await bus.js.stream_info(subjects.OPS_STREAM)).state
    op_id = await client.submit(op("while-full").build())  # the command stream still takes it

    def stalled() -> bool:
        return f"stream {subjects.OPS_STREAM} full" in report(stack.services, [True])["not_progressing"].get(
            "admission", {})
    await eventually(_async(stalled), "admission to report the full op stream", timeout=15)
    after = (await bus.js.stream_info(subjects.OPS_STREAM)).state
    assert (after.first_seq, after.messages) == (before.first_seq, before.messages)  # nothing old dropped
    assert (await bus.stored(subjects.OPS_STREAM, before.first_seq)) is not None
    await bus.purge(subjects.OPS_STREAM, filler)  # space again (as retention frees it)
    await events.expect(OperationSubmitted, op_id, timeout=15)  # the command was kept, its events follow
    await eventually(_async(lambda: not stalled()), "the report to clear", timeout=15)


def _async(check):
    async def run():
        return check()
    return run
