"""Named priority classes resolved at submit, their validation, and fair sharing between the queues
of a cohort (weighted dominant-resource share)."""
from __future__ import annotations

import pytest

from opsched.bus import logging as oplog
from opsched.proto.events import OperationAdmitted, OperationRejected, OperationSubmitted
from opsched.proto.queues import FairSharing
from opsched.rules.queues_file import QueuesConfigError, parse_queues
from opsched.services.admission import cycle
from opsched.services.admission.handlers import on_submit
from opsched.services.admission.policies.fairshare import queue_order, share
from opsched.services.admission.state.admission_state import AdmissionState, snapshot_of
from opsched.services.admission.state.snapshot import Snapshot
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import (
    GPU,
    T0,
    book,
    case,
    case_name,
    fold,
    gates_cleared,
    node,
    op,
    queue,
    queued,
    running,
    submit,
    t,
)
from tests.builders.clock import FakeClock

FAIR = FairSharing(enabled=True)


@pytest.fixture
def ctx() -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))


# ---- priority classes -------------------------------------------------------------------------

CLASSES = book(queue("q", default_priority_class="low"), queue("plain"), queue("urgent", default_priority_class="high"),
               priority_classes={"high": 100, "low": -5, "normal": 0})


@pytest.mark.parametrize("c", [
    case("an op naming a class gets the class's value", spec=op("x").queue("plain").priority_class("high"),
         priority=100),
    case("the class wins over the op's own number", spec=op("x").queue("plain").priority_class("high").priority(7),
         priority=100),
    case("a class with value 0 is honoured over the queue default",
         spec=op("x").queue("urgent").priority_class("normal"), priority=0),
    case("an op without a class gets its own number", spec=op("x").queue("plain").priority(7), priority=7),
    case("its own number wins over the queue default", spec=op("x").queue("q").priority(7), priority=7),
    case("a negative number of its own is kept", spec=op("x").queue("urgent").priority(-3), priority=-3),
    case("an op with neither gets its queue's default class", spec=op("x").queue("q"), priority=-5),
    case("another queue's default class applies to its ops", spec=op("x").queue("urgent"), priority=100),
    case("without a default class the priority is 0", spec=op("x").queue("plain"), priority=0),
    case("an op routed to the default queue gets that queue's default class", spec=op("x"), priority=-5),
], ids=case_name)
def test_on_submit_resolves_the_op_priority(c, ctx):
    event = on_submit(submit(c.spec.build(), op_id="x"), ctx, AdmissionState(), CLASSES)
    assert isinstance(event, OperationSubmitted)
    assert event.priority == c.priority
    state = fold(event)
    assert state.ops["x"].priority == c.priority


@pytest.mark.parametrize("c", [
    case("an unknown class is rejected, listing the known ones", book=CLASSES,
         message="unknown priority class 'nope'; known: high, low, normal"),
    case("with no classes defined the message says so", book=book(queue("q")),
         message="unknown priority class 'nope'; known: none defined"),
], ids=case_name)
def test_on_submit_rejects_an_unknown_priority_class(c, ctx):
    event = on_submit(submit(op("x").queue("q").priority_class("nope").priority(3).build(), op_id="x"), ctx,
                      AdmissionState(), c.book)
    assert isinstance(event, OperationRejected)
    assert (event.op_id, event.reason, event.message) == ("x", "unknown_priority_class", c.message)


def test_the_resolved_priority_orders_the_queue(ctx):
    b = book(queue("q", gpus={"h100": 1}), priority_classes={"high": 50})
    state = AdmissionState()
    for op_id, spec in (("first", op("first").queue("q").priority(10)),
                        ("second", op("second").queue("q").priority_class("high"))):
        fold(on_submit(submit(spec.gpus(1).build(), op_id=op_id), ctx, state, b), gates_cleared(op_id), state=state)
        ctx.clock.advance(1)
    (decision,) = cycle.decide(state, b, t(10), "opsched")
    assert (decision.op_id, decision.effective_priority) == ("second", 50)


