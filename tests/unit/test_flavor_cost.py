"""Admission prices the flavor it considers (``policies.flavor_cost``): cost quota and budgets are checked with the
op's estimate on each flavor assignment, the admitted event carries the estimate it was admitted at (what the queue's
cost in use counts), approval's ``costAbove`` compares the highest estimate over the flavors the op may get, and the
reasons name the flavor. Catalogue: an A100 at 3.00 an hour, a T4 at 0.35; the op asks for one GPU for an hour, with
no product of its own (routed by flavor): its own estimate is the any-product price, 2.00."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto.events import CostEstimated, OperationAdmitted, OperationOnHold
from opsched.proto.prices import Prices
from opsched.proto.queues import Agent, ApprovalPolicy, Budget, FlavorQuota, Queue, QueuesConfig, ResourceQuota
from opsched.proto.reasons import Hold, Reason
from opsched.services.admission import cycle
from opsched.services.admission.model.queues import compile_book
from opsched.services.admission.policies import flavor_cost
from opsched.services.admission.policies.approval import hold_reason
from opsched.services.cost.estimator import estimate, estimated
from opsched.services.cost.ledger import Ledger
from tests.builders import GPU, book, cache_missed, fold, gpu_flavor, op, queue, running, submitted, succeeded, t

CATALOGUE = Prices(cpu_hour=0.0, gib_hour=0.0, accelerators={GPU: {"A100": 3.0, "T4": 0.35, "*": 2.0}})
SPEC = op("train").gpus(1).timeout(3600).build()


def gated(op_id: str, *, points: bool = True) -> list:
    """An op of queue ``gpu`` whose gates cleared, priced by the catalogue (without its points: an older estimate)."""
    est = estimate(SPEC, CATALOGUE, 3600.0)
    return [submitted(SPEC, op_id=op_id, queue="gpu"),
            CostEstimated(op_id=op_id, at=t(0), estimate=est.money, basis=est.basis, duration_s=est.duration_s,
                          points=est.points if points else []),
            cache_missed(op_id)]


def gpu_book(**fields):
    return book(queue("gpu", gpus={"a100": 4, "t4": 4}, **fields))  # a100 first: the queue's preferred flavor


def decide(state, b) -> list:
    return cycle.decide(state, b, t(60), "opsched")


def test_a_cost_quota_the_a100_breaks_admits_the_op_on_the_t4_at_the_t4_estimate():
    state = fold(gated("x"))
    admitted = [d for d in decide(state, gpu_book(cost_quota=1.0)) if isinstance(d, OperationAdmitted)]
    assert [(d.flavors, d.estimate, d.pool) for d in admitted] == [({GPU: "t4"}, pytest.approx(0.35), "")]
    assert state.ops["x"].estimate == pytest.approx(0.35)  # what its queue's cost in use counts


def test_without_a_cost_limit_the_preferred_flavor_is_admitted_at_its_own_price():
    state = fold(gated("x"))
    admitted = [d for d in decide(state, gpu_book()) if isinstance(d, OperationAdmitted)]
    assert [(d.flavors, d.estimate) for d in admitted] == [({GPU: "a100"}, pytest.approx(3.0))]


def test_the_cost_quota_reasons_name_each_flavor_and_its_estimate():
    state = fold(gated("x"))
    assert not [d for d in decide(state, gpu_book(cost_quota=0.1)) if isinstance(d, OperationAdmitted)]
    blocked = state.ops["x"].blocked
    assert [r.code for r in blocked] == [Reason.COST_QUOTA, Reason.COST_QUOTA]
    assert [r.message for r in blocked] == [
        "queue gpu cost quota: 0.00 in use + 3.00 estimated on flavor a100 > 0.10",
        "queue gpu cost quota: 0.00 in use + 0.35 estimated on flavor t4 > 0.10"]


def test_a_budget_is_checked_with_the_estimate_of_each_flavor():
    b = book(queue("gpu", gpus={"a100": 4, "t4": 4}))
    b.config.budgets.append(Budget(scope="queue", name="gpu", window="day", money=1.0))
    state = fold(gated("x"))
    admitted = [d for d in decide(state, b) if isinstance(d, OperationAdmitted)]
    assert [(d.flavors, d.estimate) for d in admitted] == [({GPU: "t4"}, pytest.approx(0.35))]
    state = fold(gated("y"))
    b.config.budgets[0] = Budget(scope="queue", name="gpu", window="day", money=0.1)
    decide(state, b)
    assert [r.code for r in state.ops["y"].blocked] == [Reason.BUDGET_EXHAUSTED] * 2
    assert "0.35 estimated on flavor t4 > 0.10 limit" in state.ops["y"].blocked[1].message


def test_approval_compares_the_highest_estimate_over_the_flavors_the_op_may_get():
    state = fold(gated("x"))
    held = [d for d in decide(state, gpu_book(approval=ApprovalPolicy(cost_above=2.5)))
            if isinstance(d, OperationOnHold)]
    assert [(h.reason, h.message) for h in held] == [(
        Hold.COST_ABOVE_THRESHOLD, "estimated cost 3.00 on flavor a100 is above queue gpu's approval threshold "
        "2.50 — waiting for `opsched approve x`")]
    state = fold(gated("y"))
    b = book(queue("gpu", gpus={"t4": 4}, approval=ApprovalPolicy(cost_above=2.5)))  # a T4 only: 0.35
    assert not [d for d in decide(state, b) if isinstance(d, OperationOnHold)]


def test_an_estimate_without_points_prices_every_flavor_alike():
    state = fold(gated("x", points=False))
    admitted = [d for d in decide(state, gpu_book(cost_quota=2.5)) if isinstance(d, OperationAdmitted)]
    assert [(d.flavors, d.estimate) for d in admitted] == [({GPU: "a100"}, pytest.approx(2.0))]


def test_an_admitted_event_from_before_estimates_per_flavor_keeps_the_ops_estimate():
    state = fold(gated("x"))
    [admitted] = [d for d in decide(state, gpu_book()) if isinstance(d, OperationAdmitted)]
    replayed = fold(gated("x"), OperationAdmitted(**{f: getattr(admitted, f) for f in admitted.__struct_fields__
                                                     if f not in ("estimate", "pool")}))
    assert replayed.ops["x"].estimate == pytest.approx(2.0)
    assert fold(gated("x"), admitted).ops["x"].estimate == pytest.approx(3.0)  # replayed: what it was admitted at


def test_the_same_op_admitted_to_a_t4_flavor_and_to_an_a100_flavor_is_estimated_and_charged_each_price():
    """The issue's test, across admission and the cost service's ledger: two queues, one flavor each."""
    nodes = {"t4-1": {"nvidia.com/gpu.product": "T4"}, "a100-1": {"nvidia.com/gpu.product": "A100"}}
    ledger = Ledger()
    for flavor, node_name, price in (("t4", "t4-1", 0.35), ("a100", "a100-1", 3.0)):
        state = fold(gated(flavor))
        [admitted] = [d for d in decide(state, book(queue("gpu", gpus={flavor: 1}))) if isinstance(d, OperationAdmitted)]
        assert (admitted.flavors, admitted.estimate) == ({GPU: flavor}, pytest.approx(price))
        sub = submitted(SPEC, op_id=flavor, queue="gpu")
        for e in (sub, estimated(sub, CATALOGUE, t(0), default_duration_s=3600.0), running(flavor, at=t(0), node=node_name),
                  succeeded(flavor, at=t(3600))):
            ledger.fold(e)
        charged = ledger.recorded(flavor, 0, nodes.get, lambda s: estimated(s, CATALOGUE, s.at, default_duration_s=0))
        assert charged is not None and charged.amount == pytest.approx(price)


def test_approval_leaves_out_the_flavors_of_another_agent_than_the_one_the_op_names():
    flavors = [gpu_flavor("a100"), msgspec.structs.replace(gpu_flavor("t4"), agent="b")]
    quota = ResourceQuota(resource=GPU, flavors=[FlavorQuota(name="a100", nominal=4), FlavorQuota(name="t4", nominal=4)])
    b = compile_book(QueuesConfig(agents=[Agent(name="b")], flavors=flavors, default_queue="gpu", queues=[
        Queue(name="gpu", resources=[quota], approval=ApprovalPolicy(cost_above=1.0))]))
    est = estimate(SPEC, CATALOGUE, 3600.0)
    pinned = fold(submitted(msgspec.structs.replace(SPEC, agent="b"), op_id="x", queue="gpu"),
                  CostEstimated(op_id="x", at=t(0), estimate=est.money, basis=est.basis, duration_s=3600.0,
                                points=est.points), cache_missed("x")).ops["x"]
    assert flavor_cost.highest(pinned, b) == (pytest.approx(0.35), " on flavor t4")  # the A100s are not agent b's
    assert hold_reason(pinned, b) is None
