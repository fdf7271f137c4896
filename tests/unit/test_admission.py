"""Admission: the state fold, one scheduling cycle, ordering, queue config and the command handlers."""
from __future__ import annotations

from pathlib import Path

import pytest

from proto.events import (
    CacheHit, CacheMissed, CostEstimated, OperationAdmitted, OperationRejected, OperationStopped, OperationSubmitted, OperationSucceeded,
    StopRequested,
)
from services.admission import cycle
from services.admission.handlers import on_stop, on_submit
from services.admission.policies.concurrency import free_slots
from services.admission.policies.ordering import sort_key
from proto.queues import Queue as QueueConfig
from proto.queues import QueuesConfig
from services.admission.queues import Book, QueuesConfigError, compile_book, load_queues
from services.admission.state import AdmissionState, Status
from services.runtime import logging as oplog
from services.runtime.clock import FakeClock
from services.runtime.errors import InvalidInput
from services.runtime.service import Context
from services.runtime.settings import Settings
from tests.builders import (
    T0, admitted, cache_hit, cache_missed, case, case_name, cost_estimated, dispatched, failed, gates_cleared,
    op, rejected, running, stop, stopped, submit, submitted, succeeded, t,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NS = "opsched"


def queues(*specs: tuple[str, int] | tuple[str, int, int], default: str | None = None) -> Book:
    """``queues(("a", 1), ("b", 5, 10))``: name, concurrency[, priority]."""
    qs = [QueueConfig(name=s[0], concurrency=s[1], priority=s[2] if len(s) > 2 else 0) for s in specs]
    return compile_book(QueuesConfig(queues=qs, default_queue=default or qs[0].name))


def fold(*events, state: AdmissionState | None = None) -> AdmissionState:
    state = state or AdmissionState()
    for event in events:
        if isinstance(event, list):
            fold(*event, state=state)
        else:
            state.apply(event)
    return state


def ready(op_id: str, *, queue: str = "default", priority: int = 0, at=T0) -> list:
    """An op submitted at ``at`` whose cost and cache gates have both cleared (a cache miss)."""
    return [submitted(op(op_id).priority(priority).build(), op_id=op_id, queue=queue, at=at), *gates_cleared(op_id)]


def admitted_ids(decisions) -> list[str]:
    return [d.op_id for d in decisions if isinstance(d, OperationAdmitted)]


def decide(state: AdmissionState, config: Book | None = None, now=T0) -> list:
    return cycle.decide(state, config or queues(("default", 10)), now, NS)


def snapshot(state: AdmissionState) -> dict:
    return {
        "ops": {k: vars(v).copy() for k, v in state.ops.items()},
        "queues": {k: (v.pending.ids(), sorted(v.active)) for k, v in state.queues.items()},
        "cache_hits": list(state.cache_hits),
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def ctx(clock) -> Context:
    return Context(service="admission", clock=clock, settings=Settings(), log=oplog.get("test"))


# ---- ordering ---------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a higher priority goes first even if submitted later",
         ops=[("low", 0, 0), ("high", 10, 5)], order=["high", "low"]),
    case("at equal priority the earlier submission goes first",
         ops=[("late", 1, 9), ("early", 1, 1)], order=["early", "late"]),
    case("at equal priority and time the op id decides",
         ops=[("op-b", 0, 0), ("op-a", 0, 0)], order=["op-a", "op-b"]),
    case("negative priorities go after the default",
         ops=[("neg", -5, 0), ("zero", 0, 3)], order=["zero", "neg"]),
], ids=case_name)
def test_ordering_is_priority_then_submit_time_then_id(c):
    keys = {name: sort_key(priority, t(at), name) for name, priority, at in c.ops}
    assert sorted(keys, key=keys.get) == c.order

    state = fold(*[ready(name, priority=priority, at=t(at)) for name, priority, at in c.ops])
    assert admitted_ids(decide(state)) == c.order


def test_free_slots_never_go_negative():
    assert free_slots(3, 1) == 2
    assert free_slots(1, 4) == 0


# ---- gates ------------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("nothing is admitted right after submission", gates=[]),
    case("a cost estimate alone is not enough", gates=[cost_estimated("a")]),
    case("a cache miss alone is not enough", gates=[cache_missed("a")]),
], ids=case_name)
def test_an_op_waits_for_both_the_cost_estimate_and_the_cache_answer(c):
    state = fold(submitted(op("a").build(), op_id="a"), *c.gates)
    assert decide(state) == []
    assert state.ops["a"].status == Status.PENDING


