"""Preemption: which running ops a waiting op may take room from (Kueue's rules), what admission asks
the dispatcher to do, and how an attempt ended by a preemption is folded."""
from __future__ import annotations

from datetime import datetime

import pytest

from proto.events import OperationAdmitted, PreemptRequested
from proto.queues import Aging, Preemption
from services.admission import cycle
from services.admission.state import AdmissionState, Status
from tests.builders import (
    GPU, book, cache_missed, case, case_name, configure_aging, cost_estimated, evicted, fold, node, op,
    preempt_requested, preempted, queue, queued, running, submitted, succeeded, t,
)

NS = "opsched"


def decide(state: AdmissionState, b, now: datetime) -> list:
    return cycle.decide(state, b, now, NS)


def gpu_op(op_id: str, gpus: int, *, queue: str = "q", at: float = 0, priority: int = 0,
           preemptible: bool = True, workers: int = 0) -> list:
    """A queued op asking for ``gpus`` GPUs (per pod), submitted ``at`` seconds after T0."""
    spec = op(op_id).gpus(gpus).priority(priority).preemptible(preemptible)
    if workers:
        spec = spec.replicas("worker", workers)
    return queued(spec.queue(queue).build(), op_id=op_id, queue=queue, at=t(at))


def start(state: AdmissionState, b, at: float, *ids: str, nodes: dict[str, str] | None = None) -> None:
    """A cycle at ``t(at)`` admits exactly ``ids`` (in that order); each starts running a second later."""
    assert admitted_ids(decide(state, b, t(at))) == list(ids)
    for op_id in ids:
        fold(running(op_id, at=t(at + 1), attempt=state.ops[op_id].attempt, node=(nodes or {}).get(op_id)),
             state=state)


def admitted_ids(decisions) -> list[str]:
    return [d.op_id for d in decisions if isinstance(d, OperationAdmitted)]


def preemptions(decisions) -> list[PreemptRequested]:
    return [d for d in decisions if isinstance(d, PreemptRequested)]


def victims(decisions) -> list[str]:
    return sorted(d.op_id for d in preemptions(decisions))


def codes(state: AdmissionState, op_id: str) -> list[str]:
    return [r.code for r in state.ops[op_id].blocked]


Q2 = book(queue("q", gpus={"h100": 2}))
Q1 = book(queue("q", gpus={"h100": 1}))


