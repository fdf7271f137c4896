"""Every command admission handles gets an answer its sender can read (issue 27): the event it returns carries the
command's request id, and what it does not do is a refusal (``InvalidInput``: an error event) saying why, or an
explicit "nothing to do" (``already_approved``, ``already_stopping``). How a rejected op and an ended op read in
the CLI's view and ``why``."""
from __future__ import annotations

import pytest

from opsched.bus import logging as oplog
from opsched.bus.errors import InvalidInput
from opsched.proto.commands import ApproveOperation, RejectOperation, RestartOperation, StopOperation
from opsched.proto.events import OperationApproved, OperationRejected, OperationStopped, StopRequested
from opsched.proto.queries import WhyAnswer
from opsched.services.admission import handlers, queries
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from opsched.tables import why_text
from opsched.view import OpsView
from tests.builders import T0, admitted, op, submit, succeeded
from tests.builders.clock import FakeClock
from tests.unit.admission_scenarios import fold, queues, ready


@pytest.fixture
def ctx() -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))


def refusal(call) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        call()
    return info.value


def running(op_id: str = "a") -> AdmissionState:
    return fold(ready(op_id), admitted(op(op_id).build(), op_id=op_id))


def test_the_answer_carries_the_commands_request_id(ctx):
    answer = handlers.on_stop(StopOperation(op_id="a", request_id="r1"), ctx, running())
    assert isinstance(answer, StopRequested) and answer.request_id == "r1"
    held = fold(ready("b"))
    assert handlers.on_stop(StopOperation(op_id="b", request_id="r2"), ctx, held) == OperationStopped(
        op_id="b", at=T0, reason="stopped", message="stopped by user", request_id="r2")
    approved = handlers.on_approve(ApproveOperation(op_id="b", request_id="r3"), ctx, held)
    assert isinstance(approved, OperationApproved) and approved.request_id == "r3"
    rejected = handlers.on_reject(RejectOperation(op_id="b", request_id="r4"), ctx, held)
    assert isinstance(rejected, OperationRejected) and rejected.request_id == "r4"


def test_a_second_stop_of_the_same_attempt_has_nothing_to_do(ctx):
    state = running()
    first = handlers.on_stop(StopOperation(op_id="a", request_id="r1"), ctx, state)
    fold(first, state=state)  # admission folds its own answer from the stream
    again = refusal(lambda: handlers.on_stop(StopOperation(op_id="a", request_id="r2"), ctx, state))
    assert again.reason == "already_stopping" and again.message.startswith("nothing to do: a stop of a (attempt 0)")


def test_a_second_request_answered_before_its_answer_is_folded_has_nothing_to_do_and_a_redelivery_is_answered(ctx):
    """Two stops (approves) back to back: the first's answer is not on the stream yet when the second is judged; the
    same answer again would be a duplicate JetStream drops and its sender would hear nothing."""
    state = running()
    first = handlers.on_stop(StopOperation(op_id="a", request_id="r1"), ctx, state)
    assert handlers.on_stop(StopOperation(op_id="a", request_id="r1"), ctx, state) == first  # a redelivery
    assert refusal(lambda: handlers.on_stop(StopOperation(op_id="a", request_id="r2"), ctx, state)).reason == \
        "already_stopping"
    held = fold(ready("b"))
    handlers.on_approve(ApproveOperation(op_id="b", request_id="r1"), ctx, held)
    assert refusal(lambda: handlers.on_approve(ApproveOperation(op_id="b", request_id="r2"), ctx, held)).reason == \
        "already_approved"


def test_a_second_approve_has_nothing_to_do(ctx):
    state = fold(ready("a"))
    fold(handlers.on_approve(ApproveOperation(op_id="a"), ctx, state), state=state)
    again = refusal(lambda: handlers.on_approve(ApproveOperation(op_id="a"), ctx, state))
    assert (again.reason, again.message) == ("already_approved", "nothing to do: a is already approved")


@pytest.mark.parametrize("command", [StopOperation, ApproveOperation, RejectOperation])
def test_a_command_on_an_ended_op_is_refused_saying_how_it_ended(ctx, command):
    state = fold(succeeded("a"), state=running())
    refused = refusal(lambda: getattr(handlers, f"on_{command.__struct_config__.tag}")(command(op_id="a"), ctx,
                                                                                       state))
    assert refused.reason == "already_ended" and "it already succeeded" in refused.message


@pytest.mark.parametrize("command", [StopOperation, ApproveOperation, RejectOperation])
def test_a_command_on_an_unknown_op_is_refused_unknown_op(ctx, command):
    refused = refusal(lambda: getattr(handlers, f"on_{command.__struct_config__.tag}")(command(op_id="ghost"), ctx,
                                                                                       AdmissionState()))
    assert (refused.reason, refused.op_id) == ("unknown_op", "ghost")


def test_a_rerun_onto_an_existing_op_id_is_refused(ctx):
    state = fold(ready("b"), state=running("a"))
    refused = refusal(lambda: handlers.on_rerun(RestartOperation(op_id="a", new_op_id="b"), ctx, state,
                                                queues(("default", 1))))
    assert refused.reason == "duplicate_op_id" and refused.op_id == "a"


def test_a_submit_rejected_keeps_the_ops_name_and_queue_and_the_view_shows_them(ctx):
    spec = op("lost").queue("nosuch").build()
    rejected = handlers.on_submit(submit(spec, op_id="x"), ctx, AdmissionState(), queues(("default", 1)))
    assert isinstance(rejected, OperationRejected)
    assert (rejected.reason, rejected.name, rejected.queue) == ("unknown_queue", "lost", "nosuch")
    row = OpsView().fold(rejected)
    assert row is not None and (row.name, row.queue, row.status) == ("lost", "nosuch", "rejected")


def test_why_of_an_ended_op_gives_its_end_reason_and_message(ctx):
    state = fold(ready("a"))
    fold(handlers.on_reject(RejectOperation(op_id="a", requested_by="bob", comment="too big"), ctx, state),
         state=state)
    answer = queries.why(state, queues(("default", 1)), "a")
    assert (answer.status, answer.end_reason, answer.end_message) == ("rejected", "approval_rejected",
                                                                      "rejected by bob: too big")
    assert why_text(answer) == "a (a): rejected in queue default (ended: approval_rejected: rejected by bob: too big)"
    stray = AdmissionState()  # a submit rejected before it was an op, read from the stream (a sequence)
    stray.apply(OperationRejected(op_id="s", at=T0, reason="unknown_queue", message="unknown queue 'x'"), 7)
    assert why_text(queries.why(stray, queues(("default", 1)), "s")).splitlines()[0] == (
        "s: rejected (ended: unknown_queue: unknown queue 'x')")
    assert why_text(WhyAnswer(op_id="q", found=True, status="queued", queue="default")) == "q: queued in queue default"
