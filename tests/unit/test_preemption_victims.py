"""Preemption: the round trip (request, victims gone, admission), and which running ops a waiting op
may take room from, in which order (Kueue's rules)."""
from __future__ import annotations

import pytest

from opsched.services.admission.state.admission_state import AdmissionState, Status
from tests.builders import (
    book,
    cache_missed,
    case,
    case_name,
    cost_estimated,
    evicted,
    fold,
    op,
    preempted,
    queue,
    submitted,
    succeeded,
    t,
)
from tests.unit.preemption_scenarios import (
    NS,
    Q1,
    Q2,
    admitted_ids,
    codes,
    decide,
    gpu_op,
    preemptions,
    q1,
    start,
    victims,
)

# ---- the whole round trip ---------------------------------------------------------------------

def test_a_high_priority_op_preempts_the_lowest_priority_running_op_then_is_admitted_first():
    state = fold(gpu_op("lo", 1, priority=0), gpu_op("peer", 1, priority=10, at=1))
    start(state, Q2, 2, "peer", "lo")
    fold(gpu_op("hi", 1, priority=10, at=10), state=state)

    decisions = decide(state, Q2, t(20))
    assert admitted_ids(decisions) == []  # not in the same cycle: the victim's pods still run
    (request,) = preemptions(decisions)
    assert (request.op_id, request.attempt, request.pod_names, request.namespace, request.preemptor,
            request.reason) == ("lo", 0, ["op-lo-0"], NS, "hi", "within_queue")
    assert request.at == t(20)
    assert request.message == "hi (queue q, priority 10) outranks lo (queue q, priority 0)"
    assert state.ops["lo"].preempted_by == "hi" and state.nominated == {"hi": {"lo"}}
    assert state.ops["hi"].status == Status.QUEUED and codes(state, "hi") == ["waiting_for_victims"]

    assert decide(state, Q2, t(25)) == []  # the victim is already being preempted: nothing more to do
    assert codes(state, "hi") == ["waiting_for_victims"] and "lo" in state.ops["hi"].blocked[0].message

    # the victim's pods are gone; an op that would come before hi in the normal order arrives meanwhile
    fold(preempted("lo", at=t(30), preemptor="hi"),
         submitted(op("early").gpus(1).priority(10).build(), op_id="early", queue="q", at=t(5)),
         cost_estimated("early", at=t(30)), cache_missed("early", at=t(30)), state=state)
    lo = state.ops["lo"]
    assert (lo.status, lo.attempt, lo.preempted_by, lo.preempted_at, lo.history.preemptions) == (
        Status.QUEUED, 1, None, t(30), 1)
    assert state.nominated == {"hi": set()}

    decisions = decide(state, Q2, t(40))
    assert admitted_ids(decisions) == ["hi"] and preemptions(decisions) == []
    assert state.nominated == {} and codes(state, "early") == ["quota_exhausted"]

    fold(succeeded("hi", at=t(50)), state=state)
    assert admitted_ids(decide(state, Q2, t(60))) == ["early"]  # priority 10 before the requeued lo
    fold(succeeded("peer", at=t(70)), state=state)
    (again,) = decide(state, Q2, t(80))
    assert (again.op_id, again.attempt, again.pod_name) == ("lo", 1, "op-lo-1")


def test_the_request_names_every_pod_of_a_gang_victim_and_its_own_namespace():
    b = book(queue("q", namespace="team-a", gpus={"h100": 3}))
    state = fold(gpu_op("gang", 1, priority=0, workers=2))
    start(state, b, 1, "gang")
    fold(gpu_op("hi", 1, priority=10, at=5), state=state)
    (request,) = preemptions(decide(state, b, t(10)))
    assert request.pod_names == ["op-gang-0", "op-gang-0-worker-0", "op-gang-0-worker-1"]
    assert request.namespace == "team-a"


def test_the_victim_of_a_later_attempt_is_named_by_that_attempt():
    state = fold(gpu_op("lo", 1))
    start(state, Q1, 1, "lo")
    fold(evicted("lo", at=t(2), attempt=0), state=state)
    start(state, Q1, 3, "lo")
    fold(gpu_op("hi", 1, priority=10, at=5), state=state)
    (request,) = preemptions(decide(state, Q1, t(10)))
    assert (request.op_id, request.attempt, request.pod_names) == ("lo", 1, ["op-lo-1"])


# ---- which victims, in which order ------------------------------------------------------------

LAB = book(queue("a", cohort="lab", gpus={"h100": 2}), queue("b", cohort="lab", gpus={"h100": 2}))


