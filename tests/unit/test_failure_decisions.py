"""Admission decides, once, whether a failed attempt is retried, and says so on the wire: ``retry_scheduled`` (the
next attempt follows after its back-off) or ``failure_final`` (the op has failed). Published once per failure, by
the cycle after the fold decided; never again after a restart replays the stream, again after a publish that
failed; a stop before or during the back-off ends the op instead."""
from __future__ import annotations

from datetime import timedelta

import pytest

from opsched.bus import logging as oplog
from opsched.bus.refusals import NotPermitted
from opsched.proto import codec
from opsched.proto.events import FailureFinal, OperationAdmitted, OperationFailed, OperationStopped, RetryScheduled
from opsched.proto.queues import Agent, QueuesConfig
from opsched.proto.queues import Queue as QueueConfig
from opsched.rules.failures import MAX_INFRASTRUCTURE_RETRIES
from opsched.services.admission import cycle
from opsched.services.admission.handlers import on_stop
from opsched.services.admission.model.queues import compile_book
from opsched.services.admission.state.admission_state import AdmissionState, Status
from opsched.services.admission.state.retention import expired
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, case, case_name, failed, gates_cleared, op, running, stop, submitted, t
from tests.builders.bus import MemoryBus, memory_bus
from tests.builders.clock import FakeClock
from tests.unit.admission_scenarios import NS, decide, fold


def decisions_on_failures(decisions: list) -> list:
    return [d for d in decisions if isinstance(d, (RetryScheduled, FailureFinal))]


class Op:
    """One op of ``maxRetries`` ``max_retries``, run attempt after attempt: ``fail(reason)`` folds the failure of
    the attempt running and returns the cycle's decisions on it; ``rerun()`` admits the next one (its back-off over)."""

    def __init__(self, max_retries: int | None, state: AdmissionState | None = None) -> None:
        self.state = state or AdmissionState()
        self.now = T0
        fold(submitted(op("a").max_retries(max_retries).build(), op_id="a"), *gates_cleared("a"), state=self.state)
        self.rerun()

    @property
    def record(self):
        return self.state.ops["a"]

    def rerun(self) -> None:
        admitted = [d for d in decide(self.state, now=self.now) if isinstance(d, OperationAdmitted)]
        assert [d.op_id for d in admitted] == ["a"], f"a is {self.record.status.label}, not admitted"
        fold(running("a", attempt=self.record.attempt), state=self.state)

    def fail(self, reason: str = "Error") -> list:
        fold(failed("a", attempt=self.record.attempt, reason=reason), state=self.state)
        decided = decisions_on_failures(decide(self.state, now=self.now))
        for d in decided:
            if isinstance(d, RetryScheduled):
                self.now = d.at + timedelta(seconds=d.retry_after_s)
        return decided


def shape(decision) -> tuple:
    if isinstance(decision, RetryScheduled):
        return ("retry", decision.attempt, decision.retries_used)
    return ("final", decision.attempt, decision.retries_used)


@pytest.mark.parametrize("c", [
    case("maxRetries unset: the first failure is final", max_retries=None, failures=["Error"],
         want=[("final", 0, 0)]),
    case("maxRetries 0: the first failure is final", max_retries=0, failures=["Error"], want=[("final", 0, 0)]),
    case("maxRetries 1: a retry, then the second failure is final", max_retries=1, failures=["Error", "Error"],
         want=[("retry", 0, 1), ("final", 1, 1)]),
    case("maxRetries 3: three retries, then final", max_retries=3, failures=["Error"] * 4,
         want=[("retry", 0, 1), ("retry", 1, 2), ("retry", 2, 3), ("final", 3, 3)]),
    case("an infrastructure failure is retried without using a retry", max_retries=1,
         failures=["NodeLost", "Error", "Error"], want=[("retry", 0, 0), ("retry", 1, 1), ("final", 2, 1)]),
    case("a failure retrying cannot help is final whatever maxRetries", max_retries=5, failures=["PodRejected"],
         want=[("final", 0, 0)]),
], ids=case_name)
def test_each_failure_gets_one_decision_retry_or_final(c):
    a = Op(c.max_retries)
    decided = []
    for n, reason in enumerate(c.failures):
        if n:
            a.rerun()
        got = a.fail(reason)
        assert len(got) == 1, got
        decided += got
    assert [shape(d) for d in decided] == c.want
    assert a.record.status == (Status.FAILED if c.want[-1][0] == "final" else Status.QUEUED)