@pytest.mark.parametrize("c", [
    case("cost first, then cache", gates=[cost_estimated("a"), cache_missed("a")]),
    case("cache first, then cost", gates=[cache_missed("a"), cost_estimated("a")]),
], ids=case_name)
def test_an_op_is_admitted_once_both_gates_cleared_in_any_order(c):
    state = fold(submitted(op("a").build(), op_id="a"), *c.gates)
    assert state.ops["a"].status == Status.PENDING and state.cleared == ["a"]  # the cycle queues it
    (decision,) = decide(state)
    assert isinstance(decision, OperationAdmitted)
    assert (decision.op_id, decision.queue, decision.namespace, decision.pod_name) == ("a", "default", NS, "op-a-0")
    assert decision.at == T0


def test_the_queue_namespace_wins_over_the_default_namespace():
    config = compile_book(QueuesConfig(queues=[QueueConfig(name="default", namespace="team-a")]))
    (decision,) = cycle.decide(fold(ready("a")), config, T0, NS)
    assert decision.namespace == "team-a"


@pytest.mark.parametrize("c", [
    case("a cache hit before the cost estimate", events=[cache_hit("a", original="old")]),
    case("a cache hit after the cost estimate", events=[cost_estimated("a"), cache_hit("a", original="old")]),
], ids=case_name)
def test_a_cache_hit_ends_the_op_succeeded_and_admits_nothing(c):
    state = fold(submitted(op("a").build(), op_id="a"), *c.events)
    decisions = decide(state, now=t(3))
    assert decisions == [OperationSucceeded(op_id="a", at=t(3), reason=cycle.CACHE_HIT_REASON)]
    assert state.ops["a"].status == Status.SUCCEEDED
    assert state.ops["a"].cache_hit_of == "old"
    assert decide(state) == []


def test_a_cache_hit_already_finished_on_replay_is_not_finished_twice():
    state = fold(submitted(op("a").build(), op_id="a"), cache_hit("a"),
                 succeeded("a", reason=cycle.CACHE_HIT_REASON))
    assert decide(state) == []


def test_gates_of_an_unknown_op_change_nothing():
    state = AdmissionState()
    assert state.apply(cost_estimated("ghost")) is False
    assert state.apply(running("ghost")) is False
    assert state.ops == {}


# ---- concurrency and the cycle ----------------------------------------------------------------

def test_a_queue_with_concurrency_one_admits_the_next_op_only_after_the_first_ends():
    config = queues(("solo", 1))
    state = fold(*[ready(i, queue="solo", at=t(n)) for n, i in enumerate(["a", "b", "c"])])

    assert admitted_ids(decide(state, config)) == ["a"]
    assert decide(state, config) == []  # the slot is taken
    fold(dispatched("a"), running("a"), state=state)
    assert decide(state, config) == []
    fold(succeeded("a"), state=state)
    assert admitted_ids(decide(state, config)) == ["b"]
    fold(failed("b"), state=state)
    assert admitted_ids(decide(state, config)) == ["c"]


def test_many_ops_are_admitted_in_one_cycle_when_slots_allow():
    state = fold(*[ready(f"op-{n}", at=t(n)) for n in range(5)])
    assert admitted_ids(decide(state, queues(("default", 3)))) == ["op-0", "op-1", "op-2"]
    assert {i for i, o in state.ops.items() if o.status == Status.ADMITTED} == {"op-0", "op-1", "op-2"}


def test_a_cycle_fills_every_queue_higher_queue_priority_first():
    config = queues(("low", 2, 0), ("high", 1, 10))
    state = fold(ready("l1", queue="low"), ready("l2", queue="low"), ready("l3", queue="low"),
                 ready("h1", queue="high"), ready("h2", queue="high"))
    assert admitted_ids(decide(state, config)) == ["h1", "l1", "l2"]


def test_an_admission_is_assumed_in_state_before_it_is_published():
    state = fold(ready("a"))
    decide(state)
    op_ = state.ops["a"]
    assert op_.status == Status.ADMITTED and op_.pod_name == "op-a-0" and op_.namespace == NS
    assert state.queue("default").active == {"a"}


def test_unassume_puts_an_op_back_in_its_queue():
    config = queues(("default", 1))
    state = fold(ready("a"), ready("b", at=t(1)))
    assert admitted_ids(decide(state, config)) == ["a"]
    state.unassume("a")
    assert state.ops["a"].status == Status.QUEUED
    assert state.queue("default").active == set()
    assert admitted_ids(decide(state, config)) == ["a"]


def test_unassume_leaves_an_op_that_moved_on_alone():
    state = fold(ready("a"))
    decide(state)
    fold(running("a"), state=state)
    state.unassume("a")
    assert state.ops["a"].status == Status.RUNNING


def test_a_stopped_queued_op_is_skipped_by_the_cycle():
    state = fold(ready("a"), ready("b", at=t(1)), stopped("a"))
    assert admitted_ids(decide(state)) == ["b"]


