"""One admission cycle over queues with quota, cohorts, flavors and observed node capacity."""
from __future__ import annotations

import pytest

from opsched.proto.events import OperationAdmitted, OperationRejected
from opsched.services.admission import cycle, queries
from opsched.services.admission.policies.admit import ADMIT, WAIT, evaluate
from opsched.services.admission.state.admission_state import AdmissionState, Status, snapshot_of
from tests.builders import (
    GPU,
    GPU_PRODUCT,
    book,
    case,
    case_name,
    dispatched,
    fold,
    gpu_flavor,
    node,
    node_removed,
    op,
    queue,
    queued,
    running,
    succeeded,
    t,
    taint,
)

NS = "opsched"
H100 = {GPU_PRODUCT: "H100"}
A100 = {GPU_PRODUCT: "A100"}


def decide(state: AdmissionState, b, now=t(60)) -> list:
    return cycle.decide(state, b, now, NS)


def gpu_op(op_id: str, gpus: int, *, queue: str, at: float = 0, product: str | None = None,
           amount: float = 1.0) -> list:
    """A queued op asking for ``gpus`` GPUs, submitted ``at`` seconds after T0."""
    return queued(op(op_id).gpus(gpus, product=product).build(), op_id=op_id, queue=queue, at=t(at), amount=amount)


def admitted_ids(decisions) -> list[str]:
    return [d.op_id for d in decisions if isinstance(d, OperationAdmitted)]


def by_id(decisions) -> dict:
    return {d.op_id: d for d in decisions}


def codes(state: AdmissionState, op_id: str) -> list[str]:
    return [r.code for r in state.ops[op_id].blocked]


LAB = book(queue("a", cohort="lab", gpus={"h100": 2}), queue("b", cohort="lab", gpus={"h100": 2}))


# ---- within quota first, then borrowers -------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("an op that fits its own quota is admitted before one that must borrow, though submitted later",
         book=LAB, ops=[gpu_op("x", 3, queue="a", at=0), gpu_op("y", 1, queue="b", at=1)],
         admitted=["y", "x"], borrowing={"x": True, "y": False}),
    case("the borrower waits when the op within quota leaves the cohort nothing to lend",
         book=LAB, ops=[gpu_op("x", 3, queue="a", at=0), gpu_op("y", 2, queue="b", at=1)],
         admitted=["y"], borrowing={"y": False}),
    case("a borrower of a higher-priority queue still goes after ops within quota",
         book=book(queue("a", cohort="lab", priority=10, gpus={"h100": 2}), queue("b", cohort="lab", gpus={"h100": 2})),
         ops=[gpu_op("x", 4, queue="a", at=0), gpu_op("y", 1, queue="b", at=1)],
         admitted=["y"], borrowing={"y": False}),
    case("ops within quota of the borrower's own queue go before it too",
         book=LAB, ops=[gpu_op("x", 3, queue="a", at=0), gpu_op("z", 1, queue="a", at=1)],
         admitted=["z", "x"], borrowing={"z": False, "x": True}),
], ids=case_name)
def test_ops_within_quota_go_before_borrowers(c):
    state = fold(*c.ops)
    decisions = decide(state, c.book)
    assert admitted_ids(decisions) == c.admitted
    assert {d.op_id: d.borrowing for d in decisions} == c.borrowing
    waiting = {i for i, o in state.ops.items() if o.status == Status.QUEUED}
    assert waiting == set(state.ops) - set(c.admitted)


def test_a_borrower_is_admitted_with_its_flavors_when_the_lender_is_idle():
    state = fold(gpu_op("x", 4, queue="a"))
    (decision,) = decide(state, LAB)
    assert isinstance(decision, OperationAdmitted)
    assert (decision.borrowing, decision.flavors, decision.node_selector) == (True, {GPU: "h100"}, H100)
    assert decision.queue == "a" and decision.pod_name == "op-x-0"
    record = state.ops["x"]
    assert (record.status, record.borrowing, record.flavors) == (Status.ADMITTED, True, {GPU: "h100"})


def test_a_borrower_that_the_cohort_cannot_lend_to_waits_saying_why():
    state = fold(gpu_op("busy", 2, queue="b"), gpu_op("x", 3, queue="a", at=1))
    assert admitted_ids(decide(state, LAB)) == ["busy"]
    assert state.ops["x"].status == Status.QUEUED
    assert codes(state, "x") == ["quota_exhausted"]
    assert "flavor h100" in state.ops["x"].blocked[0].message


