"""An op that is not preemptible is admitted only within its queue's nominal quota, never on quota borrowed from
its cohort (which its lender could then never reclaim): it waits ``nonpreemptible_over_nominal`` instead, and
preemption never takes one."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto.events import OperationAdmitted
from opsched.proto.reasons import Reason, pending
from opsched.services.admission import queries
from opsched.services.admission.policies.admit import ADMIT, WAIT, evaluate
from opsched.services.admission.state.admission_state import Status, snapshot_of
from tests.builders import (
    GPU,
    admitted,
    book,
    case,
    case_name,
    fold,
    op,
    preempted,
    queue,
    queued,
    running,
    succeeded,
    t,
)
from tests.unit.preemption_scenarios import admitted_ids, codes, decide, preemptions, start, victims

LAB = book(queue("a", cohort="lab", gpus={"h100": 2}), queue("b", cohort="lab", gpus={"h100": 2}))


def gpu_op(op_id: str, gpus: int, *, queue: str, at: float = 0, priority: int = 0,
           preemptible: bool | None = None) -> list:
    """A queued op asking for ``gpus`` GPUs; ``preemptible`` as its file says it (None: unset)."""
    spec = op(op_id).gpus(gpus).priority(priority).build()
    return queued(msgspec.structs.replace(spec, preemptible=preemptible), op_id=op_id, queue=queue, at=t(at))


def over_nominal(used: float, amount: float, *, queue: str = "a", nominal: float = 2, never: str = ""):
    return pending(Reason.NONPREEMPTIBLE_OVER_NOMINAL, queue=queue, resource=GPU, flavor="h100", cohort="lab",
                   used=used, amount=amount, nominal=nominal, never=never)


def test_a_non_preemptible_op_waits_where_a_preemptible_one_borrows_and_only_the_borrower_is_reclaimed():
    """a runs its whole nominal; b is idle. np (not preemptible) would have to borrow: it waits, saying why; p
    borrows b's idle quota. b's own op then reclaims from p, the only op on borrowed quota."""
    state = fold(gpu_op("a1", 2, queue="a"))
    start(state, LAB, 1, "a1")
    fold(gpu_op("np", 1, queue="a", at=10, preemptible=False), gpu_op("p", 1, queue="a", at=11), state=state)

    decisions = decide(state, LAB, t(20))
    assert admitted_ids(decisions) == ["p"]
    assert [d.borrowing for d in decisions if isinstance(d, OperationAdmitted)] == [True]
    assert state.ops["np"].status == Status.QUEUED
    assert state.ops["np"].blocked == [over_nominal(used=2, amount=1)]
    assert queries.why(state, LAB, "np", t(20)).reasons[0] == over_nominal(used=3, amount=1)  # p's too, now
    fold(running("p", at=t(21)), state=state)

    fold(gpu_op("b1", 2, queue="b", at=30, priority=10), state=state)  # reclaimWithinCohort: LowerPriority
    decisions = decide(state, LAB, t(40))
    assert victims(decisions) == ["p"] and {d.reason for d in preemptions(decisions)} == {"reclaim"}
    assert codes(state, "b1") == ["waiting_for_victims"]
    fold(preempted("p", at=t(41), preemptor="b1", reason="reclaim"), state=state)
    assert admitted_ids(decide(state, LAB, t(42))) == ["b1"]
    assert codes(state, "np") == ["nonpreemptible_over_nominal"]  # still: never on b's quota


def test_a_non_preemptible_op_is_admitted_once_its_queue_has_room_within_its_nominal():
    state = fold(gpu_op("a1", 2, queue="a"), gpu_op("np", 1, queue="a", at=1, preemptible=False))
    start(state, LAB, 2, "a1")
    assert codes(state, "np") == ["nonpreemptible_over_nominal"]
    fold(succeeded("a1", at=t(10)), state=state)
    (decision,) = decide(state, LAB, t(11))
    assert (decision.op_id, decision.borrowing) == ("np", False)


@pytest.mark.parametrize("c", [
    case("within its nominal it is admitted", used=0, amount=2, preemptible=False, outcome=ADMIT, borrowing=False),
    case("unset is preemptible: it borrows", used=2, amount=1, preemptible=None, outcome="borrow", borrowing=True),
    case("preemptible: true borrows", used=2, amount=1, preemptible=True, outcome="borrow", borrowing=True),
    case("not preemptible it does not borrow", used=2, amount=1, preemptible=False, outcome=WAIT, borrowing=False),
], ids=case_name)
def test_only_a_preemptible_op_may_fit_by_borrowing(c):
    state = fold(gpu_op("a1", 2, queue="a"))
    if c.used:
        start(state, LAB, 1, "a1")
    fold(gpu_op("x", c.amount, queue="a", at=5, preemptible=c.preemptible), state=state)
    verdict = evaluate(state.ops["x"], snapshot_of(state, LAB, t(6)))
    assert verdict.outcome == c.outcome


def test_it_asks_more_than_the_whole_nominal_and_is_told_it_never_fits():
    state = fold(gpu_op("np", 3, queue="a", preemptible=False))
    decide(state, LAB, t(1))
    assert state.ops["np"].blocked == [over_nominal(
        used=0, amount=3, never="; it asks more than the whole nominal, so it never fits here: make it preemptible, "
                               "or use a queue with more nominal quota")]


def test_of_two_flavors_it_takes_the_one_within_its_nominal_though_the_first_would_borrow():
    b = book(queue("a", cohort="lab", gpus={"h100": 2, "a100": 2}), queue("b", cohort="lab", gpus={"h100": 4}))
    state = fold(gpu_op("a1", 2, queue="a"))
    start(state, b, 1, "a1")  # h100 of a: its whole nominal; b lends h100
    fold(gpu_op("np", 1, queue="a", at=5, preemptible=False), state=state)
    (decision,) = decide(state, b, t(6))
    assert (decision.op_id, decision.flavors, decision.borrowing) == ("np", {GPU: "a100"}, False)


def test_a_non_preemptible_op_reclaims_its_own_nominal_lent_to_a_borrower():
    state = fold(gpu_op("a1", 2, queue="a"), gpu_op("a2", 2, queue="a", at=1))
    start(state, LAB, 2, "a1", "a2")  # a2 borrows b's 2
    assert state.ops["a2"].borrowing
    fold(gpu_op("np", 2, queue="b", at=10, priority=10, preemptible=False), state=state)
    assert codes(state, "np") == [] and victims(decide(state, LAB, t(20))) == ["a2"]
    fold(preempted("a2", at=t(21), preemptor="np", reason="reclaim"), state=state)
    (decision,) = decide(state, LAB, t(22))
    assert (decision.op_id, decision.borrowing) == ("np", False)


def test_a_non_preemptible_op_preempts_lower_priority_ops_of_its_queue_rather_than_borrow():
    state = fold(gpu_op("lo", 2, queue="a"))
    start(state, LAB, 1, "lo")
    fold(gpu_op("np", 1, queue="a", at=10, priority=10, preemptible=False), state=state)
    decisions = decide(state, LAB, t(20))
    assert victims(decisions) == ["lo"] and {d.reason for d in preemptions(decisions)} == {"within_queue"}
    assert admitted_ids(decisions) == []


def test_a_non_preemptible_op_on_borrowed_quota_is_never_reclaimed():
    """One admitted before this rule (its admitted event says it borrows, as a replayed stream may): protected
    still; the lender waits for its quota."""
    spec = msgspec.structs.replace(op("old").gpus(2).build(), preemptible=False)
    event = msgspec.structs.replace(admitted(spec, op_id="old", queue="a", at=t(1)), borrowing=True,
                                    flavors={GPU: "h100"})
    state = fold(gpu_op("a1", 2, queue="a"))
    start(state, LAB, 1, "a1")
    fold(*queued(spec, op_id="old", queue="a", at=t(0)), event, running("old", at=t(2)), state=state)
    assert state.ops["old"].borrowing
    fold(gpu_op("b1", 2, queue="b", at=10, priority=100), state=state)
    assert decide(state, LAB, t(20)) == []
    assert state.ops["old"].preempted_by is None and codes(state, "b1") == ["quota_lent_out"]
