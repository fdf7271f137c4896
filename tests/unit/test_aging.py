"""Aging against starvation: a waiting op's effective priority, the two-heap pending order that keeps
it in O(log n), and a low-priority op that a steady stream of high-priority ops would starve."""
from __future__ import annotations

import math

import pytest

from opsched.proto.events import OperationAdmitted
from opsched.proto.queues import Aging
from opsched.services.admission import cycle
from opsched.services.admission.model.pending_queue import PendingQueue
from opsched.services.admission.policies.aging import effective
from opsched.services.admission.state.admission_state import AdmissionState, Status
from tests.builders import (
    T0,
    book,
    case,
    case_name,
    configure_aging,
    fold,
    op,
    queue,
    queued,
    succeeded,
    t,
)

MIN = 60.0


# ---- effective priority -----------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("without aging the effective priority is the priority", per_minute=0, cap=100, waited=3600, expected=7),
    case("at submission nothing is gained yet", per_minute=2, cap=100, waited=0, expected=7),
    case("half a minute gains half the rate", per_minute=2, cap=100, waited=30, expected=8),
    case("five minutes gain five times the rate", per_minute=2, cap=100, waited=5 * MIN, expected=17),
    case("a fractional rate gains a fraction", per_minute=0.5, cap=100, waited=3 * MIN, expected=8.5),
    case("below the cap the cap does not matter", per_minute=2, cap=5, waited=MIN, expected=9),
    case("the cap is reached exactly", per_minute=2, cap=5, waited=2.5 * MIN, expected=12),
    case("past the cap nothing more is gained", per_minute=2, cap=5, waited=60 * MIN, expected=12),
    case("a clock before the submit time gains nothing", per_minute=2, cap=100, waited=-MIN, expected=7),
    case("a negative priority ages the same way", per_minute=1, cap=100, waited=4 * MIN, expected=-3, priority=-7),
], ids=case_name)
def test_the_effective_priority_grows_with_waiting_up_to_the_cap(c):
    priority = c.args.get("priority", 7)
    assert effective(priority, T0, t(c.waited), c.per_minute, c.cap) == pytest.approx(c.expected)


# ---- the pending order ------------------------------------------------------------------------

def drain(q: PendingQueue, at: float) -> list[str]:
    out = []
    while (op_id := q.pop(t(at))) is not None:
        out.append(op_id)
    return out


def filled(per_minute: float, cap: float, *ops: tuple[str, int, float], now: float | None = None) -> PendingQueue:
    q = PendingQueue(per_minute, cap)
    for op_id, priority, at in ops:
        q.push(op_id, priority, t(at), None if now is None else t(now))
    return q


def test_without_aging_the_order_is_priority_then_submit_time_then_id():
    q = filled(0, 0, ("b", 5, 0), ("a", 5, 0), ("c", 10, 20), ("d", 5, -10), ("e", 0, -100))
    assert len(q) == 5 and q.ids() == ["a", "b", "c", "d", "e"]
    assert drain(q, 3600) == ["c", "d", "a", "b", "e"]
    assert len(q) == 0 and q.pop(t(3600)) is None


@pytest.mark.parametrize("c", [
    case("a high-priority op submitted less than gap/rate minutes later still goes first",
         per_minute=2, cap=100, hi_at=4 * MIN, order=["hi", "lo"]),
    case("a high-priority op submitted more than gap/rate minutes later goes after the old low-priority op",
         per_minute=2, cap=100, hi_at=6 * MIN, order=["lo", "hi"]),
    case("a faster rate overtakes sooner", per_minute=5, cap=100, hi_at=3 * MIN, order=["lo", "hi"]),
    case("with aging off the old low-priority op never overtakes", per_minute=0, cap=100, hi_at=600 * MIN,
         order=["hi", "lo"]),
    case("a capped op stops gaining: a cap below the gap never overtakes", per_minute=2, cap=9,
         hi_at=600 * MIN, order=["hi", "lo"]),
    case("a cap above the gap overtakes", per_minute=2, cap=11, hi_at=600 * MIN, order=["lo", "hi"]),
], ids=case_name)
def test_with_aging_a_low_priority_op_overtakes_after_the_gap_over_the_rate(c):
    # lo (priority 0) waits from T0; hi (priority 10) is submitted later; both are popped when hi arrives
    for now in (None, c.hi_at):  # filed with and without the cap shortcut
        q = filled(c.per_minute, c.cap, ("lo", 0, 0), ("hi", 10, c.hi_at), now=now)
        assert drain(q, c.hi_at + 1) == c.order