def test_a_borrower_waits_while_a_lender_waits_for_its_own_lent_quota():
    b = book(queue("a", cohort="lab", gpus={"h100": 2}), queue("b", cohort="lab", gpus={"h100": 4}))
    state = fold(gpu_op("x", 4, queue="a"))
    assert admitted_ids(decide(state, b)) == ["x"]  # borrows 2 of b's idle quota
    fold(gpu_op("y", 3, queue="b", at=1), gpu_op("z", 1, queue="a", at=2), state=state)
    assert decide(state, b) == []
    assert codes(state, "y") == ["quota_lent_out"]
    assert "lent to its cohort" in state.ops["y"].blocked[0].message
    assert codes(state, "z") == ["cohort_lender_waiting"]  # the cohort could lend 2, but b comes first
    assert [r.code for r in queries.why(state, b, "z").reasons] == ["cohort_lender_waiting"]

    fold(succeeded("x"), state=state)
    assert admitted_ids(decide(state, b)) == ["z", "y"]


# ---- flavor fallback --------------------------------------------------------------------------

FALLBACK = book(queue("gpu", gpus={"h100": 2, "a100": 4}))
FALLBACK_BIG_H100 = book(queue("gpu", gpus={"h100": 8, "a100": 8}))


@pytest.mark.parametrize("c", [
    case("the second op falls back to A100 when the H100 quota is used up",
         book=FALLBACK, nodes=[], first=[]),
    case("the second op falls back to A100 when the H100 node is full",
         book=FALLBACK_BIG_H100, nodes=[node("h-1", gpus=2, product="H100"), node("a-1", gpus=4, product="A100")],
         first=[]),
    case("an op falls back to A100 when the H100 quota is held by a running op",
         book=FALLBACK, nodes=[], first=["one"]),
], ids=case_name)
def test_an_h100_first_queue_admits_onto_a100_when_h100_is_exhausted(c):
    state = fold(*c.nodes, gpu_op("one", 2, queue="gpu"))
    (one,) = decide(state, c.book)
    assert one.flavors == {GPU: "h100"} and one.node_selector == H100
    fold(dispatched("one"), running("one", node="h-1"), state=state)

    fold(gpu_op("two", 2, queue="gpu", at=5), state=state)
    (two,) = decide(state, c.book)
    assert (two.op_id, two.flavors, two.node_selector, two.borrowing) == ("two", {GPU: "a100"}, A100, False)
    assert state.ops["two"].flavors == {GPU: "a100"}


def test_the_first_flavor_is_taken_again_once_it_frees_up():
    state = fold(gpu_op("one", 2, queue="gpu"), gpu_op("two", 2, queue="gpu", at=1))
    assert [d.flavors[GPU] for d in decide(state, FALLBACK)] == ["h100", "a100"]
    fold(succeeded("one"), gpu_op("three", 2, queue="gpu", at=2), state=state)
    (three,) = decide(state, FALLBACK)
    assert three.flavors == {GPU: "h100"}


def test_a_flavor_toleration_lets_an_op_onto_a_tainted_node():
    b = book(queue("gpu", gpus={"h100": 8}),
             flavors=[gpu_flavor("h100", tolerations=[{"key": "gpu", "operator": "Exists"}])])
    state = fold(node("h-1", gpus=8, product="H100", taints=[taint("gpu", "true")]), gpu_op("x", 8, queue="gpu"))
    (decision,) = decide(state, b)
    assert isinstance(decision, OperationAdmitted)
    assert decision.tolerations == [{"key": "gpu", "operator": "Exists"}]



def test_an_admitted_op_carries_its_queues_pod_security_for_the_dispatcher():
    b = book(queue("gpu", gpus={"h100": 8}, pod_security="restricted", allow_secret_volumes=True),
             queue("plain", gpus={"h100": 8}))
    state = fold(node("h-1", gpus=8, product="H100"), gpu_op("x", 1, queue="gpu"), gpu_op("y", 1, queue="plain"))
    decisions = by_id(decide(state, b))
    assert (decisions["x"].pod_security, decisions["x"].allow_secret_volumes) == ("restricted", True)
    assert (decisions["y"].pod_security, decisions["y"].allow_secret_volumes) == ("baseline", False)


