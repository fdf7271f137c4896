"""Bounded by identity (issue 28), through the real services: another user's op goes right after the first op
of one user's burst (``why`` says position 2, and it is admitted second), the user's (cap+1)th pending op is
rejected ``user_pending_cap`` until one of theirs leaves pending, and a restarted admission, which folds the
stream again, keeps the same order and the same count."""
from __future__ import annotations

from datetime import datetime, timezone

from opsched.proto.events import (
    CostEstimated,
    OperationAdmitted,
    OperationRejected,
    OperationSubmitted,
    OperationSucceeded,
)
from opsched.proto.reasons import Reason
from tests.builders import op

BUSES = ["memory"]  # service logic, not about the bus: on the in-memory bus alone (tests/service/conftest.py)

CAP = 4
QUEUES = f"""
defaultQueue: solo
queues:
  - {{name: solo, concurrency: 1, maxPendingPerUser: {CAP}}}
  - {{name: other, concurrency: 50}}
"""


async def gates_cleared_and_a_cycle_ran(client, events, op_ids: list[str], probe: str) -> None:
    """Every op of ``op_ids`` has its estimate (caching is off: no cache answer), and a cycle ran after (it admits
    ``probe``)."""
    for op_id in op_ids:
        await events.expect(CostEstimated, op_id)
    await events.expect(OperationAdmitted, await client.submit(op(probe).queue("other").build()))


async def test_a_burst_of_one_user_does_not_hold_back_another_and_is_capped_across_a_restart(
        stack_factory, tmp_path, bus, client, client_as, events):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    admission = await stack_factory(("admission",), queues_file=path, dispatcher_mode="null")
    await stack_factory(("cost", "cache", "dispatcher"), queues_file=path, dispatcher_mode="null")
    ann, bob = await client_as("ann"), await client_as("bob")

    blocker = await ann.submit(op("blocker").build())  # takes the queue's one slot
    await events.expect(OperationAdmitted, blocker)
    burst = [await ann.submit(op(f"a-{i}").build()) for i in range(CAP)]
    over = await ann.submit(op("a-over").build())
    theirs = await bob.submit(op("b-0").build())
    for op_id in [*burst, theirs]:
        await events.expect(OperationSubmitted, op_id)
    rejected = await events.expect(OperationRejected, over)
    assert rejected.reason == Reason.USER_PENDING_CAP and rejected.queue == "solo"
    assert rejected.message.startswith(f"user ann already has {CAP} ops pending in queue solo (maxPendingPerUser {CAP})")
    await gates_cleared_and_a_cycle_ran(client, events, [*burst, theirs], "probe-1")

    why = await client.why(theirs)
    assert (why.status, why.position, why.queued_total) == ("queued", 2, CAP + 1)

    await admission.close()  # a restarted admission folds the stream again
    await stack_factory(("admission",), queues_file=path, dispatcher_mode="null")
    await events.expect(OperationAdmitted, await client.submit(op("probe-2").queue("other").build()))
    assert (await client.why(theirs)).position == 2
    assert [(await client.why(i)).position for i in burst] == [1, 3, 4, 5]
    again = await ann.submit(op("a-over-2").build())
    refused = await events.expect(OperationRejected, again)
    assert refused.reason == Reason.USER_PENDING_CAP and f"already has {CAP} ops pending" in refused.message

    now = datetime.now(timezone.utc)
    await bus.publish(OperationSucceeded(op_id=blocker, at=now, pod_name="x"))
    await events.expect(OperationAdmitted, burst[0])  # ann's first ...
    accepted = await ann.submit(op("a-next").build())  # ... has left pending: ann is under the cap again
    await events.expect(OperationSubmitted, accepted)
    await bus.publish(OperationSucceeded(op_id=burst[0], at=now, pod_name="x"))
    await events.expect(OperationAdmitted, theirs)  # bob's op is admitted second
    assert not events.of(burst[1], OperationAdmitted)
