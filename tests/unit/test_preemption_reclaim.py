"""Preemption: a lender reclaims the quota it lent to borrowers of its cohort."""
from __future__ import annotations

import pytest

from opsched.proto.queues import Preemption
from opsched.services.admission.state.admission_state import AdmissionState, Status
from tests.builders import book, case, case_name, fold, preempted, queue, t
from tests.unit.preemption_scenarios import (
    admitted_ids,
    codes,
    decide,
    gpu_op,
    preemptions,
    start,
    victims,
)

# ---- reclaiming lent quota --------------------------------------------------------------------

def lab(policy: str) -> object:
    return book(queue("a", cohort="lab", gpus={"h100": 2}, preemption=Preemption(reclaim_within_cohort=policy)),
                queue("b", cohort="lab", gpus={"h100": 2}))


@pytest.mark.parametrize("c", [
    case("under Any a lender reclaims from borrowers of a higher priority", policy="Any", borrower=20, x=0,
         victims=["b3", "b4"]),
    case("under Any a lender reclaims from borrowers of a lower priority", policy="Any", borrower=0, x=10,
         victims=["b3", "b4"]),
    case("under LowerPriority a lender reclaims from borrowers of a lower priority", policy="LowerPriority",
         borrower=0, x=10, victims=["b3", "b4"]),
    case("under LowerPriority a lender does not reclaim from borrowers of a higher priority",
         policy="LowerPriority", borrower=20, x=0, victims=[]),
    case("under LowerPriority a lender does not reclaim from borrowers of an equal priority",
         policy="LowerPriority", borrower=10, x=10, victims=[]),
    case("under Never a lender never reclaims", policy="Never", borrower=0, x=10, victims=[]),
], ids=case_name)
def test_a_lender_within_its_nominal_reclaims_from_borrowers_of_its_cohort(c):
    b = lab(c.policy)
    state = fold(*[gpu_op(f"b{n}", 1, queue="b", priority=c.borrower, at=n) for n in range(1, 5)])
    start(state, b, 10, "b1", "b2", "b3", "b4")
    assert [o for o in ("b1", "b2", "b3", "b4") if state.ops[o].borrowing] == ["b3", "b4"]
    fold(gpu_op("x", 2, queue="a", priority=c.x, at=20), state=state)

    decisions = decide(state, b, t(30))
    assert victims(decisions) == c.victims
    assert {d.reason for d in preemptions(decisions)} <= {"reclaim"}
    for d in preemptions(decisions):
        assert d.preemptor == "x"
        assert d.message == (f"x (queue a, priority {c.x}) reclaims quota lent to {d.op_id} "
                             f"(queue b, priority {c.borrower})")
    if not c.victims:
        assert codes(state, "x") == ["quota_lent_out"]


def reclaiming() -> tuple[AdmissionState, object]:
    """b runs b1, b2 within its nominal and b3, b4 on quota lent by a; x (queue a) reclaims it."""
    b = lab("Any")
    state = fold(*[gpu_op(f"b{n}", 1, queue="b", at=n) for n in range(1, 5)])
    start(state, b, 10, "b1", "b2", "b3", "b4")
    fold(gpu_op("x", 2, queue="a", at=20), state=state)
    assert victims(decide(state, b, t(30))) == ["b3", "b4"]
    return state, b


def test_the_reclaiming_lender_is_admitted_once_the_borrowers_are_gone():
    state, b = reclaiming()
    fold(preempted("b3", at=t(40), preemptor="x", reason="reclaim"),
         preempted("b4", at=t(41), preemptor="x", reason="reclaim"), state=state)
    (decision,) = decide(state, b, t(43))
    assert (decision.op_id, decision.borrowing) == ("x", False)
    assert {o: state.ops[o].status for o in ("b3", "b4")} == {"b3": Status.QUEUED, "b4": Status.QUEUED}
    assert codes(state, "b3") == codes(state, "b4") == ["quota_exhausted"]


def test_the_room_freed_by_one_victim_is_held_while_the_others_terminate():
    state, b = reclaiming()
    fold(preempted("b3", at=t(40), preemptor="x", reason="reclaim"), state=state)
    assert decide(state, b, t(41)) == []  # b4 still terminating: b3's quota is x's, not anyone else's
    fold(preempted("b4", at=t(42), preemptor="x", reason="reclaim"), state=state)
    assert admitted_ids(decide(state, b, t(43))) == ["x"]


def test_a_borrowing_op_never_preempts_to_borrow_more():
    b = lab("Any")
    state = fold(gpu_op("b1", 1, queue="b"), gpu_op("b2", 2, queue="b", at=1))
    start(state, b, 10, "b1", "b2")
    assert state.ops["b2"].borrowing
    fold(gpu_op("x", 3, queue="a", priority=100, at=20), state=state)  # 3 > a's nominal 2: x must borrow
    assert decide(state, b, t(30)) == []
    assert state.ops["b2"].preempted_by is None
    assert codes(state, "x") == ["quota_exhausted"]


def test_a_borrower_within_its_nominal_is_not_reclaimed_from():
    b = lab("Any")
    state = fold(gpu_op("b1", 2, queue="b"))
    start(state, b, 0, "b1")
    fold(gpu_op("a1", 2, queue="a", at=1), state=state)
    start(state, b, 2, "a1")
    fold(gpu_op("x", 1, queue="a", priority=100, at=20), state=state)
    assert victims(decide(state, b, t(30))) == ["a1"]  # its own queue's op, never b1