def test_an_admitted_op_carries_its_queues_allow_lists_for_the_dispatcher():
    b = book(queue("gpu", gpus={"h100": 8}, service_accounts=["trainer"], allow_service_account_token=True,
                   priority_class_names=["high"], allow_volumes=["nfs"], image_pull_secrets=["regcred"]),
             queue("plain", gpus={"h100": 8}))
    state = fold(node("h-1", gpus=8, product="H100"), gpu_op("x", 1, queue="gpu"), gpu_op("y", 1, queue="plain"))
    decisions = by_id(decide(state, b))
    x, y = decisions["x"], decisions["y"]
    assert (x.service_accounts, x.allow_service_account_token, x.priority_class_names, x.allow_volumes,
            x.image_pull_secrets) == (["trainer"], True, ["high"], ["nfs"], ["regcred"])
    assert (y.service_accounts, y.allow_service_account_token, y.priority_class_names, y.allow_volumes,
            y.image_pull_secrets) == ([], False, [], [], [])


# ---- unfittable -------------------------------------------------------------------------------

BIG_H100 = book(queue("gpu", gpus={"h100": 16}))


@pytest.mark.parametrize("c", [
    case("an op no node could ever fit is rejected as unfittable",
         nodes=[node("h-1", gpus=4, product="H100"), node("h-2", gpus=4, product="H100")],
         spec=op("x").gpus(8, product="H100"), book=BIG_H100,
         message="no node offers 8 x nvidia.com/gpu of product H100"),
    case("the product comes from the flavor when the op names none",
         nodes=[node("h-1", gpus=4, product="H100"), node("a-1", gpus=8, product="A100")],
         spec=op("x").gpus(8), book=BIG_H100,
         message="no node offers 8 x nvidia.com/gpu of product H100"),
    case("every flavor tried is named",
         nodes=[node("a-1", gpus=4, product="A100")], spec=op("x").gpus(8),
         book=book(queue("gpu", gpus={"h100": 8, "a100": 8})),
         message="no node offers 8 x nvidia.com/gpu of product H100; "
                 "no node offers 8 x nvidia.com/gpu of product A100"),
    case("a node the op does not tolerate does not count",
         nodes=[node("h-1", gpus=8, product="H100", taints=[taint("dedicated", "infra")])],
         spec=op("x").gpus(8, product="H100"), book=BIG_H100,
         message="no node offers 8 x nvidia.com/gpu of product H100"),
], ids=case_name)
def test_an_op_no_node_could_ever_fit_is_rejected(c):
    state = fold(*c.nodes, queued(c.spec.queue("gpu").build(), op_id="x"))
    (decision,) = decide(state, c.book)
    assert isinstance(decision, OperationRejected)
    assert (decision.op_id, decision.reason, decision.message) == ("x", "unfittable", c.message)
    assert state.ops["x"].status == Status.REJECTED
    assert state.queues.waiting("gpu") == 0


@pytest.mark.parametrize("c", [
    case("with no nodes observed an op is not judged unfittable", nodes=[], book=BIG_H100, admitted=True),
    case("after the last node is removed an op is not judged unfittable",
         nodes=[node("h-1", gpus=4, product="H100"), node_removed("h-1")], book=BIG_H100, admitted=True),
    case("with rejection turned off an unfittable op waits",
         nodes=[node("h-1", gpus=4, product="H100")],
         book=book(queue("gpu", gpus={"h100": 16}), reject_unfittable=False), admitted=False),
], ids=case_name)
def test_an_op_is_not_rejected_as_unfittable_unless_nodes_are_known_and_rejection_is_on(c):
    state = fold(*c.nodes, gpu_op("x", 8, queue="gpu", product="H100"))
    decisions = decide(state, c.book)
    assert not [d for d in decisions if isinstance(d, OperationRejected)]
    assert admitted_ids(decisions) == (["x"] if c.admitted else [])
    if not c.admitted:
        assert state.ops["x"].status == Status.QUEUED
        assert codes(state, "x") == ["unfittable"]


