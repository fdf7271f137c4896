"""Admission: one scheduling cycle: ordering, the cost and cache gates, concurrency, assume/unassume."""
from __future__ import annotations

import inspect
import re

import msgspec
import pytest

from opsched.proto.events import OperationAdmitted, OperationSucceeded
from opsched.proto.queues import Queue as QueueConfig
from opsched.proto.queues import QueuesConfig
from opsched.proto.spec import OpSpec
from opsched.services.admission import cycle
from opsched.services.admission.model.ordering import sort_key
from opsched.services.admission.model.queues import compile_book
from opsched.services.admission.state.admission_state import AdmissionState, Status
from tests.builders import (
    T0,
    cache_hit,
    cache_missed,
    case,
    case_name,
    cost_estimated,
    dispatched,
    failed,
    op,
    running,
    stopped,
    submitted,
    succeeded,
    t,
)
from tests.unit.admission_scenarios import NS, admitted_ids, decide, fold, queues, ready

# ---- ordering ---------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a higher priority goes first even if submitted later",
         ops=[("low", 0, 0), ("high", 10, 5)], order=["high", "low"]),
    case("at equal priority the earlier submission goes first",
         ops=[("late", 1, 9), ("early", 1, 1)], order=["early", "late"]),
    case("at equal priority and time the op id decides",
         ops=[("op-b", 0, 0), ("op-a", 0, 0)], order=["op-a", "op-b"]),
    case("negative priorities go after the default",
         ops=[("neg", -5, 0), ("zero", 0, 3)], order=["zero", "neg"]),
], ids=case_name)
def test_ordering_is_priority_then_submit_time_then_id(c):
    """One op per requester: each has fair rank 0 (``test_fair_ordering``: several ops of one requester)."""
    keys = {name: sort_key(priority, 0, t(at), name) for name, priority, at in c.ops}
    assert sorted(keys, key=keys.get) == c.order

    state = fold(*[ready(name, priority=priority, at=t(at), by=name) for name, priority, at in c.ops])
    assert admitted_ids(decide(state)) == c.order



# ---- gates ------------------------------------------------------------------------------------

def cached(name: str) -> OpSpec:
    """An op that uses the cache (``rules.caching``: an op of a batch, by default)."""
    return msgspec.structs.replace(op(name).build(), batch="sweep-1")


@pytest.mark.parametrize("c", [
    case("nothing is admitted right after submission", spec=cached("a"), gates=[]),
    case("a cost estimate alone is not enough", spec=cached("a"), gates=[cost_estimated("a")]),
    case("a cache miss alone is not enough", spec=cached("a"), gates=[cache_missed("a")]),
    case("caching off: nothing is admitted before the cost estimate", spec=op("a").build(), gates=[]),
    case("caching off: an old stream's miss alone is not enough", spec=op("a").build(),
         gates=[cache_missed("a", reason="disabled")]),
], ids=case_name)
def test_an_op_waits_for_both_the_cost_estimate_and_the_cache_answer(c):
    state = fold(submitted(c.spec, op_id="a"), *c.gates)
    assert decide(state) == []
    assert state.ops["a"].status == Status.PENDING


@pytest.mark.parametrize("c", [
    case("cost first, then cache", spec=cached("a"), gates=[cost_estimated("a"), cache_missed("a")]),
    case("cache first, then cost", spec=cached("a"), gates=[cache_missed("a"), cost_estimated("a")]),
    case("caching off: the cost estimate alone (the cache gate answered at submitted)", spec=op("a").build(),
         gates=[cost_estimated("a")]),
    case("caching off on an old stream: the miss disabled before the estimate", spec=op("a").build(),
         gates=[cache_missed("a", reason="disabled"), cost_estimated("a")]),
    case("caching off on an old stream: the miss disabled after the estimate", spec=op("a").build(),
         gates=[cost_estimated("a"), cache_missed("a", reason="disabled")]),
], ids=case_name)
def test_an_op_is_admitted_once_both_gates_cleared_in_any_order(c):
    state = fold(submitted(c.spec, op_id="a"), *c.gates)
    assert state.ops["a"].status == Status.PENDING and list(state.queues.cleared) == ["a"]  # the cycle queues it
    (decision,) = decide(state)
    assert isinstance(decision, OperationAdmitted)
    assert (decision.op_id, decision.queue, decision.namespace, decision.pod_name) == ("a", "default", NS, "op-a-0")
    assert decision.at == T0


def test_the_queue_namespace_wins_over_the_default_namespace():
    config = compile_book(QueuesConfig(queues=[QueueConfig(name="default", namespace="team-a")]))
    (decision,) = cycle.decide(fold(ready("a")), config, T0, NS)
    assert decision.namespace == "team-a"