@pytest.mark.parametrize("c", [
    case("a class defined twice is refused",
         yaml="priorityClasses: [{name: high, value: 10}, {name: high, value: 20}]\n"
              "queues: [{name: default}]",
         problem="priorityClasses: the name 'high' is used twice"),
    case("a queue's unknown default class is refused, listing the known ones",
         yaml="priorityClasses: [{name: high, value: 10}, {name: low, value: 1}]\n"
              "queues: [{name: default}, {name: gpu, defaultPriorityClass: urgent}]",
         problem="queues[1].defaultPriorityClass: unknown priority class 'urgent' (known: high, low)"),
    case("a default class with no classes defined is refused",
         yaml="queues: [{name: default, defaultPriorityClass: high}]",
         problem="queues[0].defaultPriorityClass: unknown priority class 'high' (known: none)"),
    case("a class without a value is refused", yaml="priorityClasses: [{name: high}]\nqueues: [{name: default}]",
         problem="value"),
    case("a misspelt class field is refused",
         yaml="priorityClasses: [{name: high, value: 1, valeu: 2}]\nqueues: [{name: default}]",
         problem="valeu"),
], ids=case_name)
def test_priority_class_configuration_is_validated(c):
    with pytest.raises(QueuesConfigError) as err:
        parse_queues(c.yaml, "queues.yaml")
    assert c.problem in str(err.value)


def test_a_valid_priority_class_configuration_is_read_with_its_wire_names():
    config = parse_queues("priorityClasses: [{name: high, value: 10, description: on call}]\n"
                          "queues: [{name: default, defaultPriorityClass: high, weight: 2.5}]\n"
                          "fairSharing: {enabled: true}")
    assert [(c.name, c.value, c.description) for c in config.priority_classes] == [("high", 10, "on call")]
    assert (config.queues[0].default_priority_class, config.queues[0].weight) == ("high", 2.5)
    assert config.fair_sharing.enabled


def test_a_queue_weight_must_be_positive():
    with pytest.raises(QueuesConfigError, match="weight"):
        parse_queues("queues: [{name: default, weight: 0}]")


# ---- the share --------------------------------------------------------------------------------

def snap_with(b, usage: dict[str, dict[tuple[str, str], float]]) -> Snapshot:
    snap = snapshot_of(AdmissionState(), b)
    for q, used in usage.items():
        for key, amount in used.items():
            snap.usage[q][key] = amount
    return snap


H100 = (GPU, "h100")
CPU = ("cpu", "default")


def lab(a: dict | None = None, b: dict | None = None, fair: bool = True, **extra) -> object:
    quotas = {"resources": {GPU: {"h100": 4}, "cpu": {"default": 16}}}
    return book(queue("a", cohort="lab", **quotas, **(a or {})), queue("b", cohort="lab", **quotas, **(b or {})),
                *extra.get("queues", []), fair_sharing=FAIR if fair else None)


@pytest.mark.parametrize("c", [
    case("the share is usage over the cohort's nominal total", book=lab(), usage={"a": {H100: 2}}, queue="a",
         share=2 / 8),
    case("the dominant resource counts", book=lab(), usage={"a": {H100: 2, CPU: 24}}, queue="a", share=24 / 32),
    case("the weight divides the share", book=lab(a={"weight": 3}), usage={"a": {H100: 2, CPU: 24}}, queue="a",
         share=24 / 32 / 3),
    case("a weight below one multiplies it", book=lab(a={"weight": 0.5}), usage={"a": {H100: 2}}, queue="a",
         share=2 / 8 / 0.5),
    case("an idle queue has no share", book=lab(), usage={"a": {H100: 4}}, queue="b", share=0),
    case("a queue with no quota has no share", book=lab(queues=[queue("c", cohort="lab")]), usage={"a": {H100: 4}},
         queue="c", share=0),
    case("a queue without a cohort is measured against its own nominal",
         book=book(queue("solo", gpus={"h100": 4})), usage={"solo": {H100: 1}}, queue="solo", share=1 / 4),
    case("a queue borrowing beyond the cohort's nominal has a share above one",
         book=lab(), usage={"a": {H100: 10}}, queue="a", share=10 / 8),
], ids=case_name)
def test_share_is_the_weighted_dominant_resource_share_in_the_cohort(c):
    assert share(c.book, snap_with(c.book, c.usage), c.queue) == pytest.approx(c.share)


# ---- the order queues are walked in -----------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("without fair sharing the order is queue priority then name, whatever the usage",
         book=lab(a={"priority": 0}, b={"priority": 5}, fair=False,
                  queues=[queue("c", cohort="lab", gpus={"h100": 4})]),
         usage={"b": {H100: 4}}, order=["b", "a", "c"]),
    case("with fair sharing the queue with the lower share goes first",
         book=lab(), usage={"a": {H100: 3}, "b": {H100: 1}}, order=["b", "a"]),
    case("with fair sharing the dominant resource decides",
         book=lab(), usage={"a": {H100: 3}, "b": {H100: 1, CPU: 16}}, order=["a", "b"]),
    case("weights matter: a heavier queue may use more before it goes second",
         book=lab(a={"weight": 4}), usage={"a": {H100: 3}, "b": {H100: 1}}, order=["a", "b"]),
    case("with equal shares the name decides", book=lab(), usage={"a": {H100: 2}, "b": {H100: 2}}, order=["a", "b"]),
], ids=case_name)
def test_queues_are_walked_in_fair_share_order_when_enabled(c):
    assert queue_order(c.book, snap_with(c.book, c.usage), AdmissionState().usage) == c.order


