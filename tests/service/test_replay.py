"""State is rebuilt from the stream: a restarted admission service still honours what happened before."""
from __future__ import annotations

from datetime import datetime, timezone

from opsched.proto.events import OperationAdmitted, OperationSucceeded
from tests.builders import op

QUEUES = """
defaultQueue: solo
queues:
  - {name: solo, concurrency: 1}
  - {name: other, concurrency: 5}
"""


async def test_a_restarted_admission_keeps_the_concurrency_slot_of_an_op_admitted_before(
        stack_factory, bus, client, events, tmp_path):
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    first = await stack_factory(queues_file=queues, dispatcher_mode="null")
    running = await client.submit(op("first").build())
    await events.expect(OperationAdmitted, running)
    await first.close()

    await stack_factory(queues_file=queues, dispatcher_mode="null")
    waiting = await client.submit(op("second").build())
    probe = await client.submit(op("probe").queue("other").build())
    await events.expect(OperationAdmitted, probe)  # a cycle ran after `waiting` passed its gates
    assert not events.of(waiting, OperationAdmitted)

    await bus.publish(OperationSucceeded(op_id=running, at=datetime.now(timezone.utc), pod_name="x"))
    admitted = await events.expect(OperationAdmitted, waiting)
    assert admitted.queue == "solo"


async def test_a_submit_sent_while_admission_is_down_is_admitted_when_it_comes_back(
        stack_factory, client, events):
    await stack_factory(names=("cost", "cache", "dispatcher"), dispatcher_mode="null")
    op_id = await client.submit(op("patient").build())
    await stack_factory(names=("admission",), dispatcher_mode="null")
    await events.expect(OperationAdmitted, op_id)
