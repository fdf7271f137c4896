"""The `why` and `queues` queries, routing an op to its queue, and maxQueued on submit."""
from __future__ import annotations

import msgspec
import pytest

from opsched.bus import logging as oplog
from opsched.proto.events import OperationRejected, OperationSubmitted
from opsched.proto.queries import FlavorUsage
from opsched.services.admission import cycle, queries
from opsched.services.admission.handlers import on_submit
from opsched.services.admission.policies.routing import route
from opsched.services.admission.state.admission_state import AdmissionState, Status
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import (
    GPU,
    T0,
    book,
    cache_missed,
    case,
    case_name,
    cost_estimated,
    fold,
    op,
    queue,
    queued,
    quota,
    submit,
    submitted,
    succeeded,
    t,
)
from tests.builders.clock import FakeClock

NS = "opsched"


def decide(state: AdmissionState, b) -> list:
    return cycle.decide(state, b, T0, NS)


def gpu_op(op_id: str, gpus: int, *, queue: str, at: float = 0, amount: float = 1.0) -> list:
    return queued(op(op_id).gpus(gpus).build(), op_id=op_id, queue=queue, at=t(at), amount=amount)


@pytest.fixture
def ctx() -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))


# ---- why --------------------------------------------------------------------------------------

SWEPT = msgspec.structs.replace(op("x").build(), batch="sweep-1")  # an op of a batch: it uses the cache
PLAIN = op("x").build()  # caching off: its cache gate is answered at its submitted


@pytest.mark.parametrize("c", [
    case("a just-submitted op waits for both the cost estimate and the cache",
         spec=SWEPT, gates=[], codes=["waiting_cost_estimate", "waiting_cache"]),
    case("an op with its cost estimate waits for the cache", spec=SWEPT, gates=[cost_estimated("x")],
         codes=["waiting_cache"]),
    case("an op with its cache answer waits for the cost estimate",
         spec=SWEPT, gates=[cache_missed("x")], codes=["waiting_cost_estimate"]),
    case("an op with caching off waits only for the cost estimate", spec=PLAIN, gates=[],
         codes=["waiting_cost_estimate"]),
], ids=case_name)
def test_why_a_pending_op_names_the_gates_it_waits_for(c):
    b = book(queue("default"))
    state = fold(submitted(c.spec, op_id="x"), *c.gates)
    answer = queries.why(state, b, "x")
    assert (answer.found, answer.status, answer.queue) == (True, "pending", "default")
    assert [r.code for r in answer.reasons] == c.codes
    assert answer.position is None


def test_why_a_queued_op_blocked_by_concurrency_gives_the_reason_and_its_position():
    b = book(queue("solo", concurrency=1))
    state = fold(*[gpu_op(i, 0, queue="solo", at=n) for n, i in enumerate(["a", "b", "c", "d"])])
    decide(state, b)
    answer = queries.why(state, b, "c")
    assert (answer.status, answer.position, answer.queued_total) == ("queued", 2, 3)
    assert answer.reasons[0].code == "queue_concurrency"
    assert "concurrency reached (1/1)" in answer.reasons[0].message
    assert [r.code for r in answer.reasons] == ["queue_concurrency", "queue_position"]
    assert "1 op(s) ahead of it in queue solo" in answer.reasons[1].message

    head = queries.why(state, b, "b")
    assert (head.position, [r.code for r in head.reasons]) == (1, ["queue_concurrency"])
    assert queries.why(state, b, "d").position == 3


def test_why_a_quota_blocked_op_names_the_flavor():
    b = book(queue("gpu", gpus={"h100": 2}))
    state = fold(gpu_op("a", 2, queue="gpu"), gpu_op("b", 1, queue="gpu", at=1))
    decide(state, b)
    answer = queries.why(state, b, "b")
    assert answer.reasons[0].code == "quota_exhausted"
    assert "nvidia.com/gpu flavor h100" in answer.reasons[0].message
    assert "2/2 used, needs 1" in answer.reasons[0].message


def test_why_an_op_that_fits_now_says_the_next_cycle_admits_it():
    b = book(queue("gpu", gpus={"h100": 2}))
    state = fold(gpu_op("a", 1, queue="gpu"))
    assert [r.code for r in queries.why(state, b, "a").reasons] == ["next_cycle"]


def test_why_an_admitted_op_gives_its_status_and_no_reasons():
    b = book(queue("gpu", gpus={"h100": 2}))
    state = fold(gpu_op("a", 1, queue="gpu"))
    decide(state, b)
    answer = queries.why(state, b, "a")
    assert (answer.status, answer.reasons, answer.position) == ("admitted", [], None)


def test_why_an_unknown_op_is_not_found():
    answer = queries.why(AdmissionState(), book(queue("default")), "ghost")
    assert (answer.op_id, answer.found) == ("ghost", False)
    assert [r.code for r in answer.reasons] == ["unknown_op"]


# ---- queues -----------------------------------------------------------------------------------

