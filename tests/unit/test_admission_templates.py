"""Admission renders what an op runs: a submit whose templates cannot render is rejected with the field
(and dead-lettered); each admission carries the op rendered with its own values; a restart or resume
with new params renders again from the spec as written."""
from __future__ import annotations

import msgspec
import pytest

from opsched.bus import logging as oplog
from opsched.bus.errors import InvalidInput
from opsched.proto.commands import RestartOperation, ResumeOperation
from opsched.proto.events import (
    OperationAdmitted,
    OperationRejected,
    OperationSubmitted,
    OperationTimedOut,
)
from opsched.services.admission.handlers import on_rerun, on_resume, on_submit
from opsched.services.admission.rendering import INVALID_TEMPLATE
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, case, case_name, gates_cleared, op, submit, t
from tests.builders.clock import FakeClock
from tests.unit.admission_scenarios import NS, decide, fold, queues

TRAIN = op("train").params(lr=0.1).command("python", "train.py", "--lr={{ lr }}", "--run={{ globals.uuid }}")


@pytest.fixture
def ctx() -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))


def admit(spec, ctx, op_id="op-1", book=None, state=None):
    """Submit through the handler, clear the gates, run one cycle: (state, the admitted event)."""
    book = book or queues(("default", 10))
    state = state or AdmissionState()
    fold(on_submit(submit(spec, op_id=op_id), ctx, state, book), *gates_cleared(op_id), state=state)
    return state, next(d for d in decide(state, book) if isinstance(d, OperationAdmitted) and d.op_id == op_id)


@pytest.mark.parametrize("c", [
    case("an undefined name", spec=op("a").args("{{ nope }}").build(), error="container.args[0]: 'nope' is undefined"),
    case("a sandbox escape", spec=op("a").image("{{ ''.__class__ }}").build(), error="container.image: not allowed"),
    case("a templated queue that cannot render", spec=op("a").queue("{{ q }}").build(), error="queue: 'q' is undefined"),
    case("a worker's command", spec=op("a").replicas("worker", 2).build(), worker="{{ rank }}",
         error="replicas[0].container.command[0]"),
], ids=case_name)
def test_a_submit_that_cannot_render_is_rejected_and_dead_lettered(c, ctx):
    spec = c.spec
    if c.args.get("worker"):
        group = spec.replicas[0]
        container = msgspec.structs.replace(group.container, command=[c.worker])
        spec = msgspec.structs.replace(spec, replicas=[msgspec.structs.replace(group, container=container)])
    with pytest.raises(InvalidInput) as raised:
        on_submit(submit(spec, op_id="bad"), ctx, AdmissionState(), queues(("default", 1)))
    assert raised.value.reason == INVALID_TEMPLATE and raised.value.op_id == "bad"
    [rejected] = raised.value.events
    assert isinstance(rejected, OperationRejected) and rejected.reason == INVALID_TEMPLATE
    assert c.error in rejected.message


def test_the_admitted_event_carries_the_op_rendered_with_its_own_id(ctx):
    state, first = admit(TRAIN.build(), ctx, op_id="op-1")
    _, second = admit(TRAIN.build(), ctx, op_id="op-2", state=state)
    assert first.spec.container.command[2:] == ["--lr=0.1", "--run=op-1"]
    assert second.spec.container.command[2:] == ["--lr=0.1", "--run=op-2"]
    assert state.ops["op-1"].spec.container.command[2] == "--lr={{ lr }}"  # the record keeps it as written


def test_the_submitted_event_keeps_the_spec_as_written_and_who_submitted(ctx):
    event = on_submit(submit(TRAIN.build(), op_id="a"), ctx, AdmissionState(), queues(("default", 1)))
    assert isinstance(event, OperationSubmitted)
    assert event.spec.container.command[2] == "--lr={{ lr }}" and event.requested_by == "test"


