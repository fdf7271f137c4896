"""Near-limit messages and folds that fail, on a real nats-server whose max payload is small (64 KiB, so the
messages stay small): refused or ended with the reason, never a dropped connection, a retry loop or a
service that does not become ready."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from opsched.bus.addressing import cloudevent_headers, default_msg_id
from opsched.bus.sizes import wire_size
from opsched.embedded import ServicesInProcess
from opsched.proto import codec, subjects
from opsched.proto.events import OperationAdmitted, OperationRejected, OperationSubmitted
from opsched.proto.queues import Queue, QueuesConfig
from opsched.rules.spec_size import spec_bytes
from tests.builders import op
from tests.builders.commands import submit
from tests.builders.identities import HARNESS
from tests.securebus import SecureNats
from tests.waiting import eventually

MAX_PAYLOAD = 64 * 1024


@pytest.fixture
def small_server(tmp_path: Path):
    """Secured as every test nats-server is (``tests.securebus``)."""
    server = SecureNats(tmp_path, config=f"max_payload: {MAX_PAYLOAD}\n").start()
    yield server
    server.stop()


@pytest.fixture
async def bus(small_server):
    b = await small_server.connect(name="test", identity=HARNESS)
    await b.ensure_streams()
    assert b.nc.max_payload == MAX_PAYLOAD
    yield b
    await b.close()


@pytest.fixture
async def client(small_server, bus):
    c = await small_server.client()
    yield c
    await c.close()


@pytest.fixture
async def stack(small_server):
    stacks: list[ServicesInProcess] = []

    async def start() -> ServicesInProcess:
        settings = small_server.settings(dispatcher_mode="null")
        stacks.append(await ServicesInProcess(settings, connect=small_server.connect).start())
        return stacks[-1]
    yield start
    for s in stacks:
        await s.close()


def spec_of_wire(total: int, name: str):
    """A spec whose submit command, as the test bus publishes it, is ``total`` bytes with its headers."""
    def wire(padding: int) -> int:
        cmd = submit(op(name).params(blob="x" * padding).build(), op_id=name, at=datetime.now(timezone.utc))
        mid = default_msg_id(cmd)
        return wire_size(codec.encode(cmd), {"Nats-Msg-Id": mid, **cloudevent_headers(cmd, mid, "test")})
    return op(name).params(blob="x" * (total - wire(0))).build()


def still_connected(admission) -> None:
    assert admission.bus.connected and admission.bus.nc.stats["reconnects"] == 0
    assert admission.ready.is_set()


async def test_a_submit_within_130_bytes_of_the_max_payload_is_refused_and_admission_stays_connected(
        stack, client, events):
    services = await stack()
    admission = services.service("admission")
    op_id = await client.submit(spec_of_wire(MAX_PAYLOAD - 100, "near-limit"), op_id="near-limit")
    rejected = await events.expect(OperationRejected, op_id)
    assert rejected.reason == "message_too_large"
    assert f"max payload of {MAX_PAYLOAD} bytes" in rejected.message and "ops.submitted" in rejected.message
    assert not events.of(op_id, OperationSubmitted)
    still_connected(admission)
    after = await client.submit(op("after").build())
    await events.expect(OperationAdmitted, after)
    still_connected(admission)


async def test_an_op_whose_admitted_alone_overflows_is_rejected_once_not_retried(stack, client, events):
    services = await stack()
    admission = services.service("admission")
    wide = {f"example.com/label-{i:03d}": "v" * 60 for i in range(100)}  # ~9 KB added to its admitted
    config = QueuesConfig(queues=[Queue(name="default", concurrency=5),
                                  Queue(name="wide", concurrency=5, node_selector=wide)], default_queue="default")
    await client.set_queues(config)
    await eventually(lambda: _has_queue(admission, "wide"), "admission to apply the queue configuration")
    spec = op("wide-op").queue("wide").params(blob="x" * (MAX_PAYLOAD - 3000)).build()
    assert spec_bytes(spec) < MAX_PAYLOAD - 2000
    op_id = await client.submit(spec, op_id="wide-op")
    rejected = await events.expect(OperationRejected, op_id)
    assert rejected.reason == "message_too_large" and "admitted" in rejected.message
    assert events.of(op_id, OperationSubmitted)
    after = await client.submit(op("after-wide").queue("wide").build())
    await events.expect(OperationAdmitted, after)  # a later cycle ran: the too-large one was not retried
    assert len(events.of(op_id, OperationRejected)) == 1 and not events.of(op_id, OperationAdmitted)
    still_connected(admission)


async def _has_queue(admission, name: str) -> bool:
    return name in admission.book.names


async def test_a_poisoned_op_stream_still_lets_admission_become_ready_and_the_op_ends_with_the_reason(
        stack, bus, client, events, monkeypatch):
    from opsched.services.admission.state.fold import OpFold

    original = OpFold._submitted

    def poisoned(self, e):
        if e.op_id == "poison":
            raise OverflowError("cannot convert float infinity to integer")
        return original(self, e)
    monkeypatch.setattr(OpFold, "_submitted", poisoned)
    now = datetime.now(timezone.utc)
    await bus.publish(OperationSubmitted(op_id="poison", at=now, spec=op("poison").build(), queue="default",
                                         submitted_at=now))
    # the stream's last message does not decode at all
    await bus.publish_raw(subjects.event("submitted", "garbage"), b'{"type":"submitted","opId":"garbage"}',
                          {"Nats-Msg-Id": "garbage-last"})
    services = await stack()  # ready: the replay finished
    admission = services.service("admission")
    rejected = await events.expect(OperationRejected, "poison")
    assert rejected.reason == "fold_failed" and "OverflowError" in rejected.message
    assert admission.state.fold.failures.count >= 1 and admission.undecodable >= 1
    after = await client.submit(op("after-poison").build())
    await events.expect(OperationAdmitted, after)
    assert len(events.of("poison", OperationRejected)) == 1
