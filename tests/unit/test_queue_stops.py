"""Holding, draining and resuming a queue (``services.admission.model.queue_stops``): the command's judgement, the rule
that nothing of a stopped queue is admitted, the drain, the resume, and what `why` and `queues` answer."""
from __future__ import annotations

import pytest

from opsched import cli
from opsched.bus.errors import InvalidInput
from opsched.connection import EXIT_INVALID
from opsched.proto import codec
from opsched.proto.events import OperationAdmitted, OperationPreempted, PreemptRequested
from opsched.proto.queue_stops import QueueStopSet, SetQueueStop
from opsched.proto.reasons import Preemption, Reason, Refusal
from opsched.services.admission import queries
from opsched.services.admission.handlers import on_set_queue_stop
from opsched.services.admission.service import Admission
from opsched.services.runtime.settings import Settings
from opsched.tables import queues_table
from opsched.view import OpsView
from tests.builders import T0, admitted, gates_cleared, op, running, submitted, t
from tests.builders.clock import FakeClock
from tests.builders.queues import book, queue
from tests.unit.admission_scenarios import admitted_ids, decide, fold, queues, ready

BOOK = queues(("default", 10), ("gpu", 10))


def stop_set(queue: str, policy: str, *, by: str = "ann", comment: str = "node upgrade") -> QueueStopSet:
    return QueueStopSet(queue=queue, stop_policy=policy, at=T0, by=by, comment=comment, request_id="r1")


def held_state(policy: str = "Hold", *events):
    state = fold(*events)
    state.stops.apply(stop_set("gpu", policy))
    return state


def in_gpu(op_id: str, *, preemptible: bool = True) -> list:
    spec = op(op_id).queue("gpu").preemptible(preemptible).build()
    return [submitted(spec, op_id=op_id, queue="gpu"), admitted(spec, op_id=op_id, queue="gpu"), running(op_id)]


# ---- the command ----------------------------------------------------------------------------------------------

def test_a_hold_is_answered_with_the_policy_in_force_by_whom_and_why():
    state = fold()
    answer = on_set_queue_stop(SetQueueStop(queue="gpu", stop_policy="Hold", comment="node upgrade",
                                         requested_by="ann", request_id="r1"), state.stops, BOOK, t(5))
    assert answer == QueueStopSet(queue="gpu", stop_policy="Hold", at=t(5), by="ann", comment="node upgrade",
                                  request_id="r1")


@pytest.mark.parametrize(("queue", "policy", "in_force", "reason"), [
    ("tpu", "Hold", None, Refusal.UNKNOWN_QUEUE),  # not configured
    ("tpu", "HoldAndDrain", None, Refusal.UNKNOWN_QUEUE),
    ("Not A Token", "None", None, Refusal.UNKNOWN_QUEUE),
    ("gpu", "Hold", "Hold", Refusal.QUEUE_UNCHANGED),  # nothing to do
    ("gpu", "None", None, Refusal.QUEUE_UNCHANGED),
])
def test_a_stop_of_an_unknown_queue_or_of_a_queue_already_so_is_refused(queue, policy, in_force, reason):
    state = fold()
    if in_force:
        state.stops.apply(stop_set(queue, in_force))
    with pytest.raises(InvalidInput) as refused:
        on_set_queue_stop(SetQueueStop(queue=queue, stop_policy=policy, request_id="r"), state.stops, BOOK, T0)
    assert refused.value.reason == reason


def test_a_resume_clears_the_hold_of_a_queue_no_longer_configured():
    state = fold()
    state.stops.apply(stop_set("tpu", "Hold"))
    answer = queries.queues(state, BOOK)
    assert answer.stopped_unconfigured == ["tpu"]
    assert "tpu held but not configured (it comes back held if added again; resume clears it)" in queues_table(answer)
    assert on_set_queue_stop(SetQueueStop(queue="tpu", stop_policy="None", request_id="r"), state.stops, BOOK,
                             T0).queue == "tpu"


# ---- the rules ------------------------------------------------------------------------------------------------

def test_nothing_of_a_held_queue_is_admitted_its_running_ops_go_on_and_other_queues_admit():
    state = held_state("Hold", *in_gpu("r"), ready("a", queue="gpu"), ready("b", queue="default"))
    decisions = decide(state, BOOK)
    assert admitted_ids(decisions) == ["b"]
    assert not [d for d in decisions if isinstance(d, PreemptRequested)]
    assert state.ops["r"].status.name == "RUNNING"
    why = queries.why(state, BOOK, "a", T0)
    assert [r.code for r in why.reasons][:1] == [Reason.QUEUE_HELD]
    assert why.reasons[0].message == ("queue gpu is held by ann since 2026-01-01 12:00:00 (node upgrade): nothing is "
                                      "admitted until `opsched queues resume gpu`")


