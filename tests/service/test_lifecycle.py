"""An operation's life on the bus: approval, conditions, retries, batches, stop."""
from __future__ import annotations

from datetime import datetime, timezone

import msgspec

from opsched.proto.events import (
    ErrorRaised,
    OperationAdmitted,
    OperationApproved,
    OperationFailed,
    OperationOnHold,
    OperationRejected,
    OperationSkipped,
    OperationStopped,
    OperationSucceeded,
    RetryScheduled,
)
from tests.builders import op
from tests.service.test_bad_input import dead_letters

BUSES = ["memory"]  # service logic, not about the bus: on the in-memory bus alone (tests/service/conftest.py)

QUEUES = """
defaultQueue: default
retryBackoff: {baseSeconds: 0, factor: 2, maxSeconds: 0}
queues:
  - name: default
  - name: big
    approval: {gpusAbove: 4}
  - name: small
"""


def spec(name: str, **fields):
    return msgspec.structs.replace(op(name).build(), **fields)


async def start(stack_factory, tmp_path, client):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(queues_file=path, dispatcher_mode="null")
    return client


def fail(op_id: str, attempt: int, reason: str = "Error") -> OperationFailed:
    return OperationFailed(op_id=op_id, at=datetime.now(timezone.utc), attempt=attempt, pod_name=f"op-{op_id}-{attempt}",
                           reason=reason, message="boom", exit_code=1)


async def test_an_op_that_is_not_approved_waits_on_hold_until_approved(stack_factory, tmp_path, client, client_as,
                                                                       events):
    client = await start(stack_factory, tmp_path, client)
    op_id = await client.submit(spec("held", is_approved=False))
    hold = await events.expect(OperationOnHold, op_id)
    assert hold.reason == "is_approved_false" and f"opsched approve {op_id}" in hold.message
    assert (await client.why(op_id)).reasons[0].code == "on_hold"
    approver = await client_as("alice")  # an approver: its approval is in its name, whatever the payload says
    await approver.approve(op_id, requested_by="someone-else")
    assert (await events.expect(OperationApproved, op_id)).approved_by == "alice"
    await events.expect(OperationAdmitted, op_id)


async def test_a_rejected_op_ends_rejected_and_never_runs(stack_factory, tmp_path, client, events):
    client = await start(stack_factory, tmp_path, client)
    op_id = await client.submit(spec("nope", is_approved=False))
    await events.expect(OperationOnHold, op_id)
    await client.reject(op_id, comment="too big")
    rejected = await events.expect(OperationRejected, op_id)
    assert rejected.reason == "approval_rejected" and "too big" in rejected.message
    assert not events.of(op_id, OperationAdmitted)


async def test_a_queue_holds_ops_above_its_gpu_threshold_for_approval(stack_factory, tmp_path, client, events):
    client = await start(stack_factory, tmp_path, client)
    large = await client.submit(op("large").queue("big").gpus(8).build())
    small = await client.submit(op("small").queue("big").gpus(2).build())
    assert (await events.expect(OperationOnHold, large)).reason == "gpus_above_threshold"
    await events.expect(OperationAdmitted, small)


async def test_a_false_condition_skips_the_op_and_a_bad_one_is_refused(stack_factory, tmp_path, client, events):
    client = await start(stack_factory, tmp_path, client)
    skipped = await client.submit(spec("cond", params={"lr": 0.001}, conditions="{{ lr > 0.01 }}"))
    runs = await client.submit(spec("cond2", params={"lr": 0.1}, conditions="{{ lr > 0.01 }}"))
    bad = await client.submit(spec("cond3", conditions="{{ __import__('os').system('x') }}"))
    assert "lr > 0.01" in (await events.expect(OperationSkipped, skipped)).message
    await events.expect(OperationAdmitted, runs)
    rejected = await events.expect(OperationRejected, bad)
    assert rejected.reason == "invalid_condition" and "not allowed" in rejected.message
    assert not events.of(skipped, OperationAdmitted)


async def test_a_condition_bomb_is_rejected_and_dead_lettered_and_the_next_op_is_admitted(
        stack_factory, tmp_path, bus, client, events):
    client = await start(stack_factory, tmp_path, client)
    power = await client.submit(spec("power", conditions="{{ (((10**64)**64)**64)**64 }}"))  # was 13 s of CPU
    deep = await client.submit(spec("deep", conditions="{{ " + "-" * 1500 + "1 }}"))  # was a RecursionError, retried
    after = await client.submit(spec("after", params={"lr": 0.1}, conditions="{{ lr > 0.01 }}"))
    await events.expect(OperationAdmitted, after)
    for op_id, message in ((power, "value too large: <an integer of 213 bits> ** 64 would have 13569 bits"),
                           (deep, "expression nested deeper than 32 levels")):
        rejected = await events.expect(OperationRejected, op_id)
        assert rejected.reason == "invalid_condition" and message in rejected.message
        error = await events.expect(ErrorRaised, op_id)
        assert error.service == "admission" and error.reason == "invalid_condition"
    assert len(await dead_letters(bus, "admission")) == 2


