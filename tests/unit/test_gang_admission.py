"""Gangs at admission: an op with replica groups is admitted all-or-nothing — its quota counts every
pod, and every pod must fit some node at once; an evicted gang backs off before its next attempt."""
from __future__ import annotations

import pytest

from opsched.proto.events import OperationAdmitted, OperationRejected
from opsched.services.admission import cycle, queries
from opsched.services.admission.state.admission_state import AdmissionState, Status, snapshot_of
from tests.builders import (
    GPU,
    book,
    case,
    case_name,
    evicted,
    fold,
    node,
    op,
    queue,
    queued,
    running,
    succeeded,
    t,
)

NS = "opsched"
BIG = book(queue("gpu", gpus={"h100": 16}))


def decide(state: AdmissionState, b, now: float) -> list:
    return cycle.decide(state, b, t(now), NS)


def gang(op_id: str = "g", gpus: int = 1, workers: int = 2, *, at: float = 0) -> list:
    """A master asking for ``gpus`` GPUs plus ``workers`` copies of it, queued ``at`` seconds after T0."""
    return queued(op(op_id).gpus(gpus).replicas("worker", workers).build(), op_id=op_id, queue="gpu", at=t(at))


def single(op_id: str, gpus: int, *, at: float = 0) -> list:
    return queued(op(op_id).gpus(gpus).build(), op_id=op_id, queue="gpu", at=t(at))


def admitted_ids(decisions) -> list[str]:
    return [d.op_id for d in decisions if isinstance(d, OperationAdmitted)]


def codes(state: AdmissionState, op_id: str) -> list[str]:
    return [r.code for r in state.ops[op_id].blocked]


def h100(name: str, gpus: int):
    return node(name, gpus=gpus, product="H100")


def test_the_builder_copies_the_main_container_into_each_replica_group():
    spec = op("g").gpus(2).env("A", "1").replicas("worker", 3).replicas("ps", 1).build()
    assert [(g.name, g.count) for g in spec.replicas] == [("worker", 3), ("ps", 1)]
    assert all(g.container == spec.container and g.container is not spec.container for g in spec.replicas)


def test_a_gang_records_each_pod_and_their_total():
    state = fold(gang(gpus=2, workers=3))
    g = state.ops["g"]
    assert g.pods == [{GPU: 2.0}] * 4
    assert g.request == {GPU: 8.0}


# ---- quota ------------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a gang within quota is admitted and counts every pod", nominal=3, admitted=True),
    case("a gang whose pods together exceed the quota waits, though one pod would fit", nominal=2, admitted=False),
], ids=case_name)
def test_quota_counts_all_pods_of_a_gang(c):
    b = book(queue("gpu", gpus={"h100": c.nominal}))
    state = fold(gang())
    assert admitted_ids(decide(state, b, 1)) == (["g"] if c.admitted else [])
    if c.admitted:
        assert snapshot_of(state, b).usage["gpu"] == {(GPU, "h100"): 3.0}
    else:
        assert codes(state, "g") == ["quota_exhausted"]
        assert "needs 3" in state.ops["g"].blocked[0].message


def test_a_running_gang_holds_quota_for_all_its_pods():
    b = book(queue("gpu", gpus={"h100": 4}))
    state = fold(gang(), single("x", 2, at=1))
    assert admitted_ids(decide(state, b, 1)) == ["g"]
    assert codes(state, "x") == ["quota_exhausted"]
    fold(succeeded("g", at=t(5)), state=state)
    assert admitted_ids(decide(state, b, 6)) == ["x"]


# ---- node capacity: all at once --------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("three 1-GPU pods fit across two nodes with three free GPUs", nodes=[h100("h-1", 2), h100("h-2", 1)],
         admitted=True),
    case("three 1-GPU pods fit on one node with three free GPUs", nodes=[h100("h-1", 3)], admitted=True),
    case("three 1-GPU pods wait when only two GPUs are free", nodes=[h100("h-1", 1), h100("h-2", 1)],
         admitted=False),
    case("three 2-GPU pods wait on two 3-GPU nodes: six free GPUs, but fragmented",
         nodes=[h100("h-1", 3), h100("h-2", 3)], gpus=2, admitted=False),
    case("a node of another product does not count", nodes=[h100("h-1", 2), node("a-1", gpus=8, product="A100")],
         admitted=False),
    case("a cordoned node does not count", nodes=[h100("h-1", 2), node("h-2", gpus=8, product="H100",
                                                                       schedulable=False)], admitted=False),
], ids=case_name)
def test_a_gang_is_admitted_only_when_every_pod_fits_some_node_at_once(c):
    state = fold(*c.nodes, gang(gpus=c.args.get("gpus", 1)))
    decisions = decide(state, BIG, 1)
    assert not [d for d in decisions if isinstance(d, OperationRejected)]
    assert admitted_ids(decisions) == (["g"] if c.admitted else [])
    if not c.admitted:
        assert state.ops["g"].status == Status.QUEUED
        assert codes(state, "g") == ["no_capacity"]
        assert "a gang of 3 pods" in state.ops["g"].blocked[0].message