def test_infrastructure_failures_are_retried_a_bounded_number_of_times_then_final():
    a = Op(None)
    for _ in range(MAX_INFRASTRUCTURE_RETRIES):
        assert [shape(d)[0] for d in a.fail("NodeLost")] == ["retry"]
        a.rerun()
    (final,) = a.fail("NodeLost")
    assert isinstance(final, FailureFinal)
    assert final.message == f"infrastructure failures are retried {MAX_INFRASTRUCTURE_RETRIES} times, no more"


def test_the_final_decision_says_why_with_the_failure_and_the_retries():
    a = Op(1)
    a.fail("Error")
    a.rerun()
    (final,) = a.fail("Error")
    assert final == FailureFinal(op_id="a", at=final.at, attempt=1, reason="Error",
                                 message="no retry left: 1 of maxRetries 1 used", retries_used=1, max_retries=1)
    (rejected,) = Op(5).fail("PodRejected")
    assert rejected.message == "PodRejected is never retried: retrying cannot help"


def test_a_decision_is_published_once_whatever_else_happens_in_later_cycles():
    a = Op(0)
    (final,) = a.fail()
    assert decisions_on_failures(decide(a.state)) == []
    a.state.apply(final, seq=9)  # its copy on the stream, folded back
    assert decisions_on_failures(decide(a.state)) == []
    assert not a.record.failure_undecided


def replayed(events: list) -> AdmissionState:
    """A restarted admission: the stream folded again, every event at its sequence."""
    state = AdmissionState()
    for seq, event in enumerate(events, start=1):
        state.apply(event, seq)
    return state


def stream_of(max_retries: int | None, reasons: list[str]) -> list:
    """What the stream holds after the failures ``reasons`` (every decision published)."""
    state = AdmissionState()
    events = [submitted(op("a").max_retries(max_retries).build(), op_id="a"), *gates_cleared("a")]
    fold(*events, state=state)
    now = T0
    for n, reason in enumerate(reasons):
        cycle = decide(state, now=now)
        attempt = state.ops["a"].attempt
        events += [*cycle, running("a", attempt=attempt), failed("a", attempt=attempt, reason=reason)]
        fold(running("a", attempt=attempt), failed("a", attempt=attempt, reason=reason), state=state)
        decided = decisions_on_failures(decide(state, now=now))
        events += decided
        now = now + timedelta(seconds=sum(d.retry_after_s for d in decided if isinstance(d, RetryScheduled)))
    return events


@pytest.mark.parametrize("c", [
    case("a retry", max_retries=1, reasons=["Error"]),
    case("a final failure", max_retries=0, reasons=["Error"]),
    case("a retry, then a final failure", max_retries=1, reasons=["Error", "Error"]),
], ids=case_name)
def test_a_restart_that_replays_the_stream_publishes_no_decision_again(c):
    events = stream_of(c.max_retries, c.reasons)
    assert isinstance(events[-1], (RetryScheduled, FailureFinal))
    assert decisions_on_failures(decide(replayed(events), now=t(3600))) == []


def test_a_restart_publishes_a_final_decision_the_stream_lacks_once():
    """Admission stopped between folding the failure and publishing its decision (or the stream predates the
    decision): the first cycle after the replay publishes it, and only it."""
    events = stream_of(0, ["Error"])
    assert isinstance(events[-1], FailureFinal)
    state = replayed(events[:-1])
    (again,) = decisions_on_failures(decide(state))
    assert (again.attempt, again.reason) == (0, "Error")
    assert decisions_on_failures(decide(state)) == []


def test_a_restart_publishes_a_retry_the_stream_lacks_once():
    events = stream_of(1, ["Error"])
    state = replayed(events[:-1])
    assert [shape(d) for d in decisions_on_failures(decide(state))] == [("retry", 0, 1)]
    assert decisions_on_failures(decide(state)) == []