def test_a_templated_queue_is_rendered_then_routed(ctx):
    spec = op("a").params(gpus=2).queue("{{ 'fast' if gpus > 1 else 'slow' }}").build()
    event = on_submit(submit(spec, op_id="a"), ctx, AdmissionState(), queues(("slow", 1), ("fast", 1)))
    assert event.queue == "fast"


def test_a_restart_with_new_params_renders_them(ctx):
    book = queues(("default", 10))
    state, _ = admit(TRAIN.build(), ctx, op_id="op-1", book=book)
    events = on_rerun(RestartOperation(op_id="op-1", new_op_id="op-2", params={"lr": 0.5}, requested_at=T0),
                      ctx, state, book)
    fold(events, *gates_cleared("op-2"), state=state)
    admitted = next(d for d in decide(state, book) if isinstance(d, OperationAdmitted))
    assert admitted.spec.container.command[2:] == ["--lr=0.5", "--run=op-2"]


def test_a_resume_with_params_that_cannot_render_is_refused_and_the_op_kept(ctx):
    book = queues(("default", 10))
    state, _ = admit(op("a").params(lr=0.1).args("{{ lr * 2 }}").build(), ctx, op_id="a", book=book)
    fold(OperationTimedOut(op_id="a", at=t(5)), state=state)
    with pytest.raises(InvalidInput, match="cannot resume a with these params: container.args"):
        on_resume(ResumeOperation(op_id="a", params={"lr": "x" * 40000}, requested_at=T0), ctx, state, book)
    resumed = on_resume(ResumeOperation(op_id="a", params={"lr": 2}, requested_at=T0), ctx, state, book)
    fold(resumed, state=state)
    admitted = next(d for d in decide(state, book) if isinstance(d, OperationAdmitted))
    assert admitted.spec.container.args == ["4"] and admitted.attempt == 1


def test_the_queue_s_artifacts_root_and_namespace_reach_the_globals(ctx):
    from opsched.proto.queues import Queue, QueuesConfig
    from opsched.services.admission.model.queues import compile_book

    book = compile_book(QueuesConfig(queues=[Queue(name="default", namespace="team-a", artifacts_root="/runs")]))
    _, admitted = admit(op("a").args("{{ run_outputs_path }}", "{{ namespace }}").build(), ctx, book=book)
    assert admitted.spec.container.args == ["/runs/op-1/outputs", "team-a"]
    assert admitted.namespace == "team-a" != NS


def test_what_placement_reads_is_rendered_at_submit_and_the_rest_when_admitted(ctx):
    from opsched.proto.spec import FileInit, InitStep
    from opsched.rules.queues_file import parse_queues
    from opsched.services.admission.model.queues import compile_book

    spec = op("a").params(zone="eu", team="ml", repo="repo").build()
    spec = msgspec.structs.replace(
        spec, connections=["{{ repo }}"], init=[InitStep(file=FileInit(content="{{ globals.uuid }}"), path="/{{ team }}")],
        environment=msgspec.structs.replace(
            spec.environment, tolerations=[{"key": "zone", "operator": "Equal", "value": "{{ zone }}"}],
            affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["{{ zone }}"]}]}]}}},
            labels={"team": "{{ team }}"}))
    book = compile_book(parse_queues("queues: [{name: default}]\nconnections: [{name: repo, kind: custom}]"))
    submitted = on_submit(submit(spec, op_id="a"), ctx, AdmissionState(), book)
    assert isinstance(submitted, OperationSubmitted)  # its connection resolved, rendered
    placed = submitted.spec
    assert placed.connections == ["repo"] and placed.environment.tolerations[0]["value"] == "eu"
    assert placed.environment.affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["eu"]  # what admission's node fit reads
    assert placed.environment.labels == {"team": "{{ team }}"}  # the rest: when admitted
    _, admitted = admit(spec, ctx, op_id="a", book=book)
    assert admitted.spec.environment.labels == {"team": "ml"} and admitted.spec.init[0].path == "/ml"
    assert admitted.spec.init[0].file.content == "a" and [c.name for c in admitted.connections] == ["repo"]
