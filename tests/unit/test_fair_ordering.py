"""Bounded by identity (issue 28): within equal priority a queue interleaves its requesters round-robin
(``model.ordering``), and a requester may have at most ``maxPendingPerUser`` ops pending in a queue
(``user_pending_cap``), counted from the fold so that a restarted admission counts the same."""
from __future__ import annotations

import msgspec
import pytest

from opsched.bus import logging as oplog
from opsched.proto.events import OperationRejected, OperationSubmitted
from opsched.proto.queues import DEFAULT_MAX_PENDING_PER_USER, Queue
from opsched.proto.reasons import Reason
from opsched.services.admission import cycle, queries
from opsched.services.admission.handlers import on_submit
from opsched.services.admission.model.ordering import ANONYMOUS, FairRanks, sort_key
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, book, fold, op, queue, stopped, succeeded, t
from tests.builders.clock import FakeClock
from tests.builders.commands import submit
from tests.unit.admission_scenarios import NS, admitted_ids, ready

BURST = 1000


def decide(state: AdmissionState, b, now=T0) -> list:
    return cycle.decide(state, b, now, NS)


def burst_then_one(*, extra: list | None = None) -> AdmissionState:
    """ann submits BURST ops (a-0 ... a-999, one a second), then bob submits one (b-0)."""
    events = [ready(f"a-{i}", at=t(i), by="ann") for i in range(BURST)]
    return fold(*events, ready("b-0", at=t(BURST), by="bob"), *(extra or []))


def enqueue(state: AdmissionState) -> AdmissionState:
    """Queue the ops whose gates cleared (as the next cycle does first, before it admits any)."""
    while state.queues.cleared:
        state.fold.enqueue_cleared(state.ops[state.queues.cleared.pop(0)], T0)
    return state


def position(state: AdmissionState, b, op_id: str) -> int:
    answer = queries.why(enqueue(state), b, op_id, t(BURST + 1))
    assert answer.position is not None
    return answer.position


# ---- the rule ----------------------------------------------------------------------------------

def test_the_key_puts_priority_before_the_fair_rank_before_time_before_id():
    assert sort_key(10, 5, t(9), "z") < sort_key(0, 0, t(0), "a")  # priority first
    assert sort_key(0, 0, t(9), "z") < sort_key(0, 1, t(0), "a")  # then the fair rank
    assert sort_key(0, 1, t(0), "z") < sort_key(0, 1, t(9), "a")  # then time
    assert sort_key(0, 1, t(0), "a") < sort_key(0, 1, t(0), "b")  # then the op id


def test_a_requesters_ops_rank_0_1_2_and_a_newcomer_joins_at_the_round():
    r = FairRanks()
    assert [r.entered("q", "ann", f"a-{i}") for i in range(5)] == [0, 1, 2, 3, 4]
    assert r.entered("q", "bob", "b-0") == 0  # right after ann's first, not after all five
    assert r.entered("q", "bob", "b-1") == 1
    assert r.entered("other", "bob", "x") == 0  # per queue
    for i in range(3):
        r.left("q", "ann", f"a-{i}")
    r.left("q", "bob", "b-0")
    r.left("q", "bob", "b-1")
    assert (r.waiting("q", "ann"), r.waiting("q", "bob")) == (2, 0)
    assert r.entered("q", "carol", "c-0") == 3  # the round: the lowest rank waiting (a-3's), never back to 0
    assert r.entered("q", "ann", "a-5") == 5  # after its own youngest
    assert r.entered("q", "ann", "a-5") == 5  # the same op twice: the same rank, counted once
    assert r.waiting("q", "ann") == 3


def test_an_op_put_back_where_it_was_keeps_its_rank():
    r = FairRanks()
    r.entered("q", "ann", "a-0"), r.entered("q", "ann", "a-1")
    r.left("q", "ann", "a-0")
    assert r.entered("q", "ann", "a-0", keep=0) == 0
    assert r.entered("q", "ann", "a-2") == 2


def test_the_round_heap_stays_bounded_under_churn():
    r = FairRanks()
    r.entered("q", "held", "h")  # one op waits throughout (rank 0): the round stays 0
    for i in range(5000):
        r.entered("q", "ann", f"a-{i}")
        r.left("q", "ann", f"a-{i}")
    assert len(r.queues["q"]._low) <= 2 * len(r.queues["q"].ranks) + 64


# ---- a burst and one op of another requester ---------------------------------------------------

