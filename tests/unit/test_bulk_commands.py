"""Bulk stop, approve and reject (``proto.commands.OperationsCommand``): one command message, each distinct op
judged as the singular command with the same request id would be, one answer per op (its event, or an error event
with the singular's msg id, each stored once); the size bound; the command rate charged per op."""
from __future__ import annotations

import pytest

from opsched.bus import logging as oplog
from opsched.bus.addressing import default_msg_id, subject_for
from opsched.proto import codec
from opsched.proto.commands import ApproveOperations, RejectOperations, StopOperations
from opsched.proto.events import (
    ErrorRaised,
    OperationApproved,
    OperationOnHold,
    OperationRejected,
    OperationStopped,
    StopRequested,
)
from opsched.proto.limits import MAX_OPS_PER_COMMAND
from opsched.services.admission.command_rate import CommandRate
from opsched.services.admission.service import Admission
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, admitted, op, running, submitted, t
from tests.builders.clock import FakeClock


def admission(*events) -> Admission:
    service = Admission(Settings(), FakeClock(T0))
    for event in events:
        service.state.apply(event)
    return service


def ctx(verb: str, user: str = "ann") -> Context:
    return Context(service="admission", clock=FakeClock(t(10)), settings=Settings(), log=oplog.get("test"),
                   subject=f"cmd.{user}.{verb}")


def on_hold(op_id: str) -> list:
    return [submitted(op(op_id).build(), op_id=op_id),
            OperationOnHold(op_id=op_id, at=T0, reason="is_approved_false", message="waiting for approval")]


def in_run(op_id: str, by: str = "ann") -> list:
    spec = op(op_id).build()
    return [submitted(spec, op_id=op_id, by=by), admitted(spec, op_id=op_id), running(op_id)]


async def test_a_bulk_approve_answers_each_op_an_approval_or_its_own_refusal_each_stored_once():
    service = admission(*on_hold("a"), *on_hold("b"), OperationApproved(op_id="b", at=T0, approved_by="bob"))
    cmd = ApproveOperations(op_ids=["a", "gone", "b", "a"], request_id="r1", comment="fine")
    events = await service.on_many(cmd, ctx("approve"))
    assert [(type(e).__name__, e.op_id) for e in events] == [
        ("OperationApproved", "a"), ("ErrorRaised", "gone"), ("ErrorRaised", "b")]  # "a" once
    approved, unknown, again = events
    assert (approved.request_id, approved.approved_by, approved.comment) == ("r1", "ann", "fine")
    assert (unknown.reason, unknown.command_msg_id) == ("unknown_op", "gone.approve.r1")
    assert (again.reason, again.command_msg_id) == ("already_approved", "b.approve.r1")
    assert len({default_msg_id(e) for e in events}) == 3
    assert default_msg_id(again) == "b.approve.r1.error"


async def test_a_bulk_stop_and_a_bulk_reject_answer_as_their_singular_commands():
    service = admission(*in_run("r1"), *in_run("r2"), *in_run("bobs", by="bob"), *on_hold("h"))
    stops = await service.on_many(StopOperations(op_ids=["r1", "bobs", "r2"], request_id="s"), ctx("stop"))
    assert [(type(e), e.op_id) for e in stops] == [(StopRequested, "r1"), (ErrorRaised, "bobs"), (StopRequested, "r2")]
    assert stops[0].request_id == stops[2].request_id == "s"
    assert stops[1].reason == "not_allowed"  # the owner checked per op, as for `opsched stop`
    rejects = await service.on_many(RejectOperations(op_ids=["h", "r1"], request_id="j", comment="no"),
                                    ctx("reject"))
    assert isinstance(rejects[0], OperationRejected) and rejects[0].request_id == "j"
    assert isinstance(rejects[1], ErrorRaised) and rejects[1].reason == "not_on_hold"
    held = admission(*[submitted(op("h").build(), op_id="h", by="ann")])
    pending_stop = await held.on_many(StopOperations(op_ids=["h"], request_id="s2"), ctx("stop"))
    assert isinstance(pending_stop[0], OperationStopped)


def test_a_bulk_command_goes_on_the_singular_verbs_subject_once_per_request():
    cmd = ApproveOperations(op_ids=["a"], request_id="r1")
    assert subject_for(cmd, "ann") == "cmd.ann.approve"  # the approver's permission, unchanged
    assert default_msg_id(cmd) == "many.approve_many.r1"


@pytest.mark.parametrize("ids", [[], [f"op-{i}" for i in range(MAX_OPS_PER_COMMAND + 1)]])
def test_a_bulk_command_holds_one_to_the_bound_of_ops(ids):
    assert "opIds" in (codec.refusal(StopOperations(op_ids=ids, request_id="r")) or "")


def test_the_command_rate_charges_a_bulk_command_one_token_per_op_at_most_a_burst():
    rate = CommandRate(per_min=60, burst=10)
    assert rate.charge("ann", 1, T0, cost=4) is None
    assert rate.charge("ann", 2, T0, cost=7) == pytest.approx(1.0)  # 6 left: one more second for the 7th
    fresh = CommandRate(per_min=60, burst=10)
    assert fresh.charge("bob", 1, T0, cost=500) is None  # a full burst takes any command