def test_queues_reports_running_usage_borrowed_pending_and_cost():
    b = book(queue("a", cohort="lab", concurrency=2, cost_quota=10.0, gpus={"h100": 2}),
             queue("b", cohort="lab", priority=5, gpus={"h100": 2}), default="a")
    state = fold(gpu_op("x", 3, queue="a", amount=2.5))
    assert [d.op_id for d in decide(state, b)] == ["x"]
    fold(gpu_op("y", 2, queue="a", at=1), submitted(op("z").build(), op_id="z", queue="a", at=t(2)), state=state)
    decide(state, b)  # y must borrow 2 more: the cohort has only 1 to lend

    answer = queries.queues(state, b)
    assert (answer.default_queue, [q.name for q in answer.queues]) == ("a", ["b", "a"])
    qb, qa = answer.queues
    assert (qa.cohort, qa.running, qa.concurrency, qa.pending) == ("lab", 1, 2, 2)
    assert (qa.cost_used, qa.cost_quota) == (2.5, 10.0)
    assert qa.usage == [FlavorUsage(resource=GPU, flavor="h100", used=3.0, nominal=2.0, borrowed=1.0)]
    assert (qb.running, qb.concurrency, qb.pending, qb.cost_used) == (0, None, 0, 0.0)
    assert qb.usage == [FlavorUsage(resource=GPU, flavor="h100", used=0.0, nominal=2.0, borrowed=0.0)]

    fold(succeeded("x"), state=state)
    qa = queries.queues(state, b).queues[1]
    assert (qa.running, qa.cost_used, qa.usage[0].used, qa.usage[0].borrowed) == (0, 0.0, 0.0, 0.0)


def test_queues_reports_the_borrowing_limit():
    b = book(queue("a", cohort="lab", gpus=[quota("h100", 2, borrow=1)]))
    (usage,) = queries.queues(AdmissionState(), b).queues[0].usage
    assert usage.borrowing_limit == 1.0


# ---- routing ----------------------------------------------------------------------------------

ROUTES = book(queue("cpu"), queue("vision-gpu"), queue("nlp-gpu"), default="cpu",
              projects={"vision": "vision-gpu", "nlp": "nlp-gpu"})


@pytest.mark.parametrize("c", [
    case("an op naming a queue goes to that queue", spec=op("x").queue("nlp-gpu").project("vision"),
         queue="nlp-gpu"),
    case("an op of a project with a default queue goes to the project's queue", spec=op("x").project("vision"),
         queue="vision-gpu"),
    case("an op of another project goes to the global default queue", spec=op("x").project("speech"),
         queue="cpu"),
    case("an op of the default project goes to the global default queue", spec=op("x"), queue="cpu"),
], ids=case_name)
def test_routing(c, ctx):
    spec = c.spec.build()
    assert route(spec, ROUTES) == c.queue
    event = on_submit(submit(spec, op_id="x"), ctx, AdmissionState(), ROUTES)
    assert isinstance(event, OperationSubmitted) and event.queue == c.queue


def test_an_op_naming_an_unknown_queue_is_rejected(ctx):
    event = on_submit(submit(op("x").queue("tpu").build(), op_id="x"), ctx, AdmissionState(), ROUTES)
    assert isinstance(event, OperationRejected) and event.reason == "unknown_queue"


# ---- maxQueued --------------------------------------------------------------------------------

def test_max_queued_rejects_a_third_waiting_op_and_accepts_again_once_one_is_admitted(ctx):
    b = book(queue("q", max_queued=2, concurrency=1), queue("other"))
    state = AdmissionState()
    first = on_submit(submit(op("a").queue("q").build(), op_id="a"), ctx, state, b)
    fold(first, state=state)
    second = on_submit(submit(op("b").queue("q").build(), op_id="b"), ctx, state, b)
    fold(second, state=state)
    assert isinstance(first, OperationSubmitted) and isinstance(second, OperationSubmitted)

    third = on_submit(submit(op("c").queue("q").build(), op_id="c"), ctx, state, b)
    assert isinstance(third, OperationRejected)
    assert (third.op_id, third.reason) == ("c", "queue_full")
    assert "queue q" in third.message and "maxQueued 2" in third.message
    elsewhere = on_submit(submit(op("c").queue("other").build(), op_id="c"), ctx, state, b)
    assert isinstance(elsewhere, OperationSubmitted) and elsewhere.queue == "other"  # the limit is per queue

    fold(cost_estimated("a"), cache_missed("a"), state=state)
    assert [d.op_id for d in decide(state, b)] == ["a"]
    again = on_submit(submit(op("c").queue("q").build(), op_id="c"), ctx, state, b)
    assert isinstance(again, OperationSubmitted) and again.queue == "q"


def test_ops_waiting_for_their_gates_count_towards_max_queued(ctx):
    b = book(queue("q", max_queued=1))
    state = fold(submitted(op("a").build(), op_id="a", queue="q"))
    assert state.ops["a"].status == Status.PENDING
    event = on_submit(submit(op("b").queue("q").build(), op_id="b"), ctx, state, b)
    assert isinstance(event, OperationRejected) and event.reason == "queue_full"


def test_a_max_queued_of_zero_refuses_every_op(ctx):
    event = on_submit(submit(op("a").queue("q").build(), op_id="a"), ctx, AdmissionState(),
                      book(queue("q", max_queued=0)))
    assert isinstance(event, OperationRejected) and "maxQueued 0" in event.message