def test_a_gang_waiting_for_capacity_says_so_in_full():
    state = fold(h100("h-1", 1), h100("h-2", 1), gang())
    assert decide(state, BIG, 1) == []
    (reason,) = state.ops["g"].blocked
    assert reason.message == ("no free capacity now for a gang of 3 pods "
                              "(3 x nvidia.com/gpu of product H100 in all)")
    assert [r.code for r in queries.why(state, BIG, "g").reasons] == ["no_capacity"]


def test_the_gang_takes_every_gpu_it_was_placed_on():
    state = fold(h100("h-1", 2), h100("h-2", 2), gang(), single("x", 2, at=1), single("y", 1, at=2))
    assert admitted_ids(decide(state, BIG, 1)) == ["g", "y"]  # x's 2 GPUs no longer fit on one node
    assert codes(state, "x") == ["no_capacity"]


def test_a_gang_waits_until_a_running_op_frees_the_room():
    state = fold(h100("h-1", 2), h100("h-2", 2), single("x", 2))
    assert admitted_ids(decide(state, BIG, 1)) == ["x"]
    fold(running("x", at=t(2), node="h-1"), gang(at=3), state=state)
    assert decide(state, BIG, 4) == []
    fold(succeeded("x", at=t(5), node="h-1"), state=state)
    assert admitted_ids(decide(state, BIG, 6)) == ["g"]


# ---- unfittable -------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a gang with a pod no node could take is rejected", nodes=[h100("h-1", 2), h100("h-2", 2)], gpus=4,
         rejected=True),
    case("a gang whose pods each fit some node is not rejected, though together they never could",
         nodes=[h100("h-1", 2), h100("h-2", 2)], gpus=2, rejected=False),
    case("a gang that only a cordoned node fits waits", nodes=[h100("h-1", 2), node("h-2", gpus=4, product="H100",
                                                                                    schedulable=False)],
         gpus=4, rejected=False),
], ids=case_name)
def test_a_gang_is_rejected_as_unfittable_only_when_a_single_pod_fits_no_node(c):
    state = fold(*c.nodes, gang(gpus=c.gpus))
    decisions = decide(state, BIG, 1)
    rejected = [d for d in decisions if isinstance(d, OperationRejected)]
    if c.rejected:
        (decision,) = rejected
        assert (decision.op_id, decision.reason) == ("g", "unfittable")
        assert decision.message == "no node offers 4 x nvidia.com/gpu of product H100"
        assert state.ops["g"].status == Status.REJECTED
    else:
        assert decisions == [] and state.ops["g"].status == Status.QUEUED


# ---- eviction and back-off --------------------------------------------------------------------

def evicted_gang() -> AdmissionState:
    """The gang was admitted at t(1) and evicted at t(100) with a 30 s back-off."""
    state = fold(h100("h-1", 4), gang())
    (first,) = decide(state, BIG, 1)
    assert (first.op_id, first.attempt, first.pod_name) == ("g", 0, "op-g-0")
    fold(running("g", at=t(2), node="h-1"), evicted("g", at=t(100), attempt=0, retry_after_s=30), state=state)
    return state


def test_an_evicted_gang_is_queued_again_for_its_next_attempt():
    state = evicted_gang()
    g = state.ops["g"]
    assert (g.status, g.attempt, g.not_before, g.pod_name, g.node) == (Status.QUEUED, 1, t(130), None, None)
    assert g.history.preemptions == 0 and g.preempted_at is None  # an eviction is neither a preemption nor a failure
    assert "g" not in state.usage.active.get("gpu", set()) and state.queues.waiting("gpu") == 1


@pytest.mark.parametrize("c", [
    case("right after the eviction it backs off", now=101, admitted=False),
    case("a second before the back-off ends it still waits", now=129, admitted=False),
    case("once 30 s have passed it is admitted for attempt 1", now=130, admitted=True),
    case("later it is admitted too", now=600, admitted=True),
], ids=case_name)
def test_an_evicted_gang_is_not_admitted_before_its_back_off_has_passed(c):
    state = evicted_gang()
    decisions = decide(state, BIG, c.now)
    if c.admitted:
        (decision,) = decisions
        assert (decision.op_id, decision.attempt, decision.pod_name) == ("g", 1, "op-g-1")
        assert state.ops["g"].status == Status.ADMITTED
    else:
        assert decisions == []
        assert codes(state, "g") == ["backoff"]
        assert "backing off after pods_not_ready until 12:02:10" in state.ops["g"].blocked[0].message


def test_the_back_off_does_not_hold_up_other_ops_of_the_queue():
    state = evicted_gang()
    fold(single("x", 1, at=110), state=state)
    assert admitted_ids(decide(state, BIG, 120)) == ["x"]


def test_news_of_the_evicted_attempt_is_ignored():
    state = evicted_gang()
    for stale in (running("g", at=t(101), attempt=0), succeeded("g", at=t(102), attempt=0),
                  evicted("g", at=t(103), attempt=0, retry_after_s=600)):
        assert state.apply(stale) is False
    g = state.ops["g"]
    assert (g.status, g.attempt, g.not_before) == (Status.QUEUED, 1, t(130))


def test_an_eviction_without_a_back_off_is_admitted_again_at_once():
    state = fold(h100("h-1", 4), gang())
    assert admitted_ids(decide(state, BIG, 1)) == ["g"]
    fold(evicted("g", at=t(10), attempt=0), state=state)
    (decision,) = decide(state, BIG, 10)
    assert (decision.attempt, decision.pod_name) == (1, "op-g-1")
