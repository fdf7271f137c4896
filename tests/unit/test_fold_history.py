"""An op's history as admission keeps it (issue 32 §1): the fold adds an entry per event of the stream
(``rules.op_history``), a replay rebuilds the same timeline, and ``why`` answers it for any op it knows: live,
ended, or rejected before it was an op (its queue, name and reason)."""
from __future__ import annotations

import msgspec

from opsched.proto import codec
from opsched.proto.events import Event, OperationRejected
from opsched.proto.limits import MAX_HISTORY_ENTRIES, MAX_OUTPUTS_BYTES
from opsched.proto.summaries import OpSummary
from opsched.rules.op_history import Timeline, entry_of
from opsched.services.admission import queries
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.admission.state.retention import summary_of
from tests.builders import (
    admitted,
    book,
    failed,
    failure_final,
    gates_cleared,
    op,
    queue,
    running,
    submitted,
    succeeded,
    t,
)
from tests.builders.preemption import evicted, preempt_requested, preempted

SPEC = op("train").gpus(1).build()
RECLAIMED = "queue research reclaims 1 nvidia.com/gpu lent to default"


def two_attempts() -> list[Event]:
    """Attempt 0 preempted by ``hi`` (reclaim); attempt 1 fails for good."""
    return [submitted(SPEC, op_id="lo", queue="default", by="alice"), *gates_cleared("lo"),
            admitted(SPEC, op_id="lo", at=t(1)), running("lo", at=t(2), node="n1"),
            preempt_requested("lo", preemptor="hi", at=t(3), reason="reclaim", message=RECLAIMED),
            preempted("lo", preemptor="hi", at=t(4), reason="reclaim"),
            admitted(SPEC, op_id="lo", at=t(5), attempt=1), running("lo", at=t(6), attempt=1, node="n2"),
            failed("lo", at=t(7), attempt=1, reason="Error", message="boom", node="n2", exit_code=2),
            failure_final("lo", at=t(8), attempt=1, message="no retry left: 0 of maxRetries 0 used")]


def stored(*events: Event, state: AdmissionState | None = None) -> AdmissionState:
    """Fold ``events`` as the stream gives them: with sequences 1, 2, ..."""
    state = state if state is not None else AdmissionState()
    for seq, event in enumerate(events, 1):
        state.apply(event, seq)
    return state


def test_the_timeline_of_two_attempts_says_who_preempted_it_and_why_then_how_it_failed():
    timeline = stored(*two_attempts()).ops["lo"].history.timeline
    assert [(e.attempt, e.event) for e in timeline.entries] == [
        (0, "submitted"), (0, "admitted"), (0, "running"), (0, "preempt_requested"), (0, "preempted"),
        (1, "admitted"), (1, "running"), (1, "failed"), (1, "failure_final")]
    asked = timeline.entries[3]
    assert (asked.by, asked.reason, asked.message) == ("hi", "reclaim", RECLAIMED)
    assert timeline.entries[7].message == "boom; exit code 2" and timeline.entries[7].node == "n2"
    assert timeline.dropped == 0


def test_a_replay_rebuilds_the_same_timeline():
    assert stored(*two_attempts()).ops["lo"].history.timeline == stored(*two_attempts()).ops["lo"].history.timeline


def test_a_decision_assumed_before_its_publish_is_in_once_the_stream_has_it_and_only_once():
    events = [submitted(SPEC, op_id="x"), *gates_cleared("x")]
    state = stored(*events)
    decision = admitted(SPEC, op_id="x", at=t(1))
    state.apply(decision)  # the cycle assumes it
    assert [e.event for e in state.ops["x"].history.timeline.entries] == ["submitted"]
    state.apply(decision, len(events) + 1)  # ... and reads it back from the stream
    state.apply(decision, len(events) + 1)  # (delivered again)
    assert [e.event for e in state.ops["x"].history.timeline.entries] == ["submitted", "admitted"]


def test_why_of_a_held_op_gives_its_name_and_history():
    answer = queries.why(stored(*two_attempts()), book(queue("default")), "lo")
    assert answer.found and answer.status == "failed" and answer.name == "train"
    assert [e.event for e in answer.history][-2:] == ["failed", "failure_final"]
    assert answer.history[4].by == "hi" and answer.history[4].reason == "reclaim"


def test_why_of_a_submit_rejected_before_it_was_an_op_gives_its_queue_name_reason_and_history():
    rejected = OperationRejected(op_id="r", at=t(1), reason="unknown_queue", message="unknown queue 'gpux'",
                                 name="train", queue="gpux")
    answer = queries.why(stored(rejected), book(queue("default")), "r")
    assert (answer.found, answer.status, answer.queue, answer.name) == (True, "rejected", "gpux", "train")
    assert (answer.end_reason, answer.end_message) == ("unknown_queue", "unknown queue 'gpux'")
    assert [(e.event, e.reason, e.queue) for e in answer.history] == [("rejected", "unknown_queue", "gpux")]


def test_a_summary_with_a_full_history_and_the_largest_outputs_stays_far_under_a_message_s_size():
    timeline = Timeline()
    for i in range(MAX_HISTORY_ENTRIES * 2):
        timeline.add(entry_of(preempt_requested("lo", preemptor=f"hi-{i}", attempt=i, message="m" * 10_000)))
    summary = OpSummary(op_id="lo", status="failed", history=timeline.entries, history_dropped=timeline.dropped,
                        outputs={"x": "y" * MAX_OUTPUTS_BYTES})
    assert len(codec.encode(summary)) < 64 * 1024  # NATS takes 1 MiB


def test_an_op_evicted_then_successful_ends_without_the_eviction_s_message():
    eviction = msgspec.structs.replace(evicted("g", at=t(1), reason="pods_not_ready"), message="2 of 3 pods running")
    events = [submitted(SPEC, op_id="g"), *gates_cleared("g"), admitted(SPEC, op_id="g"), running("g"), eviction,
              admitted(SPEC, op_id="g", attempt=1, at=t(2)), running("g", attempt=1, at=t(3)),
              succeeded("g", attempt=1, at=t(4))]
    state = stored(*events)
    answer = queries.why(state, book(queue("default")), "g")
    assert (answer.end_reason, answer.end_message) == ("Completed", "")
    assert summary_of(state.ops["g"]).message == ""
    assert [e.message for e in answer.history if e.event == "evicted"] == ["2 of 3 pods running"]  # kept there