@pytest.mark.parametrize("c", [
    case("a borrower of another queue of the cohort goes before a lower-priority op of the preemptor's own queue",
         book=LAB,
         running=[(0, [gpu_op("a1", 1, queue="a", priority=0), gpu_op("b1", 1, queue="b", priority=5, at=1),
                       gpu_op("b2", 1, queue="b", priority=5, at=2), gpu_op("b3", 1, queue="b", priority=5, at=3)],
                   ["a1", "b1", "b2", "b3"])],
         preemptor=gpu_op("hi", 1, queue="a", priority=10, at=10), victims={"b3": "reclaim"}),
    case("the lowest priority goes first, though admitted earliest",
         book=book(queue("q", gpus={"h100": 3})),
         running=[(0, [gpu_op("v0", 1, priority=0)], ["v0"]), (10, [gpu_op("v3", 1, priority=3)], ["v3"]),
                  (20, [gpu_op("v5", 1, priority=5)], ["v5"])],
         preemptor=gpu_op("hi", 1, priority=10, at=30), victims={"v0": "within_queue"}),
    case("among equal priorities the most recently admitted goes first",
         book=book(queue("q", gpus={"h100": 3})),
         running=[(0, [gpu_op("e1", 1)], ["e1"]), (20, [gpu_op("e3", 1, at=1)], ["e3"]),
                  (10, [gpu_op("e2", 1, at=2)], ["e2"])],
         preemptor=gpu_op("hi", 1, priority=10, at=30), victims={"e3": "within_queue"}),
    case("victims are taken greedily, then one the preemptor fits without is dropped",
         book=book(queue("q", gpus={"h100": 4})),
         running=[(0, [gpu_op("keep", 1, priority=20)], ["keep"]), (10, [gpu_op("big", 2, priority=1)], ["big"]),
                  (20, [gpu_op("small", 1, priority=0)], ["small"])],
         preemptor=gpu_op("hi", 2, priority=10, at=30), victims={"big": "within_queue"}),
    case("as many victims as the preemptor needs are taken",
         book=book(queue("q", gpus={"h100": 3})),
         running=[(0, [gpu_op("v1", 1, priority=1), gpu_op("v2", 1, priority=2), gpu_op("v3", 1, priority=3)],
                   ["v3", "v2", "v1"])],
         preemptor=gpu_op("hi", 2, priority=10, at=30), victims={"v1": "within_queue", "v2": "within_queue"}),
    case("an op of equal priority is never a victim under LowerPriority",
         book=Q1, running=[(0, [gpu_op("peer", 1, priority=10)], ["peer"])],
         preemptor=gpu_op("hi", 1, priority=10, at=30), victims={}),
    case("an op of a higher priority is never a victim",
         book=Q1, running=[(0, [gpu_op("top", 1, priority=20)], ["top"])],
         preemptor=gpu_op("hi", 1, priority=10, at=30), victims={}),
    case("an op that is not preemptible is never chosen",
         book=Q1, running=[(0, [gpu_op("lo", 1, preemptible=False)], ["lo"])],
         preemptor=gpu_op("hi", 1, priority=10, at=30), victims={}),
    case("a non-preemptible op is passed over for a preemptible one of a higher priority",
         book=Q2, running=[(0, [gpu_op("lo", 1, preemptible=False), gpu_op("mid", 1, priority=5)], ["mid", "lo"])],
         preemptor=gpu_op("hi", 1, priority=10, at=30), victims={"mid": "within_queue"}),
    case("withinQueue Never preempts nothing",
         book=q1(within_queue="Never"), running=[(0, [gpu_op("lo", 1)], ["lo"])],
         preemptor=gpu_op("hi", 1, priority=10, at=30), victims={}),
], ids=case_name)
def test_victims_are_chosen_by_kueue_rules(c):
    state = AdmissionState()
    for at, events, ids in c.running:
        fold(*events, state=state)
        start(state, c.book, at, *ids)
    fold(c.preemptor, state=state)
    decisions = decide(state, c.book, t(100))
    assert {d.op_id: d.reason for d in preemptions(decisions)} == c.victims
    assert admitted_ids(decisions) == []
    assert all(d.preemptor == "hi" for d in preemptions(decisions))
    for op_id, o in state.ops.items():
        if o.status.active:
            assert (o.preempted_by == "hi") == (op_id in c.victims)
    assert codes(state, "hi") == (["waiting_for_victims"] if c.victims else ["quota_exhausted"])


@pytest.mark.parametrize("c", [
    case("a newer op of equal priority is preempted", victim_at=10, victims=["peer"]),
    case("an older op of equal priority is not", victim_at=-10, victims=[]),
], ids=case_name)
def test_lower_or_newer_equal_priority_preempts_a_newer_op_of_the_same_priority(c):
    b = q1(within_queue="LowerOrNewerEqualPriority")
    state = fold(gpu_op("peer", 1, priority=5, at=c.victim_at))
    start(state, b, 20, "peer")
    # hi was submitted at T0 but its gates cleared only after peer was admitted
    fold(submitted(op("hi").gpus(1).priority(5).build(), op_id="hi", queue="q", at=t(0)),
         cost_estimated("hi", at=t(50)), cache_missed("hi", at=t(50)), state=state)
    assert victims(decide(state, b, t(60))) == c.victims
