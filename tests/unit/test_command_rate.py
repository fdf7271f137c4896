"""The per-requester command rate (``services.admission.command_rate``): every command a requester sends —
accepted, refused or malformed — takes a token of its bucket, on admission's clock, once per stream sequence;
beyond it an op-creating command is rejected ``rate_limited`` and the requester's refusals get one dead letter
per window (the others acked, counted). The buckets are leader-local: the fold never touches them."""
from __future__ import annotations

from types import SimpleNamespace

import msgspec
import pytest

from opsched.bus import logging as oplog
from opsched.bus.errors import InvalidInput
from opsched.bus.received import Received
from opsched.proto import codec, subjects
from opsched.proto.commands import RestartOperation, StopOperation, SubmitOperation
from opsched.proto.events import OperationRejected, OperationSubmitted
from opsched.services.admission.command_rate import DEAD_LETTER_WINDOW_S, CommandRate, requester_of
from opsched.services.admission.handlers import OverRate, on_rerun, on_submit
from opsched.services.admission.service import Admission
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.admission.submit_rate import ANONYMOUS, RATE_LIMITED, SubmitRate
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


def ctx(clock, user: str = "ann", seq: int = 0) -> Context:
    return Context(service="admission", clock=clock, settings=Settings(), log=oplog.get("test"),
                   subject=subjects.submit(None, user), stream_seq=seq)


def by(who: str, op_id: str) -> SubmitOperation:
    return msgspec.structs.replace(submit(op("a").build(), op_id=op_id), requested_by=who)


def test_every_command_takes_a_token_a_burst_then_one_per_interval_each_requester_its_own():
    rate = CommandRate(PER_MIN, BURST)
    assert [rate.charge("ann", seq, T0) for seq in range(1, BURST + 1)] == [None] * BURST
    assert rate.charge("ann", 4, T0) == pytest.approx(10.0)
    assert rate.charge("ann", 5, t(4)) == pytest.approx(6.0)
    assert rate.charge("ann", 6, t(10)) is None
    assert rate.charge("bob", 7, t(10)) is None


def test_a_redelivery_is_not_charged_again_and_reads_its_first_verdict():
    rate = CommandRate(PER_MIN, 1)
    assert rate.charge("ann", 1, T0) is None
    assert rate.charge("ann", 1, T0) is None  # the same message again: no second token taken
    assert rate.charge("ann", 2, T0) == pytest.approx(10.0)
    assert rate.charge("ann", 2, t(30)) == pytest.approx(10.0)  # its verdict stands
    assert rate.verdict(1) is None and rate.verdict(2) == pytest.approx(10.0) and rate.verdict(99) is None


def test_a_rate_of_zero_charges_nothing():
    rate = CommandRate(0, 1)
    assert all(rate.charge("ann", seq, T0) is None for seq in range(1, 100))
    assert rate.refused("ann", 5, "why", T0) == "why"


def test_over_the_rate_a_requesters_refusals_get_one_dead_letter_per_window_with_the_count():
    rate = CommandRate(0.5, 1)  # one token every two minutes: over the rate for the whole test
    rate.charge("ann", 1, T0)
    assert rate.refused("ann", 1, "bad json", T0) == "bad json"  # within the rate: as ever
    texts = []
    for seq in range(2, 7):
        rate.charge("ann", seq, T0)
        texts.append(rate.refused("ann", seq, "bad json", T0))
    assert texts[0] is not None and texts[0].startswith("bad json [requester 'ann' is over the command rate")
    assert "0 before this one went unrecorded" in texts[0]
    assert texts[1:] == [None] * 4  # acked without a dead letter
    almost = t(DEAD_LETTER_WINDOW_S - 1)
    rate.charge("ann", 7, almost)
    assert rate.refused("ann", 7, "bad json", almost) is None  # still the same window
    late = t(DEAD_LETTER_WINDOW_S)
    assert rate.charge("ann", 8, late) is not None
    text = rate.refused("ann", 8, "bad json", late)
    assert text is not None and "5 before this one went unrecorded" in text  # the next window: one, with the count
    rate.charge("ann", 9, late)
    assert rate.refused("ann", 9, "bad json", late) is None


def test_back_within_the_rate_a_requesters_refusals_are_dead_lettered_as_ever():
    rate = CommandRate(PER_MIN, 1)
    for seq in (1, 2, 3):
        rate.charge("ann", seq, T0)
        rate.refused("ann", seq, "x", T0)
    later = t(DEAD_LETTER_WINDOW_S)
    rate.charge("ann", 4, later)
    assert rate.refused("ann", 4, "x", later) == "x"
    assert "ann" not in rate.overflows  # its window passed: forgotten


def test_a_refusal_delivered_again_gets_the_same_answer():
    rate = CommandRate(PER_MIN, 1)
    rate.charge("ann", 1, T0)
    rate.charge("ann", 2, T0)
    first = rate.refused("ann", 2, "x", T0)
    assert first is not None  # the first over the rate: dead-lettered...
    assert rate.refused("ann", 2, "x", T0) == first  # ...and again if its dead letter failed and it came back
    rate.charge("ann", 3, T0)
    assert rate.refused("ann", 3, "x", T0) is None
    assert rate.refused("ann", 3, "x", T0) is None