def test_an_op_still_on_its_gates_in_a_held_queue_is_told_so():
    state = held_state("Hold", submitted(op("a").queue("gpu").build(), op_id="a", queue="gpu"))
    assert Reason.QUEUE_HELD in [r.code for r in queries.why(state, BOOK, "a", T0).reasons]


def test_a_drain_asks_every_op_the_queue_runs_to_go_once_preemptible_or_not():
    state = held_state("HoldAndDrain", *in_gpu("r1"), *in_gpu("r2", preemptible=False), *in_gpu("x"))
    first = [d for d in decide(state, BOOK) if isinstance(d, PreemptRequested)]
    assert sorted(d.op_id for d in first) == ["r1", "r2", "x"]
    assert {(d.reason, d.preemptor) for d in first} == {(Preemption.QUEUE_DRAINED, "")}
    assert first[0].message == "queue gpu drained by ann at 2026-01-01 12:00:00: node upgrade"
    assert not [d for d in decide(state, BOOK, t(1)) if isinstance(d, PreemptRequested)]  # once each
    assert queries.why(state, BOOK, "r1").reasons[0].message == ("being preempted by the drain of queue gpu; its pods "
                                                                  "are terminating")
    assert queries.queues(state, BOOK).queues[1].draining == 3
    fold(OperationPreempted(op_id="r1", at=t(2), attempt=0, reason=Preemption.QUEUE_DRAINED), state=state)
    assert state.ops["r1"].status.name == "QUEUED"  # back in its queue (not a retry) ...
    assert admitted_ids(decide(state, BOOK, t(3))) == []  # ... and not admitted while the queue is drained


def test_a_resume_admits_again():
    state = held_state("Hold", ready("a", queue="gpu"))
    assert admitted_ids(decide(state, BOOK)) == []
    state.stops.apply(stop_set("gpu", "None"))
    assert admitted_ids(decide(state, BOOK, t(1))) == ["a"]


def test_the_queues_answer_shows_the_state_by_whom_since_when_and_why():
    status = {q.name: q for q in queries.queues(held_state("Hold"), BOOK).queues}
    assert (status["gpu"].stop_policy, status["gpu"].stopped_by, status["gpu"].stopped_at,
            status["gpu"].stop_comment) == ("Hold", "ann", T0, "node upgrade")
    assert status["default"].stop_policy == "None"


async def test_the_config_stream_replayed_restores_the_state_latest_per_queue_in_force():
    admission = Admission(Settings(), FakeClock(T0))
    for message in (stop_set("gpu", "Hold"), stop_set("default", "HoldAndDrain"), stop_set("gpu", "None")):
        await admission.on_config(codec.encode(message), 1)
    assert {q: s.stop_policy for q, s in admission.state.stops.in_force.items()} == {"default": "HoldAndDrain"}


def test_the_queues_table_says_each_queues_state_and_who_stopped_it_since_when_and_why():
    state = held_state("HoldAndDrain", *in_gpu("r1"))
    decide(state, BOOK)
    text = queues_table(queries.queues(state, BOOK))
    assert text.splitlines()[0].split()[:2] == ["QUEUE", "STATE"]
    assert text.splitlines()[1].split()[:2] == ["default", "*"] and "active" in text.splitlines()[1]
    assert "draining 1" in text.splitlines()[2]
    assert "gpu draining 1 by ann since 2026-01-01 12:00:00: node upgrade" in text


def test_queues_hold_without_a_queue_is_refused_before_anything_is_sent(capsys):
    assert cli.main(["queues", "hold"]) == EXIT_INVALID
    assert "usage: opsched queues hold|drain|resume QUEUE" in capsys.readouterr().err


def test_an_op_preempted_by_a_drain_reads_as_the_drain_in_opsched_ops():
    state = held_state("HoldAndDrain", *in_gpu("r1"))
    drain = next(d for d in decide(state, BOOK) if isinstance(d, PreemptRequested))
    view = OpsView()
    for event in (*in_gpu("r1"), drain):
        view.fold(event)
    assert view.rows["r1"].reason == "queue gpu drained by ann at 2026-01-01 12:00:00: node upgrade"


def test_a_held_queues_unused_quota_stays_lendable_to_its_cohort():
    lab = book(queue("default", cohort="lab", gpus={"h100": 2}), queue("gpu", cohort="lab", gpus={"h100": 2}))
    spec = op("big").gpus(3, product="H100").build()
    state = held_state("Hold", submitted(spec, op_id="big", queue="default"), *gates_cleared("big"))
    [admitted_big] = [d for d in decide(state, lab) if isinstance(d, OperationAdmitted)]
    assert admitted_big.borrowing  # 1 of gpu's 2 borrowed while gpu is held