@pytest.mark.parametrize("c", [
    case("before either is capped the one that waited long enough goes first", at=4.5 * MIN, first="old"),
    case("a capped op still beats an aging op below its cap", at=5.5 * MIN, first="old"),
    case("an aging op that passes a capped op's priority plus cap goes first", at=7.5 * MIN, first="late"),
    case("once both are capped the higher priority plus cap goes first", at=60 * MIN, first="late"),
], ids=case_name)
def test_capped_and_aging_ops_are_compared_at_the_current_time(c):
    # rate 1/min, cap 5: "old" (priority 0, from T0) is capped at 5 from minute 5 on;
    # "late" (priority 3, from minute 4) is at 3.5 at minute 4.5, 4.5 at 5.5, 6.5 at 7.5, capped at 8 from 9
    q = filled(1, 5, ("old", 0, 0), ("late", 3, 4 * MIN))
    assert drain(q, c.at) == [c.first, ({"old", "late"} - {c.first}).pop()]


def test_reconfigure_files_every_waiting_op_again():
    q = filled(0, 0, ("lo", 0, 0), ("hi", 10, 20 * MIN), ("gone", 50, 0))
    q.discard("gone")
    q.reconfigure(1, 100, t(20 * MIN))
    assert (q.per_minute, q.cap) == (1, 100)
    assert len(q) == 2
    assert q.pop(t(20 * MIN)) == "lo"  # 20 minutes waited beat hi's 10 more priority

    q = filled(1, 100, ("lo", 0, 0), ("hi", 10, 20 * MIN))
    q.reconfigure(0, 0, t(20 * MIN))
    assert drain(q, 20 * MIN) == ["hi", "lo"]

    q = filled(1, 100, ("lo", 0, 0), ("hi", 10, 20 * MIN))
    q.reconfigure(1, 5, t(20 * MIN))  # a lower cap: lo is filed already capped at 5
    assert drain(q, 20 * MIN) == ["hi", "lo"]


def test_reconfigure_with_the_same_settings_keeps_everything():
    q = filled(1, 100, ("lo", 0, 0), ("hi", 10, 20 * MIN))
    q.discard("hi")
    q.reconfigure(1, 100, t(20 * MIN))
    assert drain(q, 20 * MIN) == ["lo"]


@pytest.mark.parametrize("c", [
    case("a discarded op is never popped", aging=(0, 0),
         steps=[("push", "a", 0, 0), ("push", "b", 5, 0), ("discard", "b")], order=["a"]),
    case("only the last push of an op counts", aging=(0, 0),
         steps=[("push", "a", 0, 0), ("push", "b", 5, 0), ("push", "a", 10, 0)], order=["a", "b"]),
    case("a re-push at a lower priority moves it back", aging=(0, 0),
         steps=[("push", "a", 10, 0), ("push", "b", 5, 0), ("push", "a", 0, 0)], order=["b", "a"]),
    case("an op discarded then pushed again is popped once", aging=(0, 0),
         steps=[("push", "a", 10, 0), ("discard", "a"), ("push", "b", 5, 0), ("push", "a", 0, 0)], order=["b", "a"]),
    case("an op popped then pushed again comes back", aging=(0, 0),
         steps=[("push", "a", 10, 0), ("pop", "a"), ("push", "b", 5, 0), ("push", "a", 0, 0)], order=["b", "a"]),
    case("only the last push counts when aging too", aging=(1, 100),
         steps=[("push", "a", 10, 0), ("push", "b", 5, 0), ("push", "a", 0, 0)], order=["b", "a"]),
    case("a re-push of an aging op after its cap time is filed once", aging=(1, 5),
         steps=[("push", "a", 0, 0), ("push", "b", 3, 0), ("pop", "b"), ("push", "b", 3, 0), ("push", "a", 0, 0)],
         order=["b", "a"]),
    case("discarding an unknown op does nothing", aging=(0, 0),
         steps=[("discard", "x"), ("push", "a", 0, 0)], order=["a"]),
], ids=case_name)
def test_deletion_is_lazy_and_only_the_last_push_counts(c):
    q = PendingQueue(*c.aging)
    for step in c.steps:
        if step[0] == "push":
            q.push(step[1], step[2], t(step[3]))
        elif step[0] == "discard":
            q.discard(step[1])
        else:
            assert q.pop(t(10 * MIN)) == step[1]
    assert len(q) == len(c.order)
    assert drain(q, 10 * MIN) == c.order
    assert len(q) == 0


def entries(q: PendingQueue, op_id: str) -> tuple[int, int, int]:
    """How many live heap entries ``op_id`` has in (aging, fixed, caps)."""
    e = q._entries.get(op_id)

    def live(heap, where):
        return sum(1 for item in heap if e is not None and item[-2] == op_id and item[-1] == e.gen
                   and (where is None or e.where == where))

    caps = sum(1 for item in q._caps if e is not None and item[1] == op_id and item[2] == e.gen and e.where == "aging")
    return live(q._aging, "aging"), live(q._fixed, "fixed"), caps