def q1(**preemption) -> object:
    return book(queue("q", gpus={"h100": 1}, preemption=Preemption(**preemption)))


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
    assert (lo.status, lo.attempt, lo.preempted_by, lo.preempted_at, lo.preemptions) == (
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


# ---- folding ----------------------------------------------------------------------------------

def preempting() -> AdmissionState:
    """lo runs; hi (higher priority) has asked for its preemption."""
    state = fold(gpu_op("lo", 1))
    start(state, Q1, 0, "lo")
    fold(gpu_op("hi", 1, priority=10, at=5), state=state)
    assert victims(decide(state, Q1, t(10))) == ["lo"]
    return state


def test_folding_the_same_preempt_request_twice_changes_nothing():
    state = fold(gpu_op("lo", 1))
    start(state, Q1, 0, "lo")
    fold(gpu_op("hi", 1, priority=10, at=5), state=state)
    request = preempt_requested("lo", preemptor="hi", at=t(10))
    assert state.apply(request) is True
    assert state.apply(request) is False
    assert state.apply(preempt_requested("lo", preemptor="other", at=t(11))) is False
    assert state.ops["lo"].preempted_by == "hi" and state.nominated == {"hi": {"lo"}}
    assert state.ops["lo"].status == Status.RUNNING


def test_a_preemption_whose_publish_failed_is_forgotten():
    state = preempting()
    state.unassume("lo", t(10))
    lo = state.ops["lo"]
    assert (lo.status, lo.preempted_by) == (Status.RUNNING, None)
    assert not state.nominated.get("hi")
    assert victims(decide(state, Q1, t(20))) == ["lo"]  # asked again


def test_a_preemption_whose_publish_failed_is_forgotten_even_when_the_victim_is_not_running_yet():
    state = fold(gpu_op("lo", 1))
    assert admitted_ids(decide(state, Q1, t(0))) == ["lo"]  # published; the dispatcher has not reported yet
    fold(gpu_op("hi", 1, priority=10, at=5), state=state)
    assert victims(decide(state, Q1, t(10))) == ["lo"]
    state.unassume("lo", t(10))
    lo = state.ops["lo"]
    assert (lo.status, lo.attempt, lo.preempted_by) == (Status.ADMITTED, 0, None)
    assert "lo" in state.queue("q").active
    assert not state.nominated.get("hi")
    assert admitted_ids(decide(state, Q1, t(20))) == []  # lo's pods exist: no room for hi yet


def test_a_preemptor_whose_request_failed_does_not_jump_the_queue_later():
    state = preempting()
    state.unassume("lo", t(10))
    # lo ends on its own; a higher-priority op arrives: the normal order gives it the room
    fold(succeeded("lo", at=t(15)), gpu_op("top", 1, priority=20, at=16), state=state)
    decisions = decide(state, Q1, t(20))
    assert admitted_ids(decisions) == ["top"] and preemptions(decisions) == []


def test_a_stale_event_of_an_earlier_attempt_is_ignored():
    state = preempting()
    fold(preempted("lo", at=t(20), preemptor="hi"), state=state)
    lo = state.ops["lo"]
    assert (lo.status, lo.attempt) == (Status.QUEUED, 1)
    for stale in (running("lo", at=t(21), attempt=0), succeeded("lo", at=t(22), attempt=0),
                  preempted("lo", at=t(23), attempt=0), evicted("lo", at=t(24), attempt=0),
                  preempt_requested("lo", preemptor="x", at=t(25), attempt=0)):
        assert state.apply(stale) is False, stale
    assert (lo.status, lo.attempt, lo.preemptions, lo.preempted_at) == (Status.QUEUED, 1, 1, t(20))
    assert state.queue("q").waiting == 2 and "lo" not in state.queue("q").active  # lo and hi


def test_a_preemption_is_not_a_failure_the_op_is_queued_again():
    state = preempting()
    fold(preempted("lo", at=t(20), preemptor="hi", reason="within_queue"), state=state)
    lo = state.ops["lo"]
    assert lo.status == Status.QUEUED and not lo.status.terminal
    assert (lo.pod_name, lo.node, lo.flavors, lo.borrowing) == (None, None, {}, False)
    assert admitted_ids(decide(state, Q1, t(30))) == ["hi"]
    fold(succeeded("hi", at=t(40)), state=state)
    (again,) = decide(state, Q1, t(50))
    assert (again.op_id, again.attempt, again.pod_name) == ("lo", 1, "op-lo-1")
    fold(running("lo", at=t(51), attempt=1), state=state)
    assert state.ops["lo"].status == Status.RUNNING


def test_replaying_the_stream_rebuilds_the_same_state():
    events = [*gpu_op("lo", 1), *gpu_op("hi", 1, priority=10, at=5)]
    live = fold(*events)
    out = decide(live, Q1, t(1))
    events += out
    fold(running("lo", at=t(2), node=None), state=live)
    events.append(running("lo", at=t(2), node=None))
    for at in (10, 20):
        out = decide(live, Q1, t(at))
        events += out
    fold(preempted("lo", at=t(30), preemptor="hi"), state=live)
    events.append(preempted("lo", at=t(30), preemptor="hi"))
    events += decide(live, Q1, t(40))

    replayed = fold(*events)
    for op_id in ("lo", "hi"):
        a, b = live.ops[op_id], replayed.ops[op_id]
        assert (a.status, a.attempt, a.preempted_by, a.preempted_at, a.preemptions) == (
            b.status, b.attempt, b.preempted_by, b.preempted_at, b.preemptions)
    assert (live.ops["hi"].status, live.ops["lo"].status) == (Status.ADMITTED, Status.QUEUED)
    assert replayed.nominated == live.nominated == {}


# ---- aging and preemption ---------------------------------------------------------------------

def test_two_ops_of_equal_priority_do_not_preempt_each_other_back_and_forth_because_of_aging():
    b = book(queue("q", gpus={"h100": 1}, aging=Aging(per_minute=1, cap=30)))
    state = configure_aging(AdmissionState(), b)
    fold(gpu_op("a", 1, at=0), gpu_op("b", 1, at=1), state=state)
    requests = []
    for minute in range(15):
        now = 60 * minute + 2
        for d in decide(state, b, t(now)):
            if isinstance(d, OperationAdmitted):
                fold(running(d.op_id, at=t(now + 1), attempt=d.attempt, node=None), state=state)
            elif isinstance(d, PreemptRequested):
                requests.append(d.op_id)
                fold(preempted(d.op_id, at=t(now + 2), attempt=d.attempt, preemptor=d.preemptor), state=state)
    assert len(requests) <= 1, f"preempted {len(requests)} times: {requests}"


def test_aging_orders_the_queue_but_never_lets_an_op_preempt():
    b = book(queue("q", gpus={"h100": 1}, aging=Aging(per_minute=1, cap=100)))
    state = configure_aging(AdmissionState(), b)
    fold(gpu_op("mid", 1, priority=5, at=0), gpu_op("lo", 1, priority=0, at=0), state=state)
    start(state, b, 0, "mid")
    assert victims(decide(state, b, t(4 * 60))) == []  # lo's effective 4 < mid's 5
    assert victims(decide(state, b, t(60 * 60))) == []  # aged to 60 > 5, but its base 0 is not


def test_a_preemptor_compares_its_base_priority_with_the_victims_priority_at_admission():
    b = book(queue("q", gpus={"h100": 1}, aging=Aging(per_minute=1, cap=100)))
    state = configure_aging(AdmissionState(), b)
    fold(gpu_op("aged", 1, priority=0, at=0), state=state)
    (admitted,) = decide(state, b, t(30 * 60))  # admitted with an aged priority of 30
    assert admitted.effective_priority == 30
    fold(gpu_op("high", 1, priority=20, at=30 * 60), state=state)
    assert victims(decide(state, b, t(31 * 60))) == []  # 20 does not outrank 30
    fold(gpu_op("higher", 1, priority=40, at=31 * 60), state=state)
    (request,) = preemptions(decide(state, b, t(32 * 60)))
    assert (request.op_id, request.preemptor) == ("aged", "higher")
    assert request.message == "higher (queue q, priority 40) outranks aged (queue q, priority 30)"


def test_the_effective_priority_at_admission_is_recorded_on_the_event():
    b = book(queue("q", gpus={"h100": 1}, aging=Aging(per_minute=2, cap=100)))
    state = configure_aging(AdmissionState(), b)
    fold(gpu_op("x", 1, priority=3), state=state)
    (decision,) = decide(state, b, t(90))
    assert decision.effective_priority == pytest.approx(6.0)
    assert state.ops["x"].admitted_priority == pytest.approx(6.0)
    assert state.ops["x"].request == {GPU: 1.0}
