"""Preemption: what protects a running op (cooldown, minimum runtime), which waiting ops may preempt
at all (only for a reason preemption can resolve), and victims chosen to free a node."""
from __future__ import annotations

import pytest

from opsched.services.admission import cycle
from opsched.services.admission.state.admission_state import AdmissionState
from tests.builders import (
    book,
    case,
    case_name,
    evicted,
    fold,
    node,
    preempted,
    queue,
    running,
    t,
)
from tests.unit.preemption_scenarios import (
    Q1,
    admitted_ids,
    codes,
    decide,
    gpu_op,
    q1,
    start,
    victims,
)

# ---- protection: cooldown and minimum runtime ------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a victim preempted less than the cooldown ago is not chosen again", now=130, victims=[]),
    case("once the cooldown has passed it may be chosen again", now=170, victims=["lo"]),
    case("a longer cooldown protects it longer", now=170, cooldown=300, victims=[]),
    case("without a cooldown it may be chosen at once", now=130, cooldown=0, victims=["lo"]),
], ids=case_name)
def test_a_recently_preempted_op_is_protected_for_the_cooldown(c):
    b = q1(cooldown_seconds=c.args.get("cooldown", 60))
    state = fold(gpu_op("lo", 1))
    start(state, b, 0, "lo")
    fold(preempted("lo", at=t(100), attempt=0, preemptor="someone"), state=state)
    start(state, b, 110, "lo")
    fold(gpu_op("hi", 1, priority=10, at=120), state=state)
    assert victims(decide(state, b, t(c.now))) == c.victims


@pytest.mark.parametrize("c", [
    case("an op running for less than minRuntime is protected", now=200, victims=[]),
    case("the minimum runtime counts from when it started running, not from its admission",
         now=305, victims=[]),
    case("an op that has run for minRuntime may be preempted", now=320, victims=["lo"]),
    case("an admitted op not yet running counts from its admission", now=305, running_at=None, victims=["lo"]),
], ids=case_name)
def test_min_runtime_protects_a_just_started_op(c):
    b = q1(min_runtime_seconds=300)
    state = fold(gpu_op("lo", 1))
    assert admitted_ids(decide(state, b, t(0))) == ["lo"]
    running_at = c.args.get("running_at", 10)
    if running_at is not None:
        fold(running("lo", at=t(running_at), node=None), state=state)
    fold(gpu_op("hi", 1, priority=10, at=100), state=state)
    assert victims(decide(state, b, t(c.now))) == c.victims


# ---- only resolvable reasons trigger a preemption ---------------------------------------------

@pytest.mark.parametrize("c", [
    case("while it backs off after an eviction it does not preempt", now=60, victims=[], codes=["backoff"]),
    case("after the back-off it does", now=320, victims=["lo"], codes=["waiting_for_victims"]),
], ids=case_name)
def test_an_op_in_backoff_does_not_preempt(c):
    state = fold(gpu_op("hi", 1, priority=10))
    start(state, Q1, 0, "hi")
    fold(evicted("hi", at=t(10), retry_after_s=300), gpu_op("lo", 1, at=5), state=state)
    start(state, Q1, 20, "lo")
    assert victims(decide(state, Q1, t(c.now))) == c.victims
    assert codes(state, "hi") == c.codes


def test_ops_blocked_by_a_reason_preemption_cannot_resolve_do_not_use_up_the_cycles_plans():
    state = AdmissionState()
    backing_off = [f"b{n}" for n in range(cycle.PREEMPTION_PLANS_PER_CYCLE + 1)]
    for n, op_id in enumerate(backing_off):  # each admitted, then evicted with a long back-off
        fold(gpu_op(op_id, 1, priority=20, at=n), state=state)
        start(state, Q1, n, op_id)
        fold(evicted(op_id, at=t(n + 0.5), retry_after_s=3600), state=state)
    fold(gpu_op("lo", 1, at=10), state=state)
    start(state, Q1, 10, "lo")
    fold(gpu_op("hi", 1, priority=10, at=20), state=state)
    assert victims(decide(state, Q1, t(60))) == ["lo"]  # hi comes after every op in back-off
    assert all(codes(state, op_id) == ["backoff"] for op_id in backing_off)


def test_an_op_no_node_could_ever_fit_does_not_preempt():
    b = book(queue("q", gpus={"h100": 16}), reject_unfittable=False)
    state = fold(node("h-1", gpus=2, product="H100"), gpu_op("lo", 2))
    start(state, b, 0, "lo", nodes={"lo": "h-1"})
    fold(gpu_op("hi", 4, priority=10, at=10), state=state)
    assert decide(state, b, t(20)) == []
    assert codes(state, "hi") == ["unfittable"]
    assert state.ops["lo"].preempted_by is None


# ---- node capacity ----------------------------------------------------------------------------

def test_a_victim_on_a_full_node_is_preempted_to_free_that_node():
    b = book(queue("q", gpus={"h100": 16}))
    state = fold(node("h-1", gpus=2, product="H100"), node("h-2", gpus=2, product="H100"), gpu_op("lo1", 2))
    start(state, b, 10, "lo1", nodes={"lo1": "h-1"})
    fold(gpu_op("lo2", 1, at=11), gpu_op("keep", 1, priority=20, at=11), state=state)
    start(state, b, 12, "keep", "lo2", nodes={"lo2": "h-2", "keep": "h-2"})
    # lo2 is the most recently admitted: taken first, but it frees too little and is dropped again
    fold(gpu_op("hi", 2, priority=10, at=20), state=state)

    decisions = decide(state, b, t(30))
    assert victims(decisions) == ["lo1"]
    assert codes(state, "hi") == ["waiting_for_victims"]
    fold(preempted("lo1", at=t(40), preemptor="hi"), state=state)
    assert admitted_ids(decide(state, b, t(50))) == ["hi"]


def test_without_a_victim_that_frees_a_node_nothing_is_preempted():
    b = book(queue("q", gpus={"h100": 16}))
    state = fold(node("h-1", gpus=2, product="H100"), node("h-2", gpus=2, product="H100"),
                 gpu_op("lo1", 1), gpu_op("top1", 1, priority=20, at=1),
                 gpu_op("lo2", 1, at=2), gpu_op("top2", 1, priority=20, at=3))
    start(state, b, 10, "top1", "top2", "lo1", "lo2",
          nodes={"lo1": "h-1", "top1": "h-1", "lo2": "h-2", "top2": "h-2"})
    fold(gpu_op("hi", 2, priority=10, at=20), state=state)
    assert decide(state, b, t(30)) == []
    assert codes(state, "hi") == ["no_capacity"]