def test_an_op_that_only_a_cordoned_node_fits_waits_instead_of_being_rejected():
    state = fold(node("h-1", gpus=8, product="H100", schedulable=False), gpu_op("x", 8, queue="gpu", product="H100"))
    assert decide(state, BIG_H100) == []
    assert state.ops["x"].status == Status.QUEUED


# ---- concurrency, cost, many per cycle --------------------------------------------------------

def test_a_queue_with_concurrency_one_serialises_its_ops():
    b = book(queue("solo", concurrency=1, gpus={"h100": 8}))
    state = fold(*[gpu_op(i, 1, queue="solo", at=n) for n, i in enumerate("abc")])
    assert admitted_ids(decide(state, b)) == ["a"]
    assert decide(state, b) == []
    assert codes(state, "b") == ["queue_concurrency"]
    fold(running("a"), state=state)
    assert decide(state, b) == []
    fold(succeeded("a"), state=state)
    assert admitted_ids(decide(state, b)) == ["b"]


def test_the_cost_quota_holds_an_op_whose_estimate_would_exceed_it():
    b = book(queue("q", cost_quota=10.0))
    state = fold(gpu_op("a", 0, queue="q", amount=6.0), gpu_op("b", 0, queue="q", at=1, amount=6.0),
                 gpu_op("c", 0, queue="q", at=2, amount=4.0))
    assert admitted_ids(decide(state, b)) == ["a", "c"]
    assert state.ops["b"].status == Status.QUEUED
    (reason,) = state.ops["b"].blocked
    assert reason.code == "cost_quota"
    assert "queue q cost quota: 6.00 in use + 6.00 estimated > 10.00" in reason.message
    fold(succeeded("c"), state=state)
    assert decide(state, b) == []  # 6 + 6 > 10 still
    fold(succeeded("a"), state=state)
    assert admitted_ids(decide(state, b)) == ["b"]


def test_many_ops_are_admitted_in_one_cycle_until_capacity_runs_out():
    b = book(queue("gpu", gpus={"h100": 100}))
    nodes = [node(f"h-{n}", gpus=4, product="H100") for n in range(3)]
    state = fold(*nodes, *[gpu_op(f"op-{n:02}", 1, queue="gpu", at=n) for n in range(13)])
    assert admitted_ids(decide(state, b)) == [f"op-{n:02}" for n in range(12)]
    assert codes(state, "op-12") == ["no_capacity"]


# ---- bounded lookahead ------------------------------------------------------------------------

class Counting:
    """Wraps ``cycle.evaluate`` to count how many ops a cycle looked at."""

    def __init__(self, monkeypatch) -> None:
        self.calls: list[str] = []
        monkeypatch.setattr(cycle, "evaluate", self)

    def __call__(self, op_, snap, allow_borrow=True):
        self.calls.append(op_.op_id)
        return evaluate(op_, snap, allow_borrow=allow_borrow)


def test_a_big_op_that_must_wait_does_not_block_smaller_ones_behind_it():
    b = book(queue("gpu", gpus={"h100": 4}))
    state = fold(gpu_op("big", 8, queue="gpu"), gpu_op("s1", 2, queue="gpu", at=1),
                 gpu_op("s2", 2, queue="gpu", at=2), gpu_op("s3", 2, queue="gpu", at=3))
    assert admitted_ids(decide(state, b)) == ["s1", "s2"]
    assert state.ops["big"].status == Status.QUEUED and codes(state, "big") == ["quota_exhausted"]
    assert codes(state, "s3") == ["quota_exhausted"]


def test_a_queue_at_full_concurrency_is_left_at_once(monkeypatch):
    b = book(queue("solo", concurrency=1))
    state = fold(*[gpu_op(f"op-{n}", 0, queue="solo", at=n) for n in range(5)])
    assert admitted_ids(decide(state, b)) == ["op-0"]
    counting = Counting(monkeypatch)
    assert decide(state, b) == []
    assert counting.calls == ["op-1"]
    assert all(state.ops[f"op-{n}"].status == Status.QUEUED for n in range(1, 5))


