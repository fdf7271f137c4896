"""A command's verdict is matched to that command (``opsched.verdicts``): admission's answer carries the command's
request id (the events it returns) or its Nats-Msg-Id (a refusal's error event); another user's answer about the
same op, or an event nobody asked for, is not taken for it."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from opsched.bus.addressing import default_msg_id
from opsched.bus.bus import Received
from opsched.proto import subjects
from opsched.proto.commands import ApproveOperation, StopOperation
from opsched.proto.events import (
    ErrorRaised,
    OperationApproved,
    OperationRejected,
    OperationStopped,
    OperationSubmitted,
    StopRequested,
)
from opsched.services.runtime.deadletter import dead_letter
from opsched.verdicts import (
    EXIT_BAD_INPUT,
    EXIT_DONE,
    EXIT_REFUSED,
    Request,
    VerdictUnknown,
    await_verdict,
    await_verdicts,
    verdict_of,
)
from tests.builders import op
from tests.builders.bus import memory_bus
from tests.builders.clock import FakeClock

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
STOP = Request("stop", "op-1", "mine")
RESTART = Request("restart", "op-1", "mine", new_op_id="op-2")


def error(reason: str, msg_id: str, op_id: str = "op-1") -> ErrorRaised:
    return ErrorRaised(op_id=op_id, at=NOW, service="admission", subject="cmd.alice.stop", reason=reason,
                       message=f"because {reason}", command_msg_id=msg_id)


def stop_requested(request_id: str) -> StopRequested:
    return StopRequested(op_id="op-1", at=NOW, pod_name="p", namespace="ns", request_id=request_id)


def test_a_command_is_sent_with_the_msg_id_its_refusal_carries():
    cmd = StopOperation(op_id="op-1", request_id="mine")
    assert default_msg_id(cmd) == STOP.msg_id == "op-1.stop.mine"
    assert default_msg_id(StopOperation(op_id="op-1")) == "op-1.stop.0"  # none given: as before


def test_the_refusal_of_this_command_is_its_verdict_and_another_users_is_not():
    assert verdict_of(error("not_allowed", "op-1.stop.theirs"), STOP) is None
    assert verdict_of(error("not_allowed", ""), STOP) is None  # an error about the op, from no command of ours
    verdict = verdict_of(error("not_allowed", STOP.msg_id), STOP)
    assert verdict is not None and verdict.refused and verdict.outcome == "not_allowed"
    assert verdict.exit_code == EXIT_REFUSED and verdict.message == "because not_allowed"


def test_a_refusal_of_what_was_typed_exits_2_and_nothing_to_do_exits_0():
    assert verdict_of(error("unknown_op", STOP.msg_id), STOP).exit_code == EXIT_BAD_INPUT
    assert verdict_of(error("invalid_template", STOP.msg_id), STOP).exit_code == EXIT_BAD_INPUT
    assert verdict_of(error("already_ended", STOP.msg_id), STOP).exit_code == EXIT_REFUSED
    idle = verdict_of(error("already_stopping", STOP.msg_id), STOP)
    assert idle.nothing_to_do and not idle.refused and not idle.done and idle.exit_code == EXIT_DONE


def test_only_the_answer_carrying_this_request_id_is_its_verdict():
    assert verdict_of(stop_requested("theirs"), STOP) is None  # another user's stop of the same op
    assert verdict_of(OperationStopped(op_id="op-1", at=NOW), STOP) is None  # the dispatcher's end: no answer
    verdict = verdict_of(stop_requested("mine"), STOP)
    assert verdict is not None and verdict.done and verdict.outcome == "stop_requested"
    assert verdict.message == "op-1: stop requested (attempt 0); its pods are being deleted"
    # an answer of another verb with our id is not this command's (an approve is answered by approved only)
    assert verdict_of(OperationApproved(op_id="op-1", at=NOW, request_id="mine"), STOP) is None
    approve = Request("approve", "op-1", "mine")
    assert verdict_of(OperationApproved(op_id="op-1", at=NOW, request_id="mine", approved_by="bob"),
                      approve).message == "op-1: approved by bob"


def test_a_rerun_is_answered_by_its_new_op_submitted_or_rejected():
    spec = op("train").build()
    assert verdict_of(OperationSubmitted(op_id="op-1", at=NOW, spec=spec, queue="q", submitted_at=NOW), RESTART) \
        is None  # the original's own submit
    done = verdict_of(OperationSubmitted(op_id="op-2", at=NOW, spec=spec, queue="q", submitted_at=NOW,
                                         original_op_id="op-1", relation="restart"), RESTART)
    assert done is not None and done.done and done.new_op_id == "op-2"
    assert done.message == "op-2: submitted, a restart of op-1"
    refused = verdict_of(OperationRejected(op_id="op-2", at=NOW, reason="queue_full", message="full"), RESTART)
    assert refused is not None and refused.refused and refused.exit_code == EXIT_REFUSED
    assert verdict_of(error("unknown_op", "op-1.restart.mine"), RESTART).exit_code == EXIT_BAD_INPUT


async def test_waiting_skips_another_users_answer_that_comes_first_and_returns_its_own():
    bus = memory_bus()
    request = Request("approve", "op-1", "mine")

    async def publish() -> None:  # another user's approve is answered first, then ours is refused
        await bus.publish(OperationApproved(op_id="op-1", at=NOW, request_id="theirs"))
        await bus.publish(ApproveOperation(op_id="op-1", request_id="mine"))
        await bus.publish(error("not_allowed", request.msg_id), msg_id="error.admission.x.1")

    verdict = await await_verdict(bus, request, publish, timeout=5.0)
    assert verdict.refused and verdict.outcome == "not_allowed"


async def test_no_answer_in_time_is_an_unknown_verdict():
    bus = memory_bus()
    request = Request("stop", "op-1", "mine")
    with pytest.raises(VerdictUnknown, match="no verdict on stop op-1 within 0.05s: it may or may not have"):
        await await_verdict(bus, request, lambda: bus.publish(StopOperation(op_id="op-1", request_id="mine")),
                            timeout=0.05)
    assert await bus.last_stored(subjects.CMD_STREAM, subjects.CMD_ALL) == 1  # it was sent all the same


async def test_a_refusals_error_event_carries_the_refused_commands_msg_id():
    bus = memory_bus()
    msg = Received(subject="cmd.alice.stop", data=b'{"type":"stop","opId":"op-1"}',
                   headers={"Nats-Msg-Id": "op-1.stop.mine"}, stream_seq=7, num_delivered=1, raw=None,
                   durable="admission-commands")
    event = await dead_letter(bus, FakeClock(NOW), "admission", msg, reason="unknown_op", message="no such op")
    assert (event.op_id, event.command_msg_id) == ("op-1", "op-1.stop.mine")
    assert verdict_of(event, STOP) is not None


async def test_a_bulk_commands_verdicts_are_read_from_the_streams_end_before_it_was_sent():
    """``await_verdicts`` follows the verb's events and the errors from the op stream's end as it was before the
    publish (``follow(from_seq=)``): an answer stored earlier (another command of the same request id) is not
    read; each op gets its own verdict, None when none came."""
    bus = memory_bus()
    await bus.publish(OperationApproved(op_id="a", at=NOW, request_id="r1"))  # stored before: not this command's

    async def publish() -> None:
        await bus.publish(OperationApproved(op_id="b", at=NOW, request_id="r1"))
        await bus.publish(ErrorRaised(op_id="c", at=NOW, service="admission", subject="cmd.x.approve",
                                      reason="unknown_op", message="no such operation", command_msg_id="c.approve.r1"))

    verdicts = await await_verdicts(bus, "approve", ["a", "b", "c"], "r1", publish, timeout=0.2)
    assert verdicts["a"] is None
    assert (verdicts["b"].outcome, verdicts["c"].outcome, verdicts["c"].exit_code) == ("approved", "unknown_op",
                                                                                       EXIT_BAD_INPUT)
