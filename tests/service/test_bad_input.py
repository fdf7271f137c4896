"""Bad input gets a clear error event and a dead-letter copy; the services keep serving."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import msgspec

from opsched.proto import subjects
from opsched.proto.events import (
    ErrorRaised,
    OperationAdmitted,
    OperationRejected,
    OperationSubmitted,
)
from tests.builders import op
from tests.builders.identities import ADMIN, HARNESS
from tests.waiting import eventually

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def stored(bus, stream: str, subject: str) -> list:
    """The messages of ``subject`` in ``stream``, with their headers (read by a new durable consumer)."""
    sub = await bus.durable(f"test-{uuid.uuid4().hex[:12]}", stream, [subject], max_deliver=1)
    try:
        return await sub.fetch(10, timeout=2)
    finally:
        await sub.unsubscribe()


async def dead_letters(bus, service: str) -> list:
    return await stored(bus, subjects.DLQ_STREAM, subjects.dead_letter(service))


async def test_a_malformed_command_is_dead_lettered_and_the_next_op_is_still_admitted(
        stack_factory, bus, client, events):
    await stack_factory(dispatcher_mode="null")
    await bus.publish_raw(subjects.submit(None), b"{this is not json", {"Nats-Msg-Id": "garbage-1"})
    op_id = await client.submit(op("after-garbage").build())
    await events.expect(OperationAdmitted, op_id)
    error = await events.expect(ErrorRaised, "-")
    assert error.service == "admission" and error.reason == "malformed_message"
    assert "JSON is malformed" in error.message
    letters = await dead_letters(bus, "admission")
    assert [m.data for m in letters] == [b"{this is not json"]
    assert letters[0].headers["Opsched-Original-Subject"] == subjects.submit(None)
    assert letters[0].headers["Opsched-Error-Reason"] == "malformed_message"


async def test_a_submit_missing_its_spec_names_the_op_and_the_missing_field(stack_factory, bus, events):
    await stack_factory(dispatcher_mode="null")
    payload = msgspec.json.encode({"type": "submit", "opId": "no-spec-here"})
    await bus.publish_raw(subjects.submit(None), payload, {"Nats-Msg-Id": "garbage-2"})
    error = await events.expect(ErrorRaised, "no-spec-here")
    assert "spec" in error.message
    assert not events.of("no-spec-here", OperationSubmitted)


async def test_a_malformed_event_is_dead_lettered_by_the_service_that_consumes_it(stack_factory, bus, client, events):
    await stack_factory(dispatcher_mode="null")
    await bus.publish_raw(subjects.event("submitted", "broken"), b'{"type":"submitted","opId":"broken"}',
                          {"Nats-Msg-Id": "garbage-3"})
    copies = {"cost": 1, "cache": 1}  # one per consumer of the subject: cost's estimator, the cache's lookup
    for service, n in copies.items():
        async def answered(s: str = service) -> int:
            return len([e for e in events.of("broken", ErrorRaised) if e.service == s])
        assert await eventually(answered, f"{service}'s error events") == n
        assert len(await dead_letters(bus, service)) == n
    op_id = await client.submit(op("still-served").build())
    await events.expect(OperationAdmitted, op_id)


async def test_an_unknown_queue_is_rejected_with_the_list_of_known_queues(stack_factory, client, events):
    await stack_factory(dispatcher_mode="null")
    op_id = await client.submit(op("lost").queue("nowhere").build())
    rejected = await events.expect(OperationRejected, op_id)
    assert rejected.reason == "unknown_queue"
    assert "'nowhere'" in rejected.message and "default" in rejected.message


async def test_submitting_the_same_op_id_twice_makes_one_operation(stack_factory, client, events):
    await stack_factory(dispatcher_mode="null")
    spec = op("once").build()
    await client.submit(spec, op_id="same-id")
    await client.submit(spec, op_id="same-id")
    await events.expect(OperationAdmitted, "same-id")
    assert len(events.of("same-id", OperationSubmitted)) == 1


async def test_a_forbidden_pod_spec_is_rejected_by_the_dispatcher_with_the_reason(stack_factory, client, events):
    await stack_factory(dispatcher_mode="null")
    spec = op("sneaky").env("NVIDIA_VISIBLE_DEVICES", "all").build()
    op_id = await client.submit(spec)
    rejected = await events.expect(OperationRejected, op_id)
    assert rejected.reason == "forbidden_pod_spec" and "NVIDIA_VISIBLE_DEVICES" in rejected.message


def test_an_invalid_spec_is_refused_by_the_cli_with_field_errors_and_nothing_is_published(nats_server):
    # nats only: the CLI runs in its own process
    cli = [sys.executable, "-m", "opsched.cli", "--nats", nats_server.url, "submit"]
    env = {**os.environ, **nats_server.env(ADMIN)}  # the CLI as admin, over TLS
    result = subprocess.run([*cli, str(EXAMPLES / "invalid.yaml")], capture_output=True, text=True, timeout=60,
                            env=env)
    assert result.returncode == 2
    assert "termination.maxRetries" in result.stderr and "not a Kubernetes quantity" in result.stderr
    forbidden = EXAMPLES.parent / "tests" / "service" / "forbidden.yaml"
    result = subprocess.run([*cli, str(forbidden)], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2 and "privileged" in result.stderr
    assert _stream_messages(nats_server) == 0


def _stream_messages(nats_server) -> int:
    import asyncio

    async def count() -> int:
        bus = await nats_server.connect(name="count", identity=HARNESS)
        try:
            await bus.ensure_streams()
            return sum([await bus.last_seq(s) for s in subjects.STREAMS])
        finally:
            await bus.close()
    return asyncio.run(count())


async def test_events_carry_cloudevents_binary_mode_headers(stack_factory, bus, client, events):
    await stack_factory(dispatcher_mode="null")
    op_id = await client.submit(op("ce").build())
    await events.expect(OperationAdmitted, op_id)
    [msg] = await stored(bus, subjects.OPS_STREAM, subjects.event("admitted", op_id))
    assert msg.headers["ce-specversion"] == "1.0"
    assert msg.headers["ce-type"] == "io.opsched.admitted"
    assert msg.headers["ce-id"] == msg.headers["Nats-Msg-Id"] == f"{op_id}.admitted.0"
    assert msg.headers["ce-source"] == "opsched/opsched-admission"
    assert msg.headers["ce-subject"] == op_id and msg.headers["ce-time"].endswith("Z")