@pytest.mark.parametrize("c", [
    case("a cache hit before the cost estimate", events=[cache_hit("a", original="old")]),
    case("a cache hit after the cost estimate", events=[cost_estimated("a"), cache_hit("a", original="old")]),
], ids=case_name)
def test_a_cache_hit_ends_the_op_succeeded_and_admits_nothing(c):
    state = fold(submitted(op("a").build(), op_id="a"), *c.events)
    decisions = decide(state, now=t(3))
    assert decisions == [OperationSucceeded(op_id="a", at=t(3), reason=cycle.CACHE_HIT_REASON)]
    assert state.ops["a"].status == Status.SUCCEEDED
    assert state.ops["a"].history.cache_hit_of == "old"
    assert decide(state) == []


def test_a_cache_hit_already_finished_on_replay_is_not_finished_twice():
    state = fold(submitted(op("a").build(), op_id="a"), cache_hit("a"),
                 succeeded("a", reason=cycle.CACHE_HIT_REASON))
    assert decide(state) == []


def test_gates_of_an_unknown_op_change_nothing():
    state = AdmissionState()
    assert state.apply(cost_estimated("ghost")) is False
    assert state.apply(running("ghost")) is False
    assert state.ops == {}


# ---- concurrency and the cycle ----------------------------------------------------------------

def test_a_queue_with_concurrency_one_admits_the_next_op_only_after_the_first_ends():
    config = queues(("solo", 1))
    state = fold(*[ready(i, queue="solo", at=t(n)) for n, i in enumerate(["a", "b", "c"])])

    assert admitted_ids(decide(state, config)) == ["a"]
    assert decide(state, config) == []  # the slot is taken
    fold(dispatched("a"), running("a"), state=state)
    assert decide(state, config) == []
    fold(succeeded("a"), state=state)
    assert admitted_ids(decide(state, config)) == ["b"]
    fold(failed("b"), state=state)
    assert admitted_ids(decide(state, config)) == ["c"]


def test_many_ops_are_admitted_in_one_cycle_when_slots_allow():
    state = fold(*[ready(f"op-{n}", at=t(n)) for n in range(5)])
    assert admitted_ids(decide(state, queues(("default", 3)))) == ["op-0", "op-1", "op-2"]
    assert {i for i, o in state.ops.items() if o.status == Status.ADMITTED} == {"op-0", "op-1", "op-2"}


def test_a_cycle_fills_every_queue_higher_queue_priority_first():
    config = queues(("low", 2, 0), ("high", 1, 10))
    state = fold(ready("l1", queue="low"), ready("l2", queue="low"), ready("l3", queue="low"),
                 ready("h1", queue="high"), ready("h2", queue="high"))
    assert admitted_ids(decide(state, config)) == ["h1", "l1", "l2"]


def test_an_admission_is_assumed_in_state_before_it_is_published():
    state = fold(ready("a"))
    decide(state)
    op_ = state.ops["a"]
    assert op_.status == Status.ADMITTED and op_.pod_name == "op-a-0" and op_.namespace == NS
    assert state.usage.active.get("default", set()) == {"a"}


def test_unassume_puts_an_op_back_in_its_queue():
    config = queues(("default", 1))
    state = fold(ready("a"), ready("b", at=t(1)))
    assert admitted_ids(decide(state, config)) == ["a"]
    state.fold.unassume("a")
    assert state.ops["a"].status == Status.QUEUED
    assert state.usage.active.get("default", set()) == set()
    assert admitted_ids(decide(state, config)) == ["a"]


def test_unassume_leaves_an_op_that_moved_on_alone():
    state = fold(ready("a"))
    decide(state)
    fold(running("a"), state=state)
    state.fold.unassume("a")
    assert state.ops["a"].status == Status.RUNNING


def test_a_stopped_queued_op_is_skipped_by_the_cycle():
    state = fold(ready("a"), ready("b", at=t(1)), stopped("a"))
    assert admitted_ids(decide(state)) == ["b"]


def test_ops_of_a_queue_no_longer_configured_are_left_waiting():
    state = fold(ready("a", queue="gone"))
    assert decide(state, queues(("default", 5))) == []


def test_the_cycles_docstring_numbers_the_steps_run_takes():
    """The module's docstring lists the steps of ``Cycle.run``, numbered as the comments in ``run`` number them."""
    listed = [int(n) for n in re.findall(r"^(\d+)\. ", cycle.__doc__ or "", re.M)]
    taken = [int(n) for n in re.findall(r"# (\d+)$", inspect.getsource(cycle.Cycle.run), re.M)]
    assert listed == taken == list(range(1, len(listed) + 1)) and len(listed) > 5

