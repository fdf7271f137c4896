"""A queue's settings for its service ops (``services:`` of a queue): a default priority class and preemptibility
written into a service op's spec when admission accepts it, and ``maxServices``, a cap on the service ops it runs
at once (the next waits ``max_services``); each validated when the configuration is loaded."""
from __future__ import annotations

import msgspec
import pytest

from opsched.bus import logging as oplog
from opsched.proto.events import OperationRejected, OperationSubmitted
from opsched.proto.queues import Services
from opsched.proto.reasons import Reason, pending
from opsched.proto.spec import SERVICE_KIND, OpSpec, ServiceSpec
from opsched.rules.queues_file import QueuesConfigError, parse_queues
from opsched.services.admission import cycle, queries
from opsched.services.admission.handlers import on_submit
from opsched.services.admission.state.admission_state import AdmissionState, Status, snapshot_of
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from opsched.tables import queues_table
from tests.builders import (
    T0,
    book,
    case,
    case_name,
    fold,
    op,
    preempted,
    queue,
    queued,
    running,
    stopped,
    submit,
    succeeded,
    t,
)
from tests.builders.clock import FakeClock
from tests.unit.preemption_scenarios import admitted_ids, victims

CLASSES = {"interactive": 500, "normal": 100, "batch": 0}


def service(name: str, **fields) -> OpSpec:
    return msgspec.structs.replace(op(name).build(), run_kind=SERVICE_KIND, service=ServiceSpec(ports=[8888]), **fields)


# ---- defaults, written at submit --------------------------------------------------------------

NOTEBOOKS = book(queue("nb", default_priority_class="normal",
                       services=Services(default_priority_class="interactive", default_preemptible=False)),
                 queue("plain", default_priority_class="normal"), priority_classes=CLASSES)


@pytest.fixture
def ctx() -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))


@pytest.mark.parametrize("c", [
    case("a service saying nothing gets its queue's services class and is not preemptible",
         spec=service("s"), queue="nb", priority_class="interactive", preemptible=False, priority=500),
    case("a service's own preemptible: true is honoured", spec=service("s", preemptible=True), queue="nb",
         priority_class="interactive", preemptible=True, priority=500),
    case("a service's own class is honoured", spec=service("s", priority_class="batch"), queue="nb",
         priority_class="batch", preemptible=False, priority=0),
    case("a service's own priority number is honoured", spec=service("s", priority=7), queue="nb",
         priority_class=None, preemptible=False, priority=7),
    case("a job of that queue keeps the queue's defaults for every op", spec=op("j").build(), queue="nb",
         priority_class=None, preemptible=None, priority=100),
    case("a service of a queue without services settings is as any op", spec=service("s"), queue="plain",
         priority_class=None, preemptible=True, priority=100),
], ids=case_name)
def test_a_services_defaults_are_written_into_its_recorded_spec_at_submit(c, ctx):
    event = on_submit(submit(msgspec.structs.replace(c.spec, queue=c.queue), op_id="x"), ctx, AdmissionState(),
                      NOTEBOOKS)
    assert isinstance(event, OperationSubmitted)
    assert (event.spec.priority_class, event.spec.preemptible, event.priority) == (
        c.priority_class, c.preemptible, c.priority)


def test_a_services_default_class_is_bounded_like_any_class(ctx):
    """maxPriorityClass caps a class the op names; the configuration refuses a services default above it, so a
    service saying nothing is never rejected for its queue's own default."""
    b = book(queue("nb", max_priority_class="normal", services=Services(default_priority_class="normal")),
             priority_classes=CLASSES)
    event = on_submit(submit(service("s", queue="nb"), op_id="x"), ctx, AdmissionState(), b)
    assert isinstance(event, OperationSubmitted) and event.priority == 100
    event = on_submit(submit(service("s", queue="nb", priority_class="interactive"), op_id="y"), ctx,
                      AdmissionState(), b)
    assert isinstance(event, OperationRejected) and event.reason == "priority_too_high"


def test_the_recorded_default_is_what_admission_decides_with(ctx):
    """The accepted op's spec (not the queue's configuration now) says it is not preemptible: it waits rather than
    borrow."""
    b = book(queue("nb", cohort="lab", gpus={"h100": 1}, services=Services(default_preemptible=False)),
             queue("other", cohort="lab", gpus={"h100": 4}))
    event = on_submit(submit(msgspec.structs.replace(service("s", queue="nb"), container=op("s").gpus(2).build()
                                                     .container), op_id="s"), ctx, AdmissionState(), b)
    assert isinstance(event, OperationSubmitted) and event.spec.preemptible is False
    state = fold(event, *queued(event.spec, op_id="s", queue="nb")[1:])
    assert cycle.decide(state, b, t(1), "opsched") == []
    assert [r.code for r in state.ops["s"].blocked] == ["nonpreemptible_over_nominal"]


# ---- maxServices --------------------------------------------------------------------------------

CAPPED = book(queue("nb", concurrency=10, services=Services(max_services=2)))


def queued_service(op_id: str, at: float) -> list:
    return queued(service(op_id), op_id=op_id, queue="nb", at=t(at))


