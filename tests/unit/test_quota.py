"""Quota with cohort semantics: nominal, borrowing, borrowingLimit, guaranteed and lendingLimit."""
from __future__ import annotations

import pytest

from opsched.services.admission.policies import flavors
from opsched.services.admission.policies.admit import ADMIT, BORROW, WAIT, evaluate
from opsched.services.admission.policies.quota import Fit, borrowed, check
from opsched.services.admission.state.admission_state import AdmissionState, snapshot_of
from tests.builders import (
    GPU,
    GPU_PRODUCT,
    book,
    case,
    case_name,
    fold,
    op,
    queue,
    queued,
    quota,
)

H100 = (GPU, "h100")


def usage(**used: float) -> dict:
    """``usage(a=2, b=4)``: GPUs of flavor h100 in use per queue."""
    return {q: {H100: float(n)} for q, n in used.items()}


ALONE = book(queue("a", gpus={"h100": 4}))


def pair(a=None, b=None):
    """Two queues of the cohort "lab", each with h100 quota (nominal 2 unless given)."""
    return book(queue("a", cohort="lab", gpus=[a or quota("h100", 2)]),
                queue("b", cohort="lab", gpus=[b or quota("h100", 2)]))


@pytest.mark.parametrize("c", [
    case("a queue alone fits within its nominal quota",
         book=ALONE, used=usage(a=2), amount=2, fit=Fit.FITS, available=2),
    case("a queue alone does not fit beyond its nominal quota",
         book=ALONE, used=usage(a=3), amount=2, fit=Fit.NO, available=1),
    case("a queue alone fits exactly up to nominal from zero",
         book=ALONE, used={}, amount=4, fit=Fit.FITS, available=4),
    case("a queue in a cohort fits within its own nominal without borrowing",
         book=pair(), used={}, amount=2, fit=Fit.FITS, available=4),
    case("a queue borrows when the other member of its cohort is idle",
         book=pair(), used=usage(a=2), amount=2, fit=Fit.BORROWS, available=2),
    case("a queue cannot borrow when the other member uses its whole nominal",
         book=pair(), used=usage(a=2, b=2), amount=1, fit=Fit.NO, available=0),
    case("a queue borrows only what the other member leaves unused",
         book=pair(), used=usage(a=2, b=1), amount=2, fit=Fit.NO, available=1),
    case("borrowingLimit lets a queue go that far above nominal",
         book=pair(a=quota("h100", 2, borrow=1)), used=usage(a=2), amount=1, fit=Fit.BORROWS, available=1),
    case("borrowingLimit caps borrowing even when the cohort could lend more",
         book=pair(a=quota("h100", 2, borrow=1)), used=usage(a=2), amount=2, fit=Fit.NO, available=1),
    case("a borrowingLimit of zero forbids borrowing",
         book=pair(a=quota("h100", 2, borrow=0)), used=usage(a=2), amount=1, fit=Fit.NO, available=0),
    case("guaranteed quota is never lent, even when its owner is idle",
         book=pair(b=quota("h100", 4, guaranteed=3)), used={}, amount=4, fit=Fit.NO, available=3),
    case("the lendable rest of a guaranteed quota is lent",
         book=pair(b=quota("h100", 4, guaranteed=3)), used={}, amount=3, fit=Fit.BORROWS, available=3),
    case("a queue keeps its guaranteed part even after lending the rest",
         book=pair(b=quota("h100", 4, guaranteed=2)), used=usage(a=4), queue="b", amount=2,
         fit=Fit.FITS, available=2),
    case("a queue cannot reclaim its lent part while the borrower holds it",
         book=pair(b=quota("h100", 4, guaranteed=2)), used=usage(a=4), queue="b", amount=3,
         fit=Fit.NO, available=2),
    case("lendingLimit caps what a member lends",
         book=pair(b=quota("h100", 4, lend=1)), used=usage(a=2), amount=2, fit=Fit.NO, available=1),
    case("a member lends up to its lendingLimit",
         book=pair(b=quota("h100", 4, lend=1)), used=usage(a=2), amount=1, fit=Fit.BORROWS, available=1),
    case("quantities may be Kubernetes strings",
         book=book(queue("a", gpus=[quota("h100", "4")])), used=usage(a=3), amount=1, fit=Fit.FITS, available=1),
], ids=case_name)
def test_quota_check(c):
    result = check(c.book, c.used, c.args.get("queue", "a"), H100, c.amount)
    assert (result.fit, result.available) == (c.fit, c.available)
    assert result.nominal == c.book.quotas[c.args.get("queue", "a")][H100].nominal
    assert (result.reason == "") == (c.fit != Fit.NO)


@pytest.mark.parametrize("c", [
    case("a queue alone over nominal says how much is used and needed",
         book=ALONE, used=usage(a=3), amount=2, says=["nvidia.com/gpu", "flavor h100", "3/4 used", "needs 2"]),
    case("a borrowing limit reached names the limit",
         book=pair(a=quota("h100", 2, borrow=1)), used=usage(a=2), amount=2,
         says=["flavor h100", "2/2 used", "needs 2", "borrowing limit 1 reached"]),
    case("a cohort that cannot lend says so",
         book=pair(), used=usage(a=2, b=2), amount=1,
         says=["flavor h100", "2/2 used", "needs 1", "the cohort cannot lend enough"]),
], ids=case_name)
def test_a_quota_refusal_names_the_flavor_and_the_numbers(c):
    result = check(c.book, c.used, "a", H100, c.amount)
    assert result.fit == Fit.NO
    for text in c.says:
        assert text in result.reason


