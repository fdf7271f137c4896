"""The per-requester submit rate (``services.admission.submit_rate``): a token bucket per requester on
admission's clock; a submit beyond it is rejected ``rate_limited`` naming the requester, the rate and when
to retry (an error event and a dead letter with it); the buckets are a fold of ``submitted`` events."""
from __future__ import annotations

import msgspec
import pytest

from opsched.bus import logging as oplog
from opsched.bus.errors import InvalidInput
from opsched.proto.commands import RestartOperation, SubmitOperation
from opsched.proto.events import OperationRejected, OperationSubmitted
from opsched.services.admission.handlers import on_rerun, on_submit
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.admission.submit_rate import ANONYMOUS, MAX_TRACKED, RATE_LIMITED, SubmitRate, requester
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, op, submit, submitted, t
from tests.builders.clock import FakeClock
from tests.unit.admission_scenarios import queues

PER_MIN, BURST = 6.0, 3  # one token every 10 s, three at once
BOOK = queues(("default", 10))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def ctx(clock) -> Context:
    return Context(service="admission", clock=clock, settings=Settings(), log=oplog.get("test"))


def by(who: str, op_id: str) -> SubmitOperation:
    return msgspec.structs.replace(submit(op("a").build(), op_id=op_id), requested_by=who)


def test_a_requester_submits_a_burst_then_one_op_per_interval():
    rate = SubmitRate(PER_MIN, BURST)
    assert [rate.take("ann", f"op-{i}", T0) for i in range(BURST)] == [None] * BURST
    assert rate.take("ann", "op-3", T0) == pytest.approx(10.0)  # the next token in 10 s
    assert rate.take("ann", "op-3", t(4)) == pytest.approx(6.0)
    assert rate.take("ann", "op-3", t(10)) is None
    assert rate.take("ann", "op-4", t(10)) == pytest.approx(10.0)
    assert rate.take("bob", "op-5", t(10)) is None  # each requester has their own bucket


def test_a_bucket_refills_up_to_the_burst_never_beyond():
    rate = SubmitRate(PER_MIN, BURST)
    rate.take("ann", "op-0", T0)
    allowed = [rate.take("ann", f"op-{i}", t(3600)) for i in range(1, BURST + 2)]
    assert allowed.count(None) == BURST


def test_a_rate_of_zero_refuses_nothing():
    rate = SubmitRate(0, 1)
    assert all(rate.take("ann", f"op-{i}", T0) is None for i in range(100))


def test_the_fold_of_submitted_events_rebuilds_the_buckets_and_the_leaders_own_charge_is_not_doubled():
    leader, replica = SubmitRate(PER_MIN, BURST), SubmitRate(PER_MIN, BURST)
    events = []
    for i in range(BURST):
        assert leader.take("ann", f"op-{i}", T0) is None
        events.append(msgspec.structs.replace(submitted(op("a").build(), op_id=f"op-{i}", at=T0), requested_by="ann"))
    for event in events:  # the op stream, folded by every replica (the leader included)
        leader.observe(event)
        replica.observe(event)
    assert leader.take("ann", "op-9", t(1)) == replica.take("ann", "op-9", t(1)) == pytest.approx(9.0)


def test_full_buckets_are_forgotten_when_too_many_requesters_are_held():
    rate = SubmitRate(PER_MIN, BURST)
    for i in range(MAX_TRACKED):
        rate.take(f"user-{i}", f"op-{i}", T0)
    rate.take("late", "op-x", t(3600))  # every earlier bucket is full again by then
    assert list(rate.buckets) == ["late"]


def test_the_requester_is_the_subjects_user_and_on_an_open_server_the_commands_label():
    assert requester(by("ann", "a"), "cmd.bob.submit.default") == "bob"  # authenticated: the payload is ignored
    assert requester(by("ann", "a"), "cmd.anonymous.submit.default") == "ann"  # open server: an unverified label
    assert requester(by("", "a"), "cmd.anonymous.submit.default") == ANONYMOUS


def test_a_submit_over_the_rate_is_rejected_naming_the_requester_the_rate_and_when_to_retry(ctx, clock):
    rate, state = SubmitRate(PER_MIN, BURST), AdmissionState()
    for i in range(BURST):
        assert isinstance(on_submit(by("ann", f"op-{i}"), ctx, state, BOOK, rate), OperationSubmitted)
    clock.advance(4)
    with pytest.raises(InvalidInput) as refused:
        on_submit(by("ann", "op-3"), ctx, state, BOOK, rate)
    [rejected] = refused.value.events
    assert isinstance(rejected, OperationRejected) and rejected.op_id == "op-3" and rejected.reason == RATE_LIMITED
    assert refused.value.reason == RATE_LIMITED and refused.value.op_id == "op-3"  # error event + dead letter
    assert rejected.message == ("requester 'ann' is over the submit rate of 6 ops a minute (bursts of up to 3; "
                                "OPSCHED_SUBMIT_RATE_PER_MIN, OPSCHED_SUBMIT_BURST): retry in 6.0 s "
                                f"(at {t(10).isoformat()})")
    assert isinstance(on_submit(by("bob", "op-4"), ctx, state, BOOK, rate), OperationSubmitted)
    clock.advance(6)
    assert isinstance(on_submit(by("ann", "op-3"), ctx, state, BOOK, rate), OperationSubmitted)  # retried in time


def test_a_duplicate_submit_takes_no_token(ctx):
    rate, state = SubmitRate(PER_MIN, 1), AdmissionState()
    event = on_submit(by("ann", "op-0"), ctx, state, BOOK, rate)
    state.apply(event)
    assert on_submit(by("ann", "op-0"), ctx, state, BOOK, rate) is None  # a redelivery: ignored, not refused


def test_a_restart_counts_as_a_submit(ctx):
    rate, state = SubmitRate(PER_MIN, 1), AdmissionState()
    state.apply(on_submit(by("ann", "op-0"), ctx, state, BOOK, rate))
    restart = RestartOperation(op_id="op-0", new_op_id="op-1", requested_by="ann")
    with pytest.raises(InvalidInput, match="requester 'ann' is over the submit rate"):
        on_rerun(restart, ctx, state, BOOK, rate)