def test_at_most_max_services_run_at_once_and_the_next_waits_saying_so():
    state = fold(*[queued_service(f"s{n}", n) for n in range(1, 4)], queued(op("j").build(), op_id="j", queue="nb",
                                                                             at=t(4)))
    assert admitted_ids(cycle.decide(state, CAPPED, t(10), "opsched")) == ["s1", "s2", "j"]  # a job is not capped
    said = pending(Reason.MAX_SERVICES, queue="nb", running=2, limit=2)
    assert state.ops["s3"].blocked == [said]
    assert queries.why(state, CAPPED, "s3", t(10)).reasons == [said]
    fold(running("s1", at=t(11)), running("s2", at=t(11)), state=state)
    assert cycle.decide(state, CAPPED, t(12), "opsched") == []  # the queue is parked: nothing it waits on moved
    fold(stopped("s1", at=t(20)), state=state)
    assert admitted_ids(cycle.decide(state, CAPPED, t(21), "opsched")) == ["s3"]


def test_a_service_that_ended_or_was_preempted_gives_its_place_back():
    b = book(queue("nb", services=Services(max_services=1)))
    state = fold(queued_service("s1", 1), queued_service("s2", 2))
    assert admitted_ids(cycle.decide(state, b, t(10), "opsched")) == ["s1"]
    fold(running("s1", at=t(11)), succeeded("s1", at=t(12)), state=state)  # a service that ended on its own
    assert admitted_ids(cycle.decide(state, b, t(13), "opsched")) == ["s2"]
    assert state.ops["s2"].status == Status.ADMITTED


def test_the_room_a_preempted_service_left_is_held_for_its_preemptor():
    """A preempted service's place under maxServices is held, like its quota, until its preemptor is admitted."""
    b = book(queue("nb", services=Services(max_services=1)), priority_classes=CLASSES)
    state = fold(queued(service("lo", preemptible=True), op_id="lo", queue="nb", at=t(1)))
    assert admitted_ids(cycle.decide(state, b, t(2), "opsched")) == ["lo"]
    fold(running("lo", at=t(3)), state=state)
    fold(queued(service("hi", priority=10), op_id="hi", queue="nb", at=t(4)), state=state)
    assert victims(cycle.decide(state, b, t(5), "opsched")) == ["lo"]  # a service is a service's victim
    fold(queued(service("late", priority=10), op_id="late", queue="nb", at=t(6)),
         preempted("lo", at=t(7), preemptor="hi"), state=state)
    assert snapshot_of(state, b, t(8)).services["nb"] == 1  # lo is gone; its place is held for hi
    assert admitted_ids(cycle.decide(state, b, t(8), "opsched")) == ["hi"]  # not "late", not "lo"


# ---- validation ---------------------------------------------------------------------------------

def queues_text(services: str, extra: str = "") -> str:
    return ("priorityClasses: [{name: interactive, value: 500}, {name: normal, value: 100}]\n"
            f"queues:\n  - {{name: default, {extra}services: {services}}}\n")


@pytest.mark.parametrize("c", [
    case("an unknown key", text=queues_text("{maxService: 2}"),
         says=["unknown field `maxService`", "queues[0].services"]),
    case("an undefined class", text=queues_text("{defaultPriorityClass: urgent}"),
         says=["queues[0].services.defaultPriorityClass: unknown priority class 'urgent' (known: interactive, "
               "normal)"]),
    case("a class above the queue's maximum", text=queues_text("{defaultPriorityClass: interactive}",
                                                               "maxPriorityClass: normal, "),
         says=["queues[0].services.defaultPriorityClass: 'interactive' (500) is above the queue's maxPriorityClass "
               "'normal' (100)"]),
    case("a cap of zero", text=queues_text("{maxServices: 0}"), says=["queues[0].services.maxServices", ">= 1"]),
    case("preemptible that is not a boolean", text=queues_text("{defaultPreemptible: sometimes}"),
         says=["queues[0].services.defaultPreemptible", "bool"]),
], ids=case_name)
def test_a_bad_services_setting_is_refused_naming_it(c):
    with pytest.raises(QueuesConfigError) as info:
        parse_queues(c.text, "q.yaml")
    for text in c.says:
        assert text in str(info.value)


def test_a_good_services_setting_is_read():
    config = parse_queues(queues_text("{maxServices: 3, defaultPriorityClass: interactive, defaultPreemptible: "
                                      "false}"))
    assert config.queues[0].services == Services(max_services=3, default_priority_class="interactive",
                                                 default_preemptible=False)
    assert parse_queues("queues: [{name: default}]\n").queues[0].services == Services()


def test_opsched_queues_shows_the_services_a_queue_runs_and_its_cap():
    state = fold(*[queued_service(f"s{n}", n) for n in range(1, 4)])
    cycle.decide(state, CAPPED, t(10), "opsched")
    (status,) = queries.queues(state, CAPPED).queues
    assert (status.running, status.services, status.max_services) == (2, 2, 2)
    assert "2/10 (2/2 services)" in queues_table(queries.queues(state, CAPPED))
    assert "services" not in queues_table(queries.queues(AdmissionState(), book(queue("plain")))).split("\n")[1]