def test_ops_of_a_queue_no_longer_configured_are_left_waiting():
    state = fold(ready("a", queue="gone"))
    assert decide(state, queues(("default", 5))) == []


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


def test_a_finished_op_frees_its_slot_and_records_node_and_reason():
    state = fold(ready("a"), admitted(submitted(op("a").build(), op_id="a")), running("a", node="n1"),
                 failed("a", reason="OOMKilled"))
    assert state.queue("default").active == set()
    assert (state.ops["a"].node, state.ops["a"].reason) == ("n1", "OOMKilled")


# ---- queue configuration ----------------------------------------------------------------------

def test_without_a_file_there_is_one_default_queue():
    config = load_queues(None)
    assert [q.name for q in config.queues] == ["default"] and config.default_queue == "default"


def test_the_example_queue_file_loads():
    config = load_queues(EXAMPLES / "queues.yaml")
    assert config.default_queue in [q.name for q in config.queues]
    assert all(q.concurrency >= 1 for q in config.queues)


def test_a_queue_file_loads_with_its_fields(tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text("defaultQueue: cpu\nqueues:\n  - {name: cpu, concurrency: 8}\n"
                    "  - {name: a100, concurrency: 2, priority: 10, namespace: gpu}\n")
    config = load_queues(path)
    assert config.default_queue == "cpu"
    book = compile_book(config)
    assert book.queues["a100"] == QueueConfig(name="a100", concurrency=2, priority=10, namespace="gpu")
    assert "nope" not in book.queues


@pytest.mark.parametrize("c", [
    case("duplicate queue names",
         text="queues:\n  - {name: default}\n  - {name: default}\n", says="'default' is used twice"),
    case("a defaultQueue that is not a queue",
         text="defaultQueue: gpu\nqueues:\n  - {name: default}\n", says="defaultQueue: 'gpu' is not one of the queues"),
    case("a queue name that is not a DNS label",
         text="queues:\n  - {name: Default_Q}\n", says="queues[0].name"),
    case("a concurrency below one",
         text="queues:\n  - {name: default, concurrency: 0}\n", says="queues[0].concurrency"),
    case("an unknown field",
         text="queues:\n  - {name: default, concurency: 3}\n", says="concurency"),
    case("yaml that does not parse",
         text="queues: [\n", says="queues.yaml"),
], ids=case_name)
def test_a_bad_queue_file_raises_a_readable_error(c, tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(c.text)
    with pytest.raises(QueuesConfigError) as info:
        load_queues(path)
    message = str(info.value)
    assert message.startswith(str(path))
    assert c.says in message
    assert "pydantic" not in message and "Traceback" not in message


def test_a_missing_queue_file_raises_a_readable_error(tmp_path):
    with pytest.raises(QueuesConfigError, match="no-such.yaml"):
        load_queues(tmp_path / "no-such.yaml")


# ---- handlers ---------------------------------------------------------------------------------

def test_a_submit_is_timed_by_the_admission_clock_not_by_the_producer(ctx, clock):
    clock.advance(30)
    spec = op("a").queue("gpu").priority(5).build()
    event = on_submit(submit(spec, op_id="a", at=T0), ctx, AdmissionState(), queues(("default", 1), ("gpu", 1)))
    assert event == OperationSubmitted(op_id="a", at=t(30), spec=spec, queue="gpu", submitted_at=t(30), priority=5)


def test_a_submit_without_a_queue_goes_to_the_default_queue_and_without_time_uses_the_clock(ctx):
    event = on_submit(submit(op("a").build(), op_id="a", at=None), ctx, AdmissionState(),
                      queues(("cpu", 1), ("gpu", 1), default="gpu"))
    assert (event.queue, event.submitted_at) == ("gpu", T0)


def test_a_submit_to_an_unknown_queue_is_rejected_listing_the_known_queues(ctx):
    event = on_submit(submit(op("a").queue("tpu").build(), op_id="a"), ctx, AdmissionState(),
                      queues(("cpu", 1), ("gpu", 1)))
    assert isinstance(event, OperationRejected)
    assert event.reason == "unknown_queue"
    assert "'tpu'" in event.message and "cpu, gpu" in event.message


def test_a_duplicate_submit_returns_nothing(ctx):
    state = fold(submitted(op("a").build(), op_id="a"))
    assert on_submit(submit(op("a").build(), op_id="a"), ctx, state, queues(("default", 1))) is None


@pytest.mark.parametrize("op_id", ["Upper", "with_underscore", "dotted.id", "", "-leading"], ids=repr)
def test_an_invalid_op_id_raises_invalid_input(ctx, op_id):
    with pytest.raises(InvalidInput) as info:
        on_submit(submit(op().build(), op_id=op_id), ctx, AdmissionState(), queues(("default", 1)))
    assert info.value.reason == "invalid_op_id"


def test_stop_of_a_queued_op_stops_it(ctx):
    state = fold(ready("a"))
    event = on_stop(stop("a", reason="no longer needed"), ctx, state)
    assert event == OperationStopped(op_id="a", at=T0, reason="stopped", message="no longer needed")


def test_stop_of_a_pending_op_stops_it(ctx):
    state = fold(submitted(op("a").build(), op_id="a"))
    assert isinstance(on_stop(stop("a"), ctx, state), OperationStopped)


@pytest.mark.parametrize("c", [
    case("an admitted op", events=[]),
    case("a running op", events=[dispatched("a", namespace="ml"), running("a")]),
], ids=case_name)
def test_stop_of_an_active_op_requests_the_stop_of_its_pod(ctx, c):
    state = fold(ready("a"), admitted(submitted(op("a").build(), op_id="a"), namespace="ml"), *c.events)
    event = on_stop(stop("a", reason="bye"), ctx, state)
    assert event == StopRequested(op_id="a", at=T0, pod_name="op-a-0", namespace="ml", reason="bye")


def test_stop_of_a_finished_op_returns_nothing(ctx):
    state = fold(ready("a"), succeeded("a"))
    assert on_stop(stop("a"), ctx, state) is None


def test_stop_of_an_unknown_op_raises_invalid_input(ctx):
    with pytest.raises(InvalidInput) as info:
        on_stop(stop("ghost"), ctx, AdmissionState())
    assert (info.value.reason, info.value.op_id) == ("unknown_op", "ghost")


# ---- the cycle in the service: assume, publish, forget on failure -----------------------------

class FlakyBus:
    """Publishes into ``published`` and fails the ``fail_on``-th publish (1-based)."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.fail_on = fail_on
        self.calls = 0
        self.published: list = []

    async def publish(self, message, **_):
        self.calls += 1
        if self.calls == self.fail_on:
            raise ConnectionError("nats: no responders")
        self.published.append(message)


@pytest.fixture
def admission(clock, monkeypatch):
    import asyncio

    from services.admission.service import Admission
    from services.runtime.service import Service

    async def no_wait(_seconds):  # the back-off after a failed publish
        return None

    monkeypatch.setattr(asyncio, "sleep", no_wait)
    settings = Settings(namespace=NS)
    return Admission(Service("admission", settings, clock), settings)


async def test_a_cycle_publishes_every_decision(admission):
    fold(*[ready(i, at=t(n)) for n, i in enumerate("abc")], state=admission.state)
    bus = FlakyBus()
    await admission.cycle_once(bus)
    assert [e.op_id for e in bus.published] == ["a", "b", "c"]


async def test_an_admission_whose_publish_failed_is_forgotten_and_retried(admission):
    fold(ready("a"), state=admission.state)
    await admission.cycle_once(FlakyBus(fail_on=1))
    assert admission.state.ops["a"].status == Status.QUEUED
    assert admission.wake.is_set()
    bus = FlakyBus()
    await admission.cycle_once(bus)
    assert admitted_ids(bus.published) == ["a"]


async def test_decisions_after_a_failed_publish_are_not_left_assumed(admission):
    fold(*[ready(i, at=t(n)) for n, i in enumerate("abc")], state=admission.state)
    await admission.cycle_once(FlakyBus(fail_on=2))  # a published, b failed, c never tried
    statuses = {i: admission.state.ops[i].status for i in "abc"}
    assert statuses == {"a": Status.ADMITTED, "b": Status.QUEUED, "c": Status.QUEUED}


async def test_a_cache_hit_whose_publish_failed_is_finished_by_a_later_cycle(admission):
    fold(submitted(op("a").build(), op_id="a"), cache_hit("a"), state=admission.state)
    await admission.cycle_once(FlakyBus(fail_on=1))
    bus = FlakyBus()
    await admission.cycle_once(bus)
    assert [type(e).__name__ for e in bus.published] == ["OperationSucceeded"]


def test_a_back_off_that_ends_makes_the_service_run_a_cycle_without_any_event():
    from proto.events import RetryScheduled

    spec = op("a").max_retries(1).build()
    state = fold(submitted(spec, op_id="a"), *gates_cleared("a"))
    decide(state)
    fold(failed("a"), state=state)
    (retry,) = [d for d in decide(state) if isinstance(d, RetryScheduled)]
    assert not state.due(t(retry.retry_after_s - 1))
    assert state.due(t(retry.retry_after_s))  # the service runs a cycle now
    assert not state.due(t(retry.retry_after_s + 1))  # once
    assert [d.op_id for d in decide(state, now=t(retry.retry_after_s)) if isinstance(d, OperationAdmitted)] == ["a"]
