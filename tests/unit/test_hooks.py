"""Hooks: the follow-up ops an op's end triggers. Which ends trigger which hooks, once the end is on the stream;
the follow-up op evaluated in the finished op's context (its params, outputs, globals and status) when admission
submits it; and only admission may submit one."""
from __future__ import annotations

import msgspec
import pytest

from opsched.bus import logging as oplog
from opsched.bus.errors import InvalidInput
from opsched.proto.commands import SubmitOperation
from opsched.proto.events import (
    FailureFinal,
    OperationRejected,
    OperationSkipped,
    OperationSubmitted,
    OperationTimedOut,
)
from opsched.proto.spec import Hook, OpSpec
from opsched.rules.naming import hook_op_id
from opsched.services.admission.handlers import on_submit
from opsched.services.admission.hooks import due
from opsched.services.admission.rendering import INVALID_CONDITION, INVALID_TEMPLATE
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.runtime.consumer import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, admitted, case, case_name, failed, gates_cleared, op, running, stopped, submitted
from tests.builders import succeeded as succeeded_event
from tests.builders.clock import FakeClock
from tests.unit.admission_scenarios import queues

ADMISSION_SUBJECT = "cmd.admission.submit.default"


def hooked(*triggers: str, params: dict | None = None, conditions: str | None = None, queue: str | None = None):
    follow = op("notify").params(**(params or {})).build()
    follow = msgspec.structs.replace(follow, conditions=conditions, queue=queue)
    return msgspec.structs.replace(op("train").params(lr=0.1).build(),
                                   hooks=[Hook(trigger=t, spec=follow) for t in triggers])


def ended(spec: OpSpec, *ends, state: AdmissionState | None = None, op_id: str = "train-1") -> AdmissionState:
    """The op through its run to ``ends``, every event stored on the stream (a sequence each)."""
    state = state or AdmissionState()
    events = [msgspec.structs.replace(submitted(spec, op_id=op_id), requested_by="alice"), *gates_cleared(op_id),
              admitted(spec, op_id=op_id),
              running(op_id, node="n1"), *ends]
    for seq, event in enumerate(events, 1):
        state.apply(event, seq)
    return state


def ctx(subject: str = ADMISSION_SUBJECT) -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"),
                   subject=subject)


ENDS = {
    "succeeded": [succeeded_event("train-1")],
    "failed": [failed("train-1"), FailureFinal(op_id="train-1", at=T0, reason="Error")],
    "timed out": [OperationTimedOut(op_id="train-1", at=T0, message="deadline")],
    "stopped": [stopped("train-1")],
}


@pytest.mark.parametrize("c", [
    case("succeeded", end="succeeded", fired=["succeeded", "done"]),
    case("failed", end="failed", fired=["failed", "done"]),
    case("timed out: a failure, as in Polyaxon", end="timed out", fired=["failed", "done"]),
    case("stopped", end="stopped", fired=["stopped", "done"]),
], ids=case_name)
def test_an_end_on_the_stream_triggers_the_hooks_that_name_it(c):
    triggers = ("succeeded", "failed", "stopped", "done")
    state = ended(hooked(*triggers), *ENDS[c.end])
    assert list(state.hooks.ops) == ["train-1"]
    commands = due(state.ops["train-1"], T0)
    assert [triggers[int(cmd.op_id.rsplit("-", 1)[1])] for cmd in commands] == c.fired
    assert all(cmd.hook_of == "train-1" and cmd.spec.queue == "default" for cmd in commands)  # the op's queue


def test_an_end_only_assumed_triggers_nothing_yet_and_an_op_that_left_memory_nothing_at_all():
    state = AdmissionState()
    spec = hooked("done")
    for event in (submitted(spec, op_id="a"), *gates_cleared("a"), admitted(spec, op_id="a")):
        state.apply(event, 1)
    state.apply(succeeded_event("a"))  # decided here, not yet stored
    assert not state.hooks.ops
    state.apply(succeeded_event("a"), 9)
    assert list(state.hooks.ops) == ["a"]
    state.fold.forget("a")
    assert not state.hooks.ops


