"""Restart, copy and resume an operation on the bus."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from opsched.proto.events import (
    ErrorRaised,
    OperationAdmitted,
    OperationFailed,
    OperationResumed,
    OperationStopped,
    OperationSubmitted,
)
from opsched.verdicts import CommandRefused
from tests.builders import op


async def test_restart_and_copy_make_new_ops_linked_to_the_original(stack_factory, client, events, nats_server):
    await stack_factory(dispatcher_mode="null")
    original = await client.submit(op("train").params(lr=0.1).build())
    await events.expect(OperationAdmitted, original)
    restarted = await client.restart(original, {"lr": 0.01})
    copied = await client.restart(original, copy=True)
    again = await events.expect(OperationSubmitted, restarted)
    assert (again.original_op_id, again.relation) == (original, "restart") and again.spec.params["lr"] == 0.01
    copy = await events.expect(OperationSubmitted, copied)
    assert copy.relation == "copy" and copy.spec.inputs["copy_from"] == original
    assert {"name": "OPSCHED_COPY_FROM", "value": original} in [
        {"name": e.name, "value": e.value} for e in nats_server.opened(copy.spec).container.env]
    await events.expect(OperationAdmitted, restarted)
    await events.expect(OperationAdmitted, copied)


async def test_resume_continues_a_failed_op_in_place_as_a_new_attempt(stack_factory, bus, client, events):
    await stack_factory(dispatcher_mode="null")
    op_id = await client.submit(op("train").build())
    await events.expect(OperationAdmitted, op_id)
    await bus.publish(OperationFailed(op_id=op_id, at=datetime.now(timezone.utc), pod_name=f"op-{op_id}-0",
                                      reason="Error", exit_code=1))
    await events.expect(OperationFailed, op_id)
    await client.resume(op_id, {"epochs": 5})
    resumed = await events.expect(OperationResumed, op_id)
    assert resumed.attempt == 1
    admitted = await events.expect(OperationAdmitted, op_id, where=lambda e: e.attempt == 1)
    assert admitted.pod_name == f"op-{op_id}-1" and admitted.spec.params["epochs"] == 5


async def test_a_running_op_cannot_be_resumed_and_a_stopped_one_can(stack_factory, client, events):
    await stack_factory(dispatcher_mode="null")
    op_id = await client.submit(op("busy").build())
    await events.expect(OperationAdmitted, op_id)
    with pytest.raises(CommandRefused) as refused:  # the SDK waits for admission's verdict
        await client.resume(op_id)
    assert refused.value.verdict.outcome == "not_resumable"
    error = await events.expect(ErrorRaised, op_id)
    assert error.reason == "not_resumable" and "only stopped, failed or timed-out" in error.message
    await client.stop(op_id)
    await events.expect(OperationStopped, op_id)
    await client.resume(op_id)
    await events.expect(OperationAdmitted, op_id, where=lambda e: e.attempt == 1)
