"""Defaults that protect users (issue 28), on the bus as each user: with no ``access.projects`` a submitter stops,
restarts, copies and resumes its own ops only, admins all; an approver rejects only ops held for approval; a GPU op
in a queue that sets quotas but none for GPUs is rejected at submit, and ``why`` says so."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto.events import (
    ErrorRaised,
    OperationAdmitted,
    OperationOnHold,
    OperationRejected,
    OperationResumed,
    OperationStopped,
    OperationSubmitted,
)
from opsched.verdicts import CommandRefused
from tests.builders import op

QUEUES = """
defaultQueue: default
queues:
  - name: default
  - name: cpu
    resources:
      - resource: cpu
        flavors: [{name: default, nominal: 64}]
"""


async def start(stack_factory, tmp_path, **overrides) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(queues_file=path, dispatcher_mode="null", **overrides)


async def refused(events, call, op_id: str, reason: str) -> str:
    """``call`` is refused with ``reason``, as its sender hears it and as the error event says; the message."""
    with pytest.raises(CommandRefused) as info:
        await call
    assert info.value.verdict.outcome == reason
    error = await events.expect(ErrorRaised, op_id, where=lambda e: e.reason == reason)
    return error.message


async def test_without_projects_a_submitter_acts_on_its_own_ops_only_and_an_admin_on_all(
        stack_factory, tmp_path, client, client_as, events):
    await start(stack_factory, tmp_path)
    ann, bob = await client_as("ann"), await client_as("bob")
    op_id = await ann.submit(op("anns").build())
    assert (await events.expect(OperationSubmitted, op_id)).requested_by == "ann"
    await events.expect(OperationAdmitted, op_id)

    message = await refused(events, bob.stop(op_id), op_id, "not_allowed")
    assert f"cannot stop {op_id}: user 'bob' may act only on its own ops" in message and "'ann'" in message
    await refused(events, bob.restart(op_id, as_op_id="bobs-restart"), op_id, "not_allowed")
    await refused(events, bob.restart(op_id, copy=True, as_op_id="bobs-copy"), op_id, "not_allowed")
    await refused(events, bob.resume(op_id), op_id, "not_allowed")
    assert not events.of(op_id, OperationStopped) and not events.of("bobs-restart") and not events.of("bobs-copy")

    await ann.stop(op_id)  # its own: stopped, restarted, copied, resumed
    await events.expect(OperationStopped, op_id)
    copied = await ann.restart(op_id, copy=True)
    assert (await events.expect(OperationSubmitted, copied)).requested_by == "ann"
    await ann.resume(op_id)
    await events.expect(OperationResumed, op_id)
    await client.stop(copied)  # the admin: any op
    await events.expect(OperationStopped, copied)


async def test_an_approver_rejects_an_op_on_hold_but_not_one_still_pending(stack_factory, tmp_path, client,
                                                                          client_as, events):
    await start(stack_factory, tmp_path, names=("admission", "cache", "dispatcher"))  # no cost service: pending
    ann, alice = await client_as("ann"), await client_as("alice")
    pending = await ann.submit(op("waits-for-its-estimate").build())
    await events.expect(OperationSubmitted, pending)
    assert (await client.why(pending)).status == "pending"
    message = await refused(events, alice.reject(pending), pending, "not_on_hold")
    assert message.startswith(f"cannot reject {pending}: it is pending, not held for approval")
    assert (await client.why(pending)).status == "pending"
    await client.reject(pending)  # an admin may
    assert (await events.expect(OperationRejected, pending)).reason == "approval_rejected"


async def test_an_approver_rejects_an_op_held_for_approval(stack_factory, tmp_path, client_as, events):
    await start(stack_factory, tmp_path)
    ann, alice = await client_as("ann"), await client_as("alice")
    unapproved = await ann.submit(msgspec.structs.replace(op("not-approved").build(), is_approved=False))
    await events.expect(OperationOnHold, unapproved)
    await alice.reject(unapproved, comment="no")
    rejected = await events.expect(OperationRejected, unapproved)
    assert rejected.reason == "approval_rejected" and "by alice" in rejected.message


async def test_a_gpu_op_in_a_queue_without_gpu_quota_is_rejected_and_why_says_why(stack_factory, tmp_path,
                                                                                  client_as, events):
    await start(stack_factory, tmp_path)
    ann = await client_as("ann")
    op_id = await ann.submit(op("train").queue("cpu").gpus(2).build())
    rejected = await events.expect(OperationRejected, op_id)
    assert rejected.reason == "resource_not_covered" and rejected.queue == "cpu"
    assert rejected.message.startswith("queue cpu sets no quota for nvidia.com/gpu (its resources: cpu)")
    why = await ann.why(op_id)
    assert (why.status, why.end_reason) == ("rejected", "resource_not_covered")
    assert "nvidia.com/gpu" in why.end_message and "queue cpu" in why.end_message
    in_default = await ann.submit(op("train").gpus(2).build())  # a queue with no resources limits nothing
    await events.expect(OperationAdmitted, in_default)