def test_a_queue_without_a_cohort_is_told_it_has_no_cohort_to_borrow_from():
    result = check(ALONE, usage(a=3), "a", H100, 2)
    assert "no cohort to borrow from" in result.reason
    assert "cohort cannot lend" not in result.reason


def test_a_queue_within_its_nominal_whose_quota_is_lent_out_is_told_so():
    result = check(pair(b=quota("h100", 4)), usage(a=4), "b", H100, 3)
    assert (result.fit, result.lent_out, result.available) == (Fit.NO, True, 2)
    assert "flavor h100" in result.reason and "3 of its own nominal 4 is lent" in result.reason
    assert check(pair(b=quota("h100", 4)), usage(a=4), "b", H100, 5).lent_out is False  # beyond nominal


@pytest.mark.parametrize("c", [
    case("within its nominal it fits", book=pair(), used=usage(a=1), amount=1, fit=Fit.FITS, code=None),
    case("what would borrow from an idle cohort does not fit", book=pair(), used=usage(a=2), amount=1, fit=Fit.NO,
         code="nonpreemptible_over_nominal"),
    case("over its nominal it is told it may not borrow, even when the cohort could not lend either",
         book=pair(), used=usage(a=2, b=2), amount=1, fit=Fit.NO, code="nonpreemptible_over_nominal"),
    case("its own nominal lent out to borrowers is still that, reclaimable", book=pair(b=quota("h100", 4)),
         used=usage(a=4), queue="b", amount=3, fit=Fit.NO, code="quota_lent_out"),
    case("a queue alone is over its nominal as before", book=ALONE, used=usage(a=3), amount=2, fit=Fit.NO,
         code="quota_exhausted"),
], ids=case_name)
def test_nominal_only_never_fits_by_borrowing(c):
    result = check(c.book, c.used, c.args.get("queue", "a"), H100, c.amount, nominal_only=True)
    assert (result.fit, result.code) == (c.fit, c.code)
    assert check(c.book, c.used, c.args.get("queue", "a"), H100, c.amount).code != "nonpreemptible_over_nominal"


def test_nominal_only_says_the_nominal_what_is_in_use_and_what_it_asks():
    result = check(pair(), usage(a=1), "a", H100, 2, nominal_only=True)
    assert result.reason == ("not preemptible: it may use only queue a's nominal quota of nvidia.com/gpu flavor h100, "
                             "never borrow from cohort lab (1 in use + 2 asked > 2 nominal)")
    never = check(pair(), {}, "a", H100, 3, nominal_only=True).reason
    assert never.endswith("(0 in use + 3 asked > 2 nominal); it asks more than the whole nominal, so it never fits "
                          "here: make it preemptible, or use a queue with more nominal quota")


@pytest.mark.parametrize("c", [
    case("nothing is borrowed within nominal", used=usage(a=2), borrowed=0),
    case("usage above nominal is borrowed", used=usage(a=3), borrowed=1),
    case("an idle queue borrows nothing", used={}, borrowed=0),
], ids=case_name)
def test_borrowed_is_usage_above_nominal(c):
    assert borrowed(pair(), c.used, "a", H100) == c.borrowed


# ---- a flavor the queue does not define ----------------------------------------------------

LAB = book(queue("a", cohort="lab", gpus={"h100": 4}), queue("b", cohort="lab", gpus={"a100": 2}))


def verdict(spec, queue_name: str, state: AdmissionState | None = None):
    state = fold(queued(spec, op_id="x", queue=queue_name), state=state)
    return evaluate(state.ops["x"], snapshot_of(state, LAB))


def test_a_queue_has_no_candidate_for_a_flavor_only_another_member_defines():
    assert flavors.candidates(LAB, "b", GPU, {GPU_PRODUCT: "H100"}) == []
    assert flavors.candidates(LAB, "b", GPU, {}) == ["a100"]
    assert (GPU, "h100") not in LAB.quotas["b"]


def test_a_queue_does_not_borrow_the_idle_flavor_another_member_defines():
    result = verdict(op("x").gpus(4).build(), "b")
    assert result.outcome == WAIT
    assert [r.code for r in result.reasons] == ["quota_exhausted"]
    assert "flavor a100" in result.reasons[0].message and "needs 4" in result.reasons[0].message


def test_an_op_pinned_to_a_flavor_its_queue_does_not_define_is_not_admitted():
    result = verdict(op("x").gpus(2, product="H100").build(), "b")
    assert result.outcome not in (ADMIT, BORROW)


def test_an_op_pinned_to_its_queues_flavor_is_admitted_with_that_flavor():
    result = verdict(op("x").gpus(2, product="A100").build(), "b")
    assert (result.outcome, result.flavors) == (ADMIT, {GPU: "a100"})