def test_an_op_whose_final_decision_is_not_published_yet_does_not_leave_memory():
    a = Op(0)
    fold(failed("a"), state=a.state)
    a.state.apply(failed("a"), seq=7)  # stored, consumed everywhere; its ttl 0 passed
    assert a.record.status == Status.FAILED and a.record.failure_undecided
    assert not expired(a.record, T0 + timedelta(days=1), 0, consumed_seq=7)
    (final,) = decisions_on_failures(decide(a.state))
    a.state.apply(final, seq=8)
    assert expired(a.record, T0 + timedelta(days=1), 0, consumed_seq=8)


# ---- a stop before the decision, or during the back-off -------------------------------------------

@pytest.fixture
def ctx() -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))


def test_a_stop_during_the_back_off_ends_the_op_stopped_with_no_final_decision(ctx):
    a = Op(1)
    (retry,) = a.fail()
    assert a.record.status == Status.QUEUED and a.record.not_before == a.now  # backing off
    stopped = on_stop(stop("a"), ctx, a.state)
    assert isinstance(stopped, OperationStopped) and stopped.attempt == 1
    fold(stopped, state=a.state)
    assert a.record.status == Status.STOPPED
    assert decide(a.state, now=a.now) == []  # neither admitted after the back-off nor failed


def test_a_stop_folded_before_the_cycle_published_the_retry_ends_the_op_stopped_with_no_decision(ctx):
    a = Op(1)
    fold(failed("a"), state=a.state)
    assert a.record.status == Status.RETRYING
    stopped = on_stop(stop("a"), ctx, a.state)
    fold(stopped, state=a.state)
    assert a.record.status == Status.STOPPED
    assert decisions_on_failures(decide(a.state)) == []


# ---- in the service: a decision whose publish failed is published again -----------------------------

@pytest.fixture
def admission(monkeypatch):
    import asyncio

    from opsched.services.admission.service import Admission

    async def no_wait(_seconds):  # the back-off after a failed publish
        return None

    monkeypatch.setattr(asyncio, "sleep", no_wait)
    return Admission(Settings(namespace=NS), FakeClock(T0))


def flaky(fail_on: int | None = None) -> MemoryBus:
    bus = memory_bus("opsched-admission")
    if fail_on is not None:
        bus.fail_publish(1, after=fail_on - 1)
    return bus


async def test_a_final_decision_whose_publish_failed_is_published_by_the_next_cycle(admission):
    a = Op(0, admission.state)
    fold(failed("a"), state=a.state)
    await admission.cycle_once(flaky(fail_on=1))
    assert a.record.failure_undecided  # forgotten: not on the stream
    bus = flaky()
    await admission.cycle_once(bus)
    assert [type(codec.decode(p.data)) for p in bus.published] == [FailureFinal]
    quiet = flaky()
    await admission.cycle_once(quiet)
    assert quiet.published == []


async def test_a_final_decision_the_server_refuses_is_not_tried_again_in_a_loop(admission):
    a = Op(0, admission.state)
    fold(failed("a"), state=a.state)

    bus = memory_bus("opsched-admission")

    def refuse(subject: str) -> None:  # as a server whose subject table lacks failure_final would
        if subject.startswith("ops.failure_final."):
            raise NotPermitted(bus.user, subject)
    bus._may_publish = refuse  # type: ignore[method-assign]
    await admission.cycle_once(bus)
    await admission.cycle_once(bus)
    assert bus.published == [] and a.record.status == Status.FAILED


def test_a_failure_of_an_attempt_already_over_is_not_decided_again():
    a = Op(1)
    a.fail()
    fold(failed("a", attempt=0, reason="PodDeleted"), state=a.state)  # the reconciler's late word on attempt 0
    assert decisions_on_failures(decide(a.state, now=a.now)) == []
    assert a.record.attempt == 1 and not a.record.status.terminal  # attempt 1 goes on


def test_an_agent_lost_is_decided_like_any_failure():
    """Admission's own ``failed`` (an agent gone silent: an infrastructure failure) gets its decision too, in the
    same cycle, after it."""
    state = AdmissionState()
    a = Op(0, state)
    a.record.agent = "edge"
    state.fold.heartbeats["edge"] = T0
    book = compile_book(QueuesConfig(queues=[QueueConfig(name="default", concurrency=10)],
                                     agents=[Agent(name="edge", lost_after_seconds=60)]))
    decided = cycle.decide(state, book, T0 + timedelta(minutes=5), NS)
    kinds = [type(d) for d in decided if d.op_id == "a"]
    assert kinds == [OperationFailed, RetryScheduled]
