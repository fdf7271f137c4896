"""Admission: the state fold is idempotent and monotonic."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto.events import CacheHit, CacheMissed, CostEstimated, OperationTimedOut
from opsched.services.admission.state.admission_state import AdmissionState, Status
from tests.builders import (
    admitted,
    cache_hit,
    cache_missed,
    case,
    case_name,
    cost_estimated,
    dispatched,
    failed,
    op,
    rejected,
    running,
    submitted,
    succeeded,
    t,
)
from tests.unit.admission_scenarios import fold, ready, snapshot

# ---- the fold: idempotent and monotonic -------------------------------------------------------

HISTORY = [*ready("a"), *ready("b", at=t(1)), admitted(submitted(op("a").build(), op_id="a")),
           dispatched("a"), running("a", node="n1"), cache_hit("c"), succeeded("a", node="n1"),
           rejected("r")]


@pytest.mark.parametrize("c", [
    case("the whole history folded twice", events=HISTORY + HISTORY),
    case("every event folded twice in a row", events=[e for e in HISTORY for _ in (1, 2)]),
], ids=case_name)
def test_folding_the_same_events_again_changes_nothing(c):
    assert snapshot(fold(*c.events)) == snapshot(fold(*HISTORY))


GATES = (CacheHit, CacheMissed, CostEstimated)


@pytest.mark.parametrize("event", [e for e in HISTORY if not isinstance(e, GATES)],
                         ids=lambda e: f"{type(e).__name__} of {e.op_id}")
def test_a_duplicate_submission_or_lifecycle_event_is_reported_as_no_change(event):
    state = fold(*HISTORY)
    assert state.apply(event) is False


@pytest.mark.parametrize("c", [
    case("admitted again while admitted", events=[], again=admitted(submitted(op("a").build(), op_id="a"))),
    case("running again while running", events=[running("a")], again=running("a")),
    case("dispatched again while dispatched", events=[dispatched("a")], again=dispatched("a")),
], ids=case_name)
def test_a_repeated_event_of_an_active_op_is_reported_as_no_change(c):
    state = fold(ready("a"), admitted(submitted(op("a").build(), op_id="a")), *c.events)
    before = snapshot(state)
    assert state.apply(c.again) is False
    assert snapshot(state) == before


def test_a_duplicate_gate_event_is_reported_as_no_change():
    state = fold(submitted(op("a").build(), op_id="a"), cost_estimated("a"))
    assert state.apply(cost_estimated("a")) is False


@pytest.mark.parametrize("c", [
    case("running then a late dispatched stays running",
         events=[dispatched("a"), running("a"), dispatched("a")], status=Status.RUNNING),
    case("running then a late admitted stays running",
         events=[running("a"), admitted(submitted(op("a").build(), op_id="a"))], status=Status.RUNNING),
    case("succeeded then a late running stays succeeded",
         events=[running("a"), succeeded("a"), running("a")], status=Status.SUCCEEDED),
    case("a terminal status is final even for another terminal event",
         events=[failed("a"), succeeded("a")], status=Status.FAILED),
    case("a gate after admission does not requeue",
         events=[admitted(submitted(op("a").build(), op_id="a")), cache_missed("a")], status=Status.ADMITTED),
], ids=case_name)
def test_statuses_never_move_backwards(c):
    state = fold(ready("a"), *c.events)
    assert state.ops["a"].status == c.status


@pytest.mark.parametrize("c", [
    case("a failure without a reason", end=failed("a", reason=""), reason="failed"),
    case("a rejection without a reason", end=rejected("a", reason="", message=""), reason="rejected"),
    case("a time-out, whose event carries none", end=OperationTimedOut(op_id="a", at=t(1)), reason="timed_out"),
], ids=case_name)
def test_an_op_that_ends_without_a_reason_on_its_event_is_given_its_end_as_reason(c):
    state = fold(ready("a"), admitted(submitted(op("a").build(), op_id="a")), c.end)
    assert (state.ops["a"].status.terminal, state.ops["a"].reason) == (True, c.reason)


def test_a_finished_op_frees_its_slot_and_records_node_and_reason():
    state = fold(ready("a"), admitted(submitted(op("a").build(), op_id="a")), running("a", node="n1"),
                 failed("a", reason="OOMKilled"))
    assert state.usage.active.get("default", set()) == set()
    assert (state.ops["a"].node, state.ops["a"].reason) == ("n1", "OOMKilled")


# ---- the cache gate of an op with caching off (issue 36) ---------------------------------------

def test_an_op_with_caching_off_has_its_cache_gate_answered_at_its_submitted():
    state = fold(submitted(op("a").build(), op_id="a"))
    assert (state.ops["a"].caching, state.ops["a"].cache_known, state.ops["a"].cost_known) == (False, True, False)
    assert list(state.queues.cleared) == []  # its cost estimate is still to come
    state.apply(cost_estimated("a"))
    assert list(state.queues.cleared) == ["a"]


def test_an_op_that_uses_the_cache_waits_for_the_caches_answer():
    state = fold(submitted(msgspec.structs.replace(op("a").build(), batch="sweep-1"), op_id="a"), cost_estimated("a"))
    assert (state.ops["a"].caching, state.ops["a"].cache_known, list(state.queues.cleared)) == (True, False, [])
    assert state.apply(cache_missed("a")) is True
    assert list(state.queues.cleared) == ["a"]


def test_a_stream_written_before_issue_36_with_a_miss_disabled_replays_to_the_same_state():
    """Before issue 36 the cache answered every op with caching off with a miss ``disabled``; replayed, it is taken
    harmlessly (the gate was answered at the op's ``submitted``): the same records, queue and decisions."""
    a = submitted(op("a").build(), op_id="a")
    new = [a, cost_estimated("a"), *ready("b", at=t(1)), admitted(a), running("a", node="n1")]
    old = [a, cache_missed("a", reason="disabled"), cost_estimated("a"), *ready("b", at=t(1)),
           cache_missed("b", reason="disabled", at=t(1)), admitted(a), running("a", node="n1")]

    def replayed(events: list) -> tuple[AdmissionState, list[bool]]:
        state = AdmissionState()
        return state, [state.apply(e, seq) for seq, e in enumerate(events, start=1)]

    (before, changed), (after, _) = replayed(old), replayed(new)
    assert [c for e, c in zip(old, changed) if isinstance(e, CacheMissed)] == [False, False]  # answered already

    def comparable(state: AdmissionState) -> dict:
        ops = snapshot(state)
        for record in ops["ops"].values():
            record["history"] = {k: v for k, v in record["history"].items() if k not in ("kinds", "last_seq")}
        return ops
    assert comparable(before) == comparable(after)
    assert [e.event for e in before.ops["a"].history.timeline.entries] == ["submitted", "admitted", "running"]
    assert before.ops["a"].history.kinds == after.ops["a"].history.kinds | {"cache_missed"}  # retention's books
