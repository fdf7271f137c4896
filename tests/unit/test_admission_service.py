"""Admission in the service: the command handlers (submit, stop), and the cycle that assumes,
publishes and forgets on failure."""
from __future__ import annotations

import pytest

from opsched.bus import logging as oplog
from opsched.bus.errors import InvalidInput
from opsched.proto import codec
from opsched.proto.events import (
    OperationAdmitted,
    OperationRejected,
    OperationStopped,
    OperationSubmitted,
    StopRequested,
)
from opsched.services.admission.handlers import on_stop, on_submit
from opsched.services.admission.state.admission_state import AdmissionState, Status
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import (
    T0,
    admitted,
    cache_hit,
    case,
    case_name,
    dispatched,
    failed,
    gates_cleared,
    op,
    running,
    stop,
    submit,
    submitted,
    succeeded,
    t,
)
from tests.builders.bus import MemoryBus, memory_bus
from tests.builders.clock import FakeClock
from tests.unit.admission_scenarios import NS, admitted_ids, decide, fold, queues, ready


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def ctx(clock) -> Context:
    return Context(service="admission", clock=clock, settings=Settings(), log=oplog.get("test"))


# ---- handlers ---------------------------------------------------------------------------------

def test_a_submit_is_timed_by_the_admission_clock_not_by_the_producer(ctx, clock):
    clock.advance(30)
    spec = op("a").queue("gpu").priority(5).build()
    event = on_submit(submit(spec, op_id="a", at=T0), ctx, AdmissionState(), queues(("default", 1), ("gpu", 1)))
    assert event == OperationSubmitted(op_id="a", at=t(30), spec=spec, queue="gpu", submitted_at=t(30), priority=5,
                                       requested_by="test")


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


def test_stop_of_a_finished_op_is_refused_already_ended(ctx):
    state = fold(ready("a"), succeeded("a"))
    with pytest.raises(InvalidInput) as info:  # its sender reads the refusal (``opsched.verdicts``)
        on_stop(stop("a"), ctx, state)
    assert (info.value.reason, info.value.op_id) == ("already_ended", "a")
    assert "already succeeded" in info.value.message


def test_stop_of_an_unknown_op_raises_invalid_input(ctx):
    with pytest.raises(InvalidInput) as info:
        on_stop(stop("ghost"), ctx, AdmissionState())
    assert (info.value.reason, info.value.op_id) == ("unknown_op", "ghost")


# ---- the cycle in the service: assume, publish, forget on failure -----------------------------

def flaky(fail_on: int | None = None) -> MemoryBus:
    """A bus whose ``fail_on``-th publish (1-based) fails."""
    bus = memory_bus("opsched-admission")
    if fail_on is not None:
        bus.fail_publish(1, after=fail_on - 1)
    return bus


def published(bus: MemoryBus) -> list:
    return [codec.decode(p.data) for p in bus.published]


@pytest.fixture
def admission(clock, monkeypatch):
    import asyncio

    from opsched.services.admission.service import Admission

    async def no_wait(_seconds):  # the back-off after a failed publish
        return None

    monkeypatch.setattr(asyncio, "sleep", no_wait)
    settings = Settings(namespace=NS)
    return Admission(settings, clock)


async def test_a_cycle_publishes_every_decision(admission):
    fold(*[ready(i, at=t(n)) for n, i in enumerate("abc")], state=admission.state)
    bus = flaky()
    await admission.cycle_once(bus)
    assert [e.op_id for e in published(bus)] == ["a", "b", "c"]


async def test_an_admission_whose_publish_failed_is_forgotten_and_retried(admission):
    fold(ready("a"), state=admission.state)
    await admission.cycle_once(flaky(fail_on=1))
    assert admission.state.ops["a"].status == Status.QUEUED
    assert admission.wake.is_set()
    bus = flaky()
    await admission.cycle_once(bus)
    assert admitted_ids(published(bus)) == ["a"]


async def test_decisions_after_a_failed_publish_are_not_left_assumed(admission):
    fold(*[ready(i, at=t(n)) for n, i in enumerate("abc")], state=admission.state)
    bus = flaky(fail_on=2)
    await admission.cycle_once(bus)  # a published, b failed, c never tried
    assert [e.op_id for e in published(bus)] == ["a"]
    statuses = {i: admission.state.ops[i].status for i in "abc"}
    assert statuses == {"a": Status.ADMITTED, "b": Status.QUEUED, "c": Status.QUEUED}


async def test_a_cache_hit_whose_publish_failed_is_finished_by_a_later_cycle(admission):
    fold(submitted(op("a").build(), op_id="a"), cache_hit("a"), state=admission.state)
    await admission.cycle_once(flaky(fail_on=1))
    bus = flaky()
    await admission.cycle_once(bus)
    assert [type(e).__name__ for e in published(bus)] == ["OperationSucceeded"]


def test_a_back_off_that_ends_makes_the_service_run_a_cycle_without_any_event():
    from opsched.proto.events import RetryScheduled

    spec = op("a").max_retries(1).build()
    state = fold(submitted(spec, op_id="a"), *gates_cleared("a"))
    decide(state)
    fold(failed("a"), state=state)
    (retry,) = [d for d in decide(state) if isinstance(d, RetryScheduled)]
    assert not state.queues.due(t(retry.retry_after_s - 1))
    assert state.queues.due(t(retry.retry_after_s))  # the service runs a cycle now
    assert not state.queues.due(t(retry.retry_after_s + 1))  # once
    assert [d.op_id for d in decide(state, now=t(retry.retry_after_s)) if isinstance(d, OperationAdmitted)] == ["a"]