def test_a_hooks_op_id_is_the_same_however_often_it_is_asked_and_new_for_a_resumed_attempt():
    assert hook_op_id("train-1", 0, 0) == "train-1-hook-0" and hook_op_id("train-1", 2, 1) == "train-1-hook-1-2"
    long = "x" * 60
    assert hook_op_id(long, 0, 0) == hook_op_id(long, 0, 0) != hook_op_id(long, 0, 1)
    assert len(hook_op_id(long, 0, 0)) <= 63


def follow_up(state: AdmissionState, index: int = 0, subject: str = ADMISSION_SUBJECT):
    cmd = due(state.ops["train-1"], T0)[index]
    return on_submit(cmd, ctx(subject), state, queues(("default", 10), ("notify", 1)))


def test_its_params_render_in_the_finished_ops_context_and_it_belongs_to_that_ops_requester():
    spec = hooked("succeeded", params={"msg": "{{ globals.name }} {{ globals.status }} lr={{ lr }}",
                                       "loss": "{{ outputs.loss }}", "run": "{{ globals.uuid }}"})
    end = msgspec.structs.replace(succeeded_event("train-1"), outputs={"loss": 0.25})
    event = follow_up(ended(spec, end))
    assert isinstance(event, OperationSubmitted) and event.op_id == "train-1-hook-0"
    assert event.spec.params == {"msg": "train succeeded lr=0.1", "loss": "0.25", "run": "train-1"}
    assert event.requested_by == "alice"  # the finished op's submitter, not admission


@pytest.mark.parametrize("c", [
    case("true", conditions="{{ outputs.loss < 0.5 and globals.status == 'succeeded' }}", skipped=False),
    case("false", conditions="{{ outputs.loss > 0.5 }}", skipped=True),
], ids=case_name)
def test_its_conditions_are_evaluated_over_the_finished_op(c):
    end = msgspec.structs.replace(succeeded_event("train-1"), outputs={"loss": 0.25})
    events = follow_up(ended(hooked("succeeded", conditions=c.conditions), end))
    events = events if isinstance(events, list) else [events]
    assert isinstance(events[0], OperationSubmitted) and events[0].spec.conditions is None
    assert any(isinstance(e, OperationSkipped) for e in events) == c.skipped


@pytest.mark.parametrize("c", [
    case("a param naming what the op does not have", params={"x": "{{ outputs.nope }}"}, conditions=None,
         reason=INVALID_TEMPLATE, error="cannot render the hook's params over train-1"),
    case("a condition that cannot be evaluated", params={}, conditions="{{ nope > 1 }}", reason=INVALID_CONDITION,
         error="cannot evaluate the hook's conditions over train-1"),
], ids=case_name)
def test_a_hook_that_cannot_be_evaluated_is_rejected_with_why(c):
    with pytest.raises(InvalidInput) as raised:
        follow_up(ended(hooked("done", params=c.params, conditions=c.conditions), *ENDS["succeeded"]))
    [rejected] = raised.value.events
    assert isinstance(rejected, OperationRejected) and rejected.reason == c.reason and c.error in rejected.message


def test_nobody_but_admission_submits_a_hooks_op():
    state = ended(hooked("done", params={"x": "{{ globals.uuid }}"}), *ENDS["succeeded"])
    with pytest.raises(InvalidInput) as raised:
        follow_up(state, subject="cmd.alice.submit.default")  # reading another op's params and outputs: refused
    assert raised.value.reason == "not_allowed" and "only admission" in raised.value.message


def test_a_hook_names_its_own_queue():
    state = ended(hooked("done", queue="notify"), *ENDS["succeeded"])
    event = follow_up(state)
    assert isinstance(event, OperationSubmitted) and event.queue == "notify"


def test_a_hooks_op_has_no_hooks_of_its_own():
    inner = hooked("done")
    with pytest.raises(ValueError, match="a hook never triggers another"):
        msgspec.structs.replace(inner, hooks=[Hook(trigger="done", spec=inner)]).__post_init__()
    with pytest.raises(msgspec.ValidationError, match="a hook never triggers another"):
        msgspec.json.decode(msgspec.json.encode(SubmitOperation(op_id="a", spec=op("a").build()))
                            .replace(b'"spec":{', b'"spec":{"hooks":[{"trigger":"done","spec":'
                                     + msgspec.json.encode(inner) + b'}],', 1), type=SubmitOperation)