async def test_a_templated_queue_is_chosen_from_params(stack_factory, tmp_path, client, events):
    client = await start(stack_factory, tmp_path, client)
    template = "{{ 'big' if gpus > 2 else 'small' }}"
    op_id = await client.submit(spec("routed", params={"gpus": 1}, queue=template))
    assert (await events.expect(OperationAdmitted, op_id)).queue == "small"


async def test_an_op_is_retried_up_to_max_retries_and_infrastructure_failures_are_free(
        stack_factory, tmp_path, bus, client, events):
    client = await start(stack_factory, tmp_path, client)
    base = op("flaky").build()
    op_id = await client.submit(msgspec.structs.replace(
        base, termination=msgspec.structs.replace(base.termination, max_retries=2)))
    await events.expect(OperationAdmitted, op_id)
    await bus.publish(fail(op_id, 0))
    assert (await events.expect(RetryScheduled, op_id)).retries_used == 1
    await events.expect(OperationAdmitted, op_id, where=lambda e: e.attempt == 1)
    await bus.publish(fail(op_id, 1, reason="PodDeleted"))  # the node went away: not the op's fault
    assert (await events.expect(RetryScheduled, op_id, where=lambda e: e.attempt == 1)).retries_used == 1
    await events.expect(OperationAdmitted, op_id, where=lambda e: e.attempt == 2)
    await bus.publish(fail(op_id, 2))
    await events.expect(OperationAdmitted, op_id, where=lambda e: e.attempt == 3)
    await bus.publish(fail(op_id, 3))
    final = await events.expect(OperationFailed, op_id, where=lambda e: e.attempt == 3)
    assert final.reason == "Error"
    probe = await client.submit(op("probe").build())  # a cycle after the last failure was folded
    await events.expect(OperationAdmitted, probe)
    assert not events.of(op_id, RetryScheduled)[3:] and len(events.of(op_id, RetryScheduled)) == 3
    assert (await client.why(op_id)).status == "failed"


async def test_a_batch_never_runs_more_than_its_concurrency(stack_factory, tmp_path, bus, client, events):
    client = await start(stack_factory, tmp_path, client)
    # distinct params, as a sweep has: identical ops of a batch would be answered from the cache
    ids = [await client.submit(spec(f"trial-{i}", batch="sweep-1", batch_concurrency=2, params={"trial": i}))
           for i in range(4)]
    await events.expect(OperationAdmitted, ids[0])
    await events.expect(OperationAdmitted, ids[1])
    probe = await client.submit(op("probe").build())
    await events.expect(OperationAdmitted, probe)
    assert not events.of(ids[2], OperationAdmitted) and not events.of(ids[3], OperationAdmitted)
    assert (await client.why(ids[2])).reasons[0].code == "batch_concurrency"
    await bus.publish(OperationSucceeded(op_id=ids[0], at=datetime.now(timezone.utc), pod_name="x"))
    await events.expect(OperationAdmitted, ids[2])
    assert not events.of(ids[3], OperationAdmitted)


async def test_stopping_a_held_op_ends_it_stopped(stack_factory, tmp_path, client, events):
    client = await start(stack_factory, tmp_path, client)
    op_id = await client.submit(spec("held", is_approved=False))
    await events.expect(OperationOnHold, op_id)
    await client.stop(op_id)
    assert (await events.expect(OperationStopped, op_id)).reason == "stopped"


async def test_a_stop_sent_right_after_its_submit_stops_the_op_and_is_never_dropped(stack_factory, tmp_path, client,
                                                                                    events):
    client = await start(stack_factory, tmp_path, client)
    op_ids = []
    for i in range(20):  # back to back: admission may not have folded the op when the stop arrives
        op_ids.append(await client.submit(spec(f"quick-{i}", is_approved=False)))
        await client.stop(op_ids[-1])
    for op_id in op_ids:
        assert (await events.expect(OperationStopped, op_id)).reason == "stopped"
    assert not [e for _, e in events.events if getattr(e, "reason", "") == "unknown_op"]
