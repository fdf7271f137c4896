"""Preemption: how preempt requests and preemptions are folded into the admission state."""
from __future__ import annotations

from opsched.services.admission.state.admission_state import AdmissionState, Status
from tests.builders import (
    evicted,
    fold,
    preempt_requested,
    preempted,
    running,
    succeeded,
    t,
)
from tests.unit.preemption_scenarios import (
    Q1,
    admitted_ids,
    decide,
    gpu_op,
    preemptions,
    start,
    victims,
)

# ---- folding ----------------------------------------------------------------------------------

def preempting() -> AdmissionState:
    """lo runs; hi (higher priority) has asked for its preemption."""
    state = fold(gpu_op("lo", 1))
    start(state, Q1, 0, "lo")
    fold(gpu_op("hi", 1, priority=10, at=5), state=state)
    assert victims(decide(state, Q1, t(10))) == ["lo"]
    return state


def test_a_preempt_request_naming_a_preemptor_not_held_nominates_nobody_and_the_cycle_goes_on():
    """Found by the fuzz suite: a nomination of an unknown preemptor made every cycle raise KeyError."""
    state = fold(gpu_op("lo", 1))
    start(state, Q1, 0, "lo")
    assert state.apply(preempt_requested("lo", preemptor="ghost", at=t(10))) is True
    assert (state.ops["lo"].preempted_by, state.nominated) == ("ghost", {})
    fold(gpu_op("next", 1, at=11), state=state)
    assert decide(state, Q1, t(12)) == []  # one GPU, still held by lo: nothing to decide, nothing raised


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
    state.fold.unassume("lo", t(10))
    lo = state.ops["lo"]
    assert (lo.status, lo.preempted_by) == (Status.RUNNING, None)
    assert not state.nominated.get("hi")
    assert victims(decide(state, Q1, t(20))) == ["lo"]  # asked again


def test_a_preemption_whose_publish_failed_is_forgotten_even_when_the_victim_is_not_running_yet():
    state = fold(gpu_op("lo", 1))
    assert admitted_ids(decide(state, Q1, t(0))) == ["lo"]  # published; the dispatcher has not reported yet
    fold(gpu_op("hi", 1, priority=10, at=5), state=state)
    assert victims(decide(state, Q1, t(10))) == ["lo"]
    state.fold.unassume("lo", t(10))
    lo = state.ops["lo"]
    assert (lo.status, lo.attempt, lo.preempted_by) == (Status.ADMITTED, 0, None)
    assert "lo" in state.usage.active.get("q", set())
    assert not state.nominated.get("hi")
    assert admitted_ids(decide(state, Q1, t(20))) == []  # lo's pods exist: no room for hi yet


def test_a_preemptor_whose_request_failed_does_not_jump_the_queue_later():
    state = preempting()
    state.fold.unassume("lo", t(10))
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
    assert (lo.status, lo.attempt, lo.history.preemptions, lo.preempted_at) == (Status.QUEUED, 1, 1, t(20))
    assert state.queues.waiting("q") == 2 and "lo" not in state.usage.active.get("q", set())  # lo and hi


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
        assert (a.status, a.attempt, a.preempted_by, a.preempted_at, a.history.preemptions) == (
            b.status, b.attempt, b.preempted_by, b.preempted_at, b.history.preemptions)
    assert (live.ops["hi"].status, live.ops["lo"].status) == (Status.ADMITTED, Status.QUEUED)
    assert replayed.nominated == live.nominated == {}