def test_an_op_whose_cap_time_passes_migrates_exactly_once():
    q = filled(1, 5, ("a", 0, 0), ("x", 100, 0), ("y", 100, 1), ("z", 100, 2))
    assert entries(q, "a") == (1, 0, 1)
    assert q.pop(t(4 * MIN)) == "x"
    assert entries(q, "a") == (1, 0, 1)  # not yet capped
    assert q.pop(t(6 * MIN)) == "y"
    assert entries(q, "a") == (0, 1, 0)  # moved to the fixed heap
    assert sum(1 for item in q._fixed if item[-2] == "a") == 1
    assert q.pop(t(60 * MIN)) == "z"
    assert entries(q, "a") == (0, 1, 0) and sum(1 for item in q._fixed if item[-2] == "a") == 1
    assert q.pop(t(60 * MIN)) == "a" and q.pop(t(60 * MIN)) is None


def test_an_op_filed_after_its_cap_time_goes_straight_to_the_fixed_heap():
    q = filled(1, 5, ("a", 0, 0), now=10 * MIN)
    assert entries(q, "a") == (0, 1, 0)
    q = filled(1, 5, ("a", 0, 0), now=MIN)
    assert entries(q, "a") == (1, 0, 1)


def test_a_large_queue_drains_in_effective_priority_order():
    ops = [(f"op-{n:03}", (n * 37) % 11, (n * 53) % 900) for n in range(200)]
    now = 20 * MIN
    q = filled(0.7, 4, *ops)
    want = sorted(ops, key=lambda o: (-effective(o[1], t(o[2]), t(now), 0.7, 4), o[2], o[0]))
    assert drain(q, now) == [o[0] for o in want]


# ---- through the cycle: no starvation --------------------------------------------------------

GAP = 10  # the high-priority stream's priority above the low-priority op


def stream(per_minute: float, cap: float, minutes: int) -> int | None:
    """A concurrency-1 queue; ``lo`` (priority 0) is queued at T0 with ``hi-0`` (priority GAP); from then
    on one more high-priority op arrives each minute and the running op ends before the next cycle.
    The minute ``lo`` is admitted at, or None."""
    b = book(queue("solo", concurrency=1, aging=Aging(per_minute=per_minute, cap=cap)))
    state = configure_aging(AdmissionState(), b)
    fold(queued(op("lo").build(), op_id="lo", queue="solo", at=T0), state=state)
    for minute in range(minutes + 1):
        now = t(minute * MIN)
        fold(queued(op(f"hi-{minute}").priority(GAP).build(), op_id=f"hi-{minute}", queue="solo", at=now),
             state=state)
        (decision,) = cycle.decide(state, b, now, "opsched")
        assert isinstance(decision, OperationAdmitted)
        if decision.op_id == "lo":
            return minute
        fold(succeeded(decision.op_id, at=now), state=state)
    assert state.ops["lo"].status == Status.QUEUED
    return None


@pytest.mark.parametrize("c", [
    case("one priority point a minute over a gap of 10", per_minute=1, cap=100),
    case("three points a minute over a gap of 10", per_minute=3, cap=100),
    case("a cap just above the gap", per_minute=4, cap=GAP + 1),
    case("a slow rate still gets there", per_minute=0.25, cap=100),
], ids=case_name)
def test_under_a_steady_stream_of_high_priority_ops_an_aged_op_is_admitted_within_its_bound(c):
    bound = math.ceil(GAP / c.per_minute)  # minutes until lo's effective priority reaches a fresh op's
    minute = stream(c.per_minute, c.cap, bound + 2)
    assert minute is not None and GAP / c.per_minute <= minute <= bound  # not sooner than aging allows either


@pytest.mark.parametrize("c", [
    case("without aging it is never admitted", per_minute=0, cap=0),
    case("with a cap below the gap it is never admitted", per_minute=5, cap=GAP - 1),
], ids=case_name)
def test_under_a_steady_stream_of_high_priority_ops_an_op_without_enough_aging_starves(c):
    assert stream(c.per_minute, c.cap, 60) is None


def test_aging_without_a_cap_keeps_growing():
    from opsched.services.admission.policies.aging import effective

    assert effective(0, T0, t(600 * 60), per_minute=1, cap=None) == 600


def test_usage_history_decays_by_half_every_half_life_and_counts_as_a_level():
    from opsched.services.admission.state.usage_history import UsageHistory

    history = UsageHistory()
    key = ("nvidia.com/gpu", "h100")
    history.advance(T0, {}, half_life_s=60)
    history.advance(t(60), {"a": {key: 4.0}}, half_life_s=60)  # 4 GPUs for a minute
    assert history.seconds["a"][key] == 240
    history.advance(t(120), {}, half_life_s=60)  # a minute idle: half of it is remembered
    assert history.seconds["a"][key] == 120
    level = history.levels()["a"][key]
    assert 1.3 < level < 1.5  # 120 GPU-seconds * ln2 / 60 s