def test_after_a_burst_of_one_requester_anothers_op_is_second_in_the_queue():
    b = book(queue("default", concurrency=1))
    state = burst_then_one()
    assert position(state, b, "b-0") == 2
    assert position(state, b, "a-0") == 1 and position(state, b, "a-1") == 3
    answer = queries.why(enqueue(state), b, "b-0", t(BURST + 1))
    assert answer.queued_total == BURST + 1
    assert any(r.code == Reason.QUEUE_POSITION and "1 op(s) ahead" in r.message for r in answer.reasons)


def test_and_is_admitted_second_one_at_a_time():
    b = book(queue("default", concurrency=1))
    state = burst_then_one()
    assert admitted_ids(decide(state, b)) == ["a-0"]
    fold(succeeded("a-0"), state=state)
    assert admitted_ids(decide(state, b)) == ["b-0"]
    fold(succeeded("b-0"), state=state)
    assert admitted_ids(decide(state, b)) == ["a-1"]


def test_several_requesters_interleave_round_robin():
    b = book(queue("default", concurrency=9))
    state = fold(*[ready(f"a-{i}", at=t(i), by="ann") for i in range(3)],
                 *[ready(f"b-{i}", at=t(10 + i), by="bob") for i in range(3)],
                 *[ready(f"c-{i}", at=t(20 + i)) for i in range(3)])  # no requester: "anonymous"
    assert admitted_ids(decide(state, b)) == ["a-0", "b-0", "c-0", "a-1", "b-1", "c-1", "a-2", "b-2", "c-2"]


def test_priority_still_beats_fairness():
    b = book(queue("default", concurrency=1))
    state = burst_then_one(extra=[ready("a-urgent", priority=10, at=t(BURST + 5), by="ann")])
    assert position(state, b, "a-urgent") == 1
    assert position(state, b, "b-0") == 3
    assert admitted_ids(decide(state, b)) == ["a-urgent"]


def test_aging_still_lifts_an_old_low_priority_op_over_a_fresh_high_one():
    from opsched.proto.queues import Aging
    from tests.builders import configure_aging

    b = book(queue("default", concurrency=1, aging=Aging(per_minute=1, cap=100)))
    state = configure_aging(AdmissionState(), b)
    fold(ready("old", at=t(0), by="ann"), ready("new", priority=5, at=t(600), by="bob"), state=state)
    assert admitted_ids(decide(state, b, now=t(601))) == ["old"]  # 0 + 10 minutes aged > 5


def test_a_fifo_queue_keeps_first_come_first_served():
    b = book(queue("default", concurrency=1, ordering="fifo"))
    state = burst_then_one()
    from tests.builders import configure_aging

    configure_aging(state, b)  # as the service does on a configuration: the queue's ordering
    assert position(state, b, "b-0") == BURST + 1
    configure_aging(state, book(queue("default", concurrency=1)))  # back to fair: re-filed
    assert position(state, b, "b-0") == 2


def test_a_restarted_admission_folds_the_same_order():
    """A replay of the same stream (admission restarted) gives the same ranks and positions."""
    b = book(queue("default", concurrency=1))
    stream = [ready(f"a-{i}", at=t(i), by="ann") for i in range(5)] + [ready("b-0", at=t(5), by="bob")]
    live = fold(*stream)
    decided = decide(live, b)
    stream += [decided, succeeded("a-0"), ready("c-0", at=t(7), by="carol"), stopped("a-3")]
    live = fold(*stream[-3:], state=live)
    replayed = fold(*stream)
    order = ["b-0", "c-0", "a-1", "a-2", "a-4"]
    assert [live.ops[i].fair_rank for i in order] == [replayed.ops[i].fair_rank for i in order]
    assert [position(live, b, i) for i in order] == [position(replayed, b, i) for i in order] == [1, 2, 3, 4, 5]
    assert live.queues.pending_of("default", "ann") == replayed.queues.pending_of("default", "ann") == 3


# ---- the cap -----------------------------------------------------------------------------------

@pytest.fixture
def ctx() -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))


def submit_as(user: str | None, op_id: str, queue_name: str = "q"):
    return msgspec.structs.replace(submit(op(op_id).queue(queue_name).build(), op_id=op_id), requested_by=user or "")


