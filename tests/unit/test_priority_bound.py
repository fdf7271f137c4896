"""A queue's maximum priority (``maxPriorityClass``): an op naming a number or a class above it is rejected
at submit with ``priority_too_high``, naming the field, the value and the bound; the configuration refuses a
maximum (or a default) class it does not define."""
from __future__ import annotations

import pytest

from opsched.bus import logging as oplog
from opsched.proto.events import OperationRejected, OperationSubmitted
from opsched.proto.limits import MAX_PRIORITY
from opsched.rules.queues_file import QueuesConfigError, parse_queues
from opsched.services.admission.handlers import on_submit
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, book, case, case_name, op, queue, submit
from tests.builders.clock import FakeClock

CLASSES = {"urgent": 1000, "high": 100, "normal": 0}
BOOK = book(queue("capped", max_priority_class="high"), queue("open"), queue("low", default_priority_class="normal"),
            priority_classes=CLASSES)
BARE = book(queue("open"))  # no priority classes at all


@pytest.fixture
def ctx() -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))


@pytest.mark.parametrize("c", [
    case("a number at the queue's maximum class is accepted", spec=op("x").queue("capped").priority(100),
         book=BOOK, priority=100),
    case("a class at the queue's maximum is accepted", spec=op("x").queue("capped").priority_class("high"),
         book=BOOK, priority=100),
    case("without a maximum class a number up to the highest class is accepted",
         spec=op("x").queue("open").priority(1000), book=BOOK, priority=1000),
    case("a negative number is never too high", spec=op("x").queue("capped").priority(-7), book=BOOK, priority=-7),
    case("without any class a number up to MAX_PRIORITY is accepted",
         spec=op("x").queue("open").priority(MAX_PRIORITY), book=BARE, priority=MAX_PRIORITY),
], ids=case_name)
def test_a_priority_within_its_queues_maximum_is_accepted(c, ctx):
    event = on_submit(submit(c.spec.build(), op_id="x"), ctx, AdmissionState(), c.book)
    assert isinstance(event, OperationSubmitted) and event.priority == c.priority


@pytest.mark.parametrize("c", [
    case("a number above the queue's maximum class", spec=op("x").queue("capped").priority(101), book=BOOK,
         message="priority 101 is above queue capped's maximum priority 100 (its maxPriorityClass 'high')"),
    case("a class above the queue's maximum class", spec=op("x").queue("capped").priority_class("urgent"),
         book=BOOK, message="priorityClass 'urgent' (priority 1000) is above queue capped's maximum priority 100 "
                            "(its maxPriorityClass 'high')"),
    case("a number outranking every class, in a queue without a maximum class",
         spec=op("x").queue("open").priority(5000), book=BOOK,
         message="priority 5000 is above queue open's maximum priority 1000 (the highest priority class "
                 "'urgent'; set maxPriorityClass to change it)"),
    case("a number beyond MAX_PRIORITY with no classes defined",
         spec=op("x").queue("open"), raw=MAX_PRIORITY + 1, book=BARE,  # the contract refuses it: defence in depth
         message=f"priority {MAX_PRIORITY + 1} is above queue open's maximum priority {MAX_PRIORITY} (the largest "
                 "priority allowed)"),
], ids=case_name)
def test_a_priority_above_its_queues_maximum_is_rejected_at_submit_naming_the_field_and_the_bound(c, ctx):
    spec = c.spec.build()
    if "raw" in c.args:
        spec.priority = c.raw  # set after building: past any check of the contract's
    event = on_submit(submit(spec, op_id="x"), ctx, AdmissionState(), c.book)
    assert isinstance(event, OperationRejected)
    assert (event.op_id, event.reason, event.message) == ("x", "priority_too_high", c.message)


def test_a_queues_default_class_applies_whatever_the_maximum(ctx):
    event = on_submit(submit(op("x").queue("low").build(), op_id="x"), ctx, AdmissionState(), BOOK)
    assert isinstance(event, OperationSubmitted) and event.priority == 0


CLASSES_YAML = "priorityClasses: [{name: high, value: 100}, {name: low, value: 1}]\n"


@pytest.mark.parametrize("c", [
    case("an unknown maximum class is refused, listing the known ones",
         yaml=CLASSES_YAML + "queues: [{name: default, maxPriorityClass: urgent}]",
         problem="queues[0].maxPriorityClass: unknown priority class 'urgent' (known: high, low)"),
    case("a maximum class with no classes defined is refused",
         yaml="queues: [{name: default, maxPriorityClass: high}]",
         problem="queues[0].maxPriorityClass: unknown priority class 'high' (known: none)"),
    case("a default class above the queue's maximum is refused",
         yaml=CLASSES_YAML + "queues: [{name: default, defaultPriorityClass: high, maxPriorityClass: low}]",
         problem="queues[0].defaultPriorityClass: 'high' (100) is above the queue's maxPriorityClass 'low' (1)"),
    case("a class value beyond MAX_PRIORITY is refused",
         yaml=f"priorityClasses: [{{name: top, value: {2**63}}}]\nqueues: [{{name: default}}]",
         problem=f"priorityClasses[0].value: {2**63} is beyond +-{MAX_PRIORITY} (class 'top')"),
], ids=case_name)
def test_the_queue_config_refuses_a_bad_maximum_priority_class(c):
    with pytest.raises(QueuesConfigError) as info:
        parse_queues(c.yaml, "queues.yaml")
    assert c.problem in str(info.value)


def test_a_known_maximum_class_is_accepted():
    config = parse_queues(CLASSES_YAML + "queues: [{name: default, defaultPriorityClass: low, maxPriorityClass: high}]")
    assert config.queues[0].max_priority_class == "high"