def test_another_requester_is_not_thinned_out():
    rate = CommandRate(PER_MIN, 1)
    for seq in range(1, 5):
        rate.charge("ann", seq, T0)
        rate.refused("ann", seq, "x", T0)
    rate.charge("bob", 5, T0)
    assert rate.refused("bob", 5, "x", T0) == "x"


def test_a_refusal_is_kept_under_the_requester_it_was_charged_to():
    rate = CommandRate(PER_MIN, 1)
    rate.charge("ann", 1, T0)
    rate.charge("ann", 2, T0)
    assert rate.refused("anonymous", 2, "x", T0) is not None  # the first over the rate of ann
    rate.charge("ann", 3, T0)
    assert rate.refused("anonymous", 3, "x", T0) is None


def test_the_requester_is_the_subjects_user_and_on_an_open_server_the_commands_label():
    assert requester_of("cmd.bob.stop", "ann") == "bob"
    assert requester_of("cmd.anonymous.stop", "ann") == "ann"
    assert requester_of("cmd.anonymous.stop") == ANONYMOUS
    assert requester_of("not-a-command") == ANONYMOUS


def test_a_submit_over_the_command_rate_is_rejected_rate_limited_and_takes_no_submit_token(clock):
    rate, submits, state = CommandRate(PER_MIN, 1), SubmitRate(PER_MIN, 1), AdmissionState()
    rate.charge("ann", 1, T0)
    wait_s = rate.charge("ann", 2, T0)
    assert wait_s is not None
    with pytest.raises(InvalidInput) as refused:
        on_submit(by("ann", "op-1"), ctx(clock, seq=2), state, BOOK, submits, OverRate(rate, wait_s))
    [rejected] = refused.value.events
    assert isinstance(rejected, OperationRejected) and rejected.reason == RATE_LIMITED
    assert rejected.message == ("requester 'ann' is over the command rate of 6 commands a minute (bursts of up to "
                                "1; OPSCHED_COMMAND_RATE_PER_MIN, OPSCHED_COMMAND_BURST; every command counts, "
                                f"refused and malformed ones too): retry in 10.0 s (at {t(10).isoformat()})")
    assert submits.take("ann", "op-2", T0) is None  # the refused submit took no submit token
    assert isinstance(on_submit(by("ann", "op-3"), ctx(clock), state, BOOK, SubmitRate(PER_MIN, 1)),
                      OperationSubmitted)  # within the rate: judged as ever


def test_a_restart_over_the_command_rate_is_rejected_too(clock):
    state = AdmissionState()
    state.apply(on_submit(by("ann", "op-0"), ctx(clock), state, BOOK))
    restart = RestartOperation(op_id="op-0", new_op_id="op-1", requested_by="ann")
    with pytest.raises(InvalidInput, match="over the command rate"):
        on_rerun(restart, ctx(clock), state, BOOK, None, OverRate(CommandRate(PER_MIN, 1), 5.0))


class Raw:
    def __init__(self) -> None:
        self.settled: list[str] = []

    async def term(self) -> None:
        self.settled.append("term")


def received(subject: str, data: bytes, seq: int) -> Received:
    return Received(subject=subject, data=data, headers={}, stream_seq=seq, num_delivered=1, raw=Raw())


def test_admission_charges_every_command_malformed_and_refused_too_and_then_rejects_a_submit(clock):
    admission = Admission(Settings(command_rate_per_min=PER_MIN, command_burst=2), clock)
    garbage = received("cmd.ann.submit._", b"{not json", 1)
    admission.arrived(garbage, None)  # malformed: charged to the subject's user
    stop = StopOperation(op_id="someone-elses")
    refused = received("cmd.ann.stop", codec.encode(stop), 2)
    admission.arrived(refused, stop)  # will be refused (unknown op, not allowed): charged all the same
    assert admission.refusal_text(refused, "unknown_op", "no such op") == "no such op"
    valid = received("cmd.ann.submit._", b"{}", 3)
    admission.arrived(valid, by("ann", "op-1"))
    over = admission.commands_over(ctx(clock, seq=3))
    assert over is not None and over.wait_s == pytest.approx(10.0)
    assert admission.commands_over(ctx(clock, "bob", seq=4)) is None
    admission.arrived(received("cmd.bob.submit._", b"{}", 4), by("bob", "op-2"))
    assert admission.commands_over(ctx(clock, "bob", seq=4)) is None  # another requester goes through


def test_the_fold_never_touches_the_command_rate_so_a_replay_decides_the_same(clock):
    """Leader-local: the op stream (what a restart replays) never charges nor refills the command buckets."""
    admission = Admission(Settings(command_rate_per_min=PER_MIN, command_burst=1), clock)
    for i in range(5):
        event = msgspec.structs.replace(submitted(op("a").build(), op_id=f"op-{i}", at=T0), requested_by="ann")
        admission._fold(codec.encode(event), i + 1)
    assert admission.command_rate.buckets == {} and len(admission.submit_rate.buckets) == 1
    admission.arrived(received("cmd.ann.submit._", b"{}", 9), SimpleNamespace(requested_by=""))
    assert admission.commands_over(ctx(clock, seq=9)) is None  # a fresh bucket: a restart only forgets