def test_the_cap_refuses_the_next_pending_op_of_that_user_in_that_queue_and_admits_again_once_one_leaves(ctx):
    b = book(queue("q", max_pending_per_user=2, concurrency=1), queue("other", max_pending_per_user=2))
    state = AdmissionState()
    for op_id in ("a", "b"):
        event = on_submit(submit_as("ann", op_id), ctx, state, b)
        assert isinstance(event, OperationSubmitted)
        fold(event, state=state)

    over = on_submit(submit_as("ann", "c"), ctx, state, b)
    assert isinstance(over, OperationRejected) and over.reason == Reason.USER_PENDING_CAP == "user_pending_cap"
    assert over.queue == "q"
    assert over.message == ("user ann already has 2 ops pending in queue q (maxPendingPerUser 2); submit again once "
                            "some are admitted or end, or use another queue")
    assert isinstance(on_submit(submit_as("bob", "d"), ctx, state, b), OperationSubmitted)  # per user
    assert isinstance(on_submit(submit_as("ann", "e", "other"), ctx, state, b), OperationSubmitted)  # per queue

    fold(ready("a", by="ann")[1:], state=state)  # its gates clear, then the cycle admits it
    assert admitted_ids(decide(state, b)) == ["a"]
    assert isinstance(on_submit(submit_as("ann", "c"), ctx, state, b), OperationSubmitted)


def test_submits_accepted_but_not_folded_yet_count(ctx):
    """A burst the leader accepts faster than their submitted events come back: still at most the cap."""
    b = book(queue("q", max_pending_per_user=3))
    state = AdmissionState()
    events = [on_submit(submit_as("ann", f"a-{i}"), ctx, state, b) for i in range(5)]
    assert [type(e).__name__ for e in events] == ["OperationSubmitted"] * 3 + ["OperationRejected"] * 2
    fold(*events[:3], state=state)
    assert state.queues.pending_of("q", "ann") == 3  # folded: counted once, not twice


def test_a_submit_accepted_whose_submitted_never_comes_back_is_let_go_after_a_minute(ctx):
    """Its publish failed for good (it was dead-lettered): it does not hold the user's place for ever."""
    b = book(queue("q", max_pending_per_user=1))
    state = AdmissionState()
    assert isinstance(on_submit(submit_as("ann", "lost"), ctx, state, b), OperationSubmitted)  # never folded
    assert isinstance(on_submit(submit_as("ann", "a"), ctx, state, b), OperationRejected)
    ctx.clock.advance(61)
    assert isinstance(on_submit(submit_as("ann", "a"), ctx, state, b), OperationSubmitted)


def test_ops_without_a_requester_share_the_anonymous_cap(ctx):
    b = book(queue("q", max_pending_per_user=1))
    state = AdmissionState()
    fold(on_submit(submit_as(None, "a"), ctx, state, b), state=state)
    over = on_submit(submit_as(None, "b"), ctx, state, b)
    assert isinstance(over, OperationRejected) and f"user {ANONYMOUS} already has 1" in over.message


def test_an_op_that_ended_before_it_ran_frees_its_place(ctx):
    b = book(queue("q", max_pending_per_user=1))
    state = AdmissionState()
    fold(on_submit(submit_as("ann", "a"), ctx, state, b), state=state)
    fold(stopped("a"), state=state)
    assert isinstance(on_submit(submit_as("ann", "b"), ctx, state, b), OperationSubmitted)


def test_a_cap_of_zero_is_no_cap_and_the_default_is_1000(ctx):
    assert Queue(name="q").max_pending_per_user == DEFAULT_MAX_PENDING_PER_USER == 1000
    assert Queue(name="q").ordering == "fair-by-user"
    b = book(queue("q", max_pending_per_user=0))
    state = AdmissionState()
    for i in range(5):
        fold(on_submit(submit_as("ann", f"a-{i}"), ctx, state, b), state=state)
    assert state.queues.pending_of("q", "ann") == 5


def test_the_queue_file_fields_are_camel_case_and_unknown_values_refused():
    q = msgspec.json.decode(b'{"name": "q", "maxPendingPerUser": 5, "ordering": "fifo"}', type=Queue)
    assert (q.max_pending_per_user, q.ordering) == (5, "fifo")
    with pytest.raises(msgspec.ValidationError, match="ordering"):
        msgspec.json.decode(b'{"name": "q", "ordering": "lifo"}', type=Queue)
    with pytest.raises(msgspec.ValidationError, match="maxPendingPerUser"):
        msgspec.json.decode(b'{"name": "q", "maxPendingPerUser": -1}', type=Queue)