def test_with_fair_sharing_the_share_decides_instead_of_the_queue_priority():
    b = lab(a={"priority": 10})
    assert queue_order(b, snap_with(b, {"a": {H100: 3}, "b": {H100: 1}}), AdmissionState().usage) == ["b", "a"]


# ---- fair sharing through the cycle -----------------------------------------------------------

def gpu_op(op_id: str, gpus: int, *, queue: str, at: float = 0) -> list:
    return queued(op(op_id).gpus(gpus).build(), op_id=op_id, queue=queue, at=t(at))


def admitted_ids(decisions) -> list[str]:
    return [d.op_id for d in decisions if isinstance(d, OperationAdmitted)]


@pytest.mark.parametrize("c", [
    case("without fair sharing queue a (first by name) takes the last free GPU", fair=False, weight=1,
         admitted=["a1"]),
    case("with fair sharing queue b (the lower share) takes it", fair=True, weight=1, admitted=["b1"]),
    case("with fair sharing and a heavy weight on a, queue a takes it", fair=True, weight=4, admitted=["a1"]),
], ids=case_name)
def test_the_queue_with_the_lower_share_gets_scarce_node_capacity_first(c):
    b = book(queue("a", cohort="lab", gpus={"h100": 4}, weight=c.weight), queue("b", cohort="lab", gpus={"h100": 4}),
             fair_sharing=FAIR if c.fair else None)
    state = fold(node("h-1", gpus=4, product="H100"), gpu_op("a0", 2, queue="a"), gpu_op("b0", 1, queue="b"))
    assert sorted(admitted_ids(cycle.decide(state, b, t(1), "opsched"))) == ["a0", "b0"]
    fold(running("a0", at=t(2), node="h-1"), running("b0", at=t(2), node="h-1"),
         gpu_op("a1", 1, queue="a", at=10), gpu_op("b1", 1, queue="b", at=11), state=state)
    assert admitted_ids(cycle.decide(state, b, t(20), "opsched")) == c.admitted


def borrowers_book(fair: bool) -> object:
    return book(queue("a", cohort="lab", gpus={"h100": 2}), queue("b", cohort="lab", gpus={"h100": 2}),
                queue("c", cohort="lab", gpus={"h100": 2}), fair_sharing=FAIR if fair else None)


def test_without_fair_sharing_borrowers_go_in_queue_order():
    b = borrowers_book(fair=False)
    state = fold(gpu_op("a0", 2, queue="a"))
    assert admitted_ids(cycle.decide(state, b, t(1), "opsched")) == ["a0"]
    fold(gpu_op("a1", 2, queue="a", at=10), gpu_op("b1", 4, queue="b", at=11), state=state)
    assert admitted_ids(cycle.decide(state, b, t(20), "opsched")) == ["a1"]


def test_with_fair_sharing_the_borrower_of_the_queue_with_the_lower_share_goes_first():
    b = borrowers_book(fair=True)
    state = fold(gpu_op("a0", 2, queue="a"))
    assert admitted_ids(cycle.decide(state, b, t(1), "opsched")) == ["a0"]
    # a holds 2 of the cohort's 6 (share 1/3), b nothing: b's borrower goes first and takes the 4 left
    fold(gpu_op("a1", 2, queue="a", at=10), gpu_op("b1", 4, queue="b", at=11), state=state)
    assert admitted_ids(cycle.decide(state, b, t(20), "opsched")) == ["b1"]


def test_with_fair_sharing_shares_are_updated_as_borrowers_are_admitted():
    b = book(queue("a", cohort="lab", gpus={"h100": 1}), queue("b", cohort="lab", gpus={"h100": 1}),
             queue("c", cohort="lab", gpus={"h100": 2}), fair_sharing=FAIR)
    state = fold(*[gpu_op(f"{q}{n}", 1, queue=q, at=n) for q in "ab" for n in range(1, 4)])
    decisions = cycle.decide(state, b, t(10), "opsched")
    # within nominal: a1, b1; then 2 to lend, one each: a2 (tie broken by name) then b2
    assert sorted(admitted_ids(decisions)) == ["a1", "a2", "b1", "b2"]