def test_the_lookahead_past_ops_that_must_wait_is_bounded(monkeypatch):
    b = book(queue("gpu", gpus={"h100": 4}))
    waiting = [gpu_op(f"big-{n:02}", 8, queue="gpu", at=n) for n in range(cycle.LOOKAHEAD + 5)]
    state = fold(*waiting, gpu_op("small", 1, queue="gpu", at=100))
    counting = Counting(monkeypatch)
    assert decide(state, b) == []
    assert len(counting.calls) == cycle.LOOKAHEAD
    assert all(o.status == Status.QUEUED for o in state.ops.values())
    assert len(state.queues.queue("gpu").pending) == len(state.ops)  # every op popped was put back


def test_the_lookahead_past_ops_that_must_borrow_is_bounded(monkeypatch):
    state = fold(gpu_op("lender-busy", 2, queue="b"),
                 *[gpu_op(f"x-{n:03}", 3, queue="a", at=n) for n in range(10 * cycle.LOOKAHEAD)])
    counting = Counting(monkeypatch)
    assert admitted_ids(decide(state, LAB)) == ["lender-busy"]
    assert len(counting.calls) <= 2 * (cycle.LOOKAHEAD + 1) + 1


# ---- node capacity ----------------------------------------------------------------------------

def test_with_one_gpu_node_the_second_one_gpu_op_waits_for_the_first_to_end():
    b = book(queue("gpu", gpus={"h100": 8}))
    state = fold(node("h-1", gpus=1, product="H100"), gpu_op("a", 1, queue="gpu"), gpu_op("b", 1, queue="gpu", at=1))
    assert admitted_ids(decide(state, b)) == ["a"]
    assert codes(state, "b") == ["no_capacity"]
    assert "no free capacity now for 1 x nvidia.com/gpu of product H100" in state.ops["b"].blocked[0].message

    assert decide(state, b) == []  # admitted, not yet placed: still counted on the node
    fold(dispatched("a"), running("a", node="h-1"), state=state)
    assert decide(state, b) == []  # placed on the node
    fold(succeeded("a", node="h-1"), state=state)
    assert admitted_ids(decide(state, b)) == ["b"]


def test_an_op_waiting_for_capacity_is_admitted_once_a_new_node_is_observed():
    b = book(queue("gpu", gpus={"h100": 8}))
    state = fold(node("h-1", gpus=2, product="H100"), gpu_op("a", 2, queue="gpu"), gpu_op("b", 2, queue="gpu", at=1))
    assert admitted_ids(decide(state, b)) == ["a"]
    fold(node("h-2", gpus=2, product="H100"), state=state)
    assert admitted_ids(decide(state, b)) == ["b"]


def test_a_node_that_no_longer_matches_is_not_used():
    b = book(queue("gpu", gpus={"h100": 8}))
    state = fold(node("h-1", gpus=2, product="H100"), node("h-1", gpus=2, product="A100"), node("h-2", gpus=8,
                 product="H100"), gpu_op("a", 4, queue="gpu"))
    assert admitted_ids(decide(state, b)) == ["a"]
    verdict = evaluate(state.ops["a"], snapshot_of(AdmissionState(), b))  # a snapshot without nodes
    assert verdict.outcome == ADMIT and verdict.nodes is None


# ---- config changes and idempotence -----------------------------------------------------------

def test_ops_of_a_queue_removed_from_the_config_are_not_admitted():
    before = book(queue("old", gpus={"h100": 8}), queue("gpu", gpus={"h100": 8}))
    after = book(queue("gpu", gpus={"h100": 8}))
    state = fold(gpu_op("a", 1, queue="old"), gpu_op("b", 1, queue="gpu"))
    assert admitted_ids(decide(state, after)) == ["b"]
    assert state.ops["a"].status == Status.QUEUED
    verdict = evaluate(state.ops["a"], snapshot_of(state, after))
    assert verdict.outcome == WAIT and [r.code for r in verdict.reasons] == ["queue_removed"]
    assert admitted_ids(decide(state, before)) == ["a"]


def test_the_assumed_decision_is_folded_so_a_second_cycle_does_not_admit_again():
    state = fold(gpu_op("x", 1, queue="a"))
    assert admitted_ids(decide(state, LAB)) == ["x"]
    assert state.ops["x"].status == Status.ADMITTED
    assert state.usage.active.get("a", set()) == {"x"} and state.queues.waiting("a") == 0
    assert decide(state, LAB) == []
    assert snapshot_of(state, LAB).usage["a"] == {(GPU, "h100"): 1.0}
