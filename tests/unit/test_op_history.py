"""An op's history, the rule (rules.op_history): the entry each event gives, the bound of a timeline, and that
every event type of the contract is either shown or explicitly not."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto.events import (
    EVENTS,
    CostRecorded,
    Event,
    HandlerFailed,
    OperationAdmitted,
    OperationApproved,
    OperationResumed,
    OperationTouched,
)
from opsched.proto.history import HistoryEntry
from opsched.proto.limits import MAX_HISTORY_ENTRIES, MAX_HISTORY_MESSAGE
from opsched.proto.schedules import SCHEDULE_EVENTS
from opsched.rules.op_history import BORROWING, ENTRIES, NOT_SHOWN, Timeline, entry_of
from tests.builders import T0, case, case_name, op
from tests.builders.clock import t
from tests.builders.events import (
    cost_estimated,
    failed,
    rejected,
    retry_scheduled,
    submitted,
    succeeded,
)
from tests.builders.preemption import evicted, preempt_requested, preempted

SPEC = op("train").gpus(1).build()


def _all_event_types(cls: type = Event) -> set[type]:
    out: set[type] = set()
    for sub in cls.__subclasses__():
        below = _all_event_types(sub)
        out |= below or {sub}  # the messages: the leaves (not a base like ScheduleEvent)
    return out


def test_every_event_type_is_shown_or_explicitly_not():
    known = set(ENTRIES) | NOT_SHOWN
    every = _all_event_types() | set(EVENTS) | set(SCHEDULE_EVENTS)
    assert every - known == set(), "add each new event type to rules.op_history: ENTRIES or NOT_SHOWN"
    assert set(ENTRIES) & NOT_SHOWN == set()


@pytest.mark.parametrize("c", [
    case("submitted: the queue and who", event=submitted(SPEC, queue="gpu", by="alice"),
         want=dict(event="submitted", queue="gpu", by="alice")),
    case("preempt requested: by whom, why, the message as published",
         event=preempt_requested("lo", preemptor="hi", reason="reclaim", message="queue gpu reclaims 2 GPUs"),
         want=dict(event="preempt_requested", by="hi", reason="reclaim", message="queue gpu reclaims 2 GPUs")),
    case("preempted", event=preempted("lo", preemptor="hi", reason="within_queue", attempt=1),
         want=dict(event="preempted", by="hi", reason="within_queue", attempt=1)),
    case("preempted with no preemptor (a queue drained)", event=preempted("lo", preemptor="", reason="queue_drained"),
         want=dict(event="preempted", by="", reason="queue_drained")),
    case("evicted: reason and back-off", event=evicted("g", reason="pods_not_ready", retry_after_s=30),
         want=dict(event="evicted", reason="pods_not_ready", retry_after_s=30.0)),
    case("failed: node, reason, message and exit code",
         event=failed(reason="Error", message="OOM", node="n1", exit_code=137),
         want=dict(event="failed", node="n1", reason="Error", message="OOM; exit code 137")),
    case("retry scheduled", event=retry_scheduled(reason="Error", retry_after_s=10),
         want=dict(event="retry_scheduled", reason="Error", retry_after_s=10.0)),
    case("rejected", event=rejected(reason="unknown_queue", message="unknown queue 'x'"),
         want=dict(event="rejected", reason="unknown_queue", message="unknown queue 'x'")),
    case("succeeded (completed: no reason)", event=succeeded(node="n2"), want=dict(event="succeeded", node="n2",
                                                                                   reason="")),
    case("admitted: queue, flavors, borrowing",
         event=OperationAdmitted(op_id="op-1", at=T0, spec=SPEC, queue="gpu", namespace="ns", pod_name="p",
                                 flavors={"nvidia.com/gpu": "a100"}, borrowing=True, agent="east"),
         want=dict(event="admitted", queue="gpu", flavors={"nvidia.com/gpu": "a100"}, reason=BORROWING,
                   node="east")),
    case("approved: by whom, the comment", event=OperationApproved(op_id="op-1", at=T0, approved_by="bob",
                                                                   comment="ok"),
         want=dict(event="approved", by="bob", message="ok")),
    case("resumed: by whom", event=OperationResumed(op_id="op-1", at=T0, attempt=2, resumed_by="carol"),
         want=dict(event="resumed", by="carol", attempt=2)),
    case("cost recorded: the amount and the pool",
         event=CostRecorded(op_id="op-1", at=T0, amount=3.2, seconds=3600, queue="gpu", pool="a100-pool"),
         want=dict(event="cost_recorded", amount=3.2, pool="a100-pool", queue="gpu")),
    case("a service that gave up", event=HandlerFailed(op_id="op-1", at=T0, service="dispatcher",
                                                       failed_type="admitted", error="boom"),
         want=dict(event="handler_failed", by="dispatcher", reason="admitted", message="boom")),
], ids=case_name)
def test_entry_of_each_shown_event(c):
    entry = entry_of(c.event)
    assert entry is not None
    assert entry.at == c.event.at
    for name, value in c.want.items():
        assert getattr(entry, name) == value, name


@pytest.mark.parametrize("event", [cost_estimated(), OperationTouched(op_id="op-1", at=T0)], ids=str)
def test_events_not_shown_give_no_entry(event):
    assert entry_of(event) is None


def test_a_long_message_is_cut():
    entry = entry_of(rejected(message="x" * 1000))
    assert entry is not None and len(entry.message) == MAX_HISTORY_MESSAGE and entry.message.endswith("…")


def _entry(i: int) -> HistoryEntry:
    return HistoryEntry(at=t(i), attempt=i, event="evicted", reason=f"r{i}")


def test_the_bound_keeps_the_first_and_the_latest_and_counts_what_it_dropped():
    timeline = Timeline()
    for i in range(MAX_HISTORY_ENTRIES + 5):
        timeline.add(_entry(i))
    assert len(timeline.entries) == MAX_HISTORY_ENTRIES
    assert timeline.dropped == 5
    assert timeline.entries[0].attempt == 0
    assert [e.attempt for e in timeline.entries[1:]] == list(range(6, MAX_HISTORY_ENTRIES + 5))


def test_an_event_published_again_is_one_entry():
    timeline = Timeline()
    timeline.add(entry_of(preempted("lo", preemptor="hi", at=t(1))))
    timeline.add(entry_of(preempted("lo", preemptor="hi", at=t(2))))
    timeline.add(None)
    assert len(timeline.entries) == 1


def test_every_event_of_the_contract_s_samples_gives_an_entry_that_round_trips_or_none_when_not_shown():
    from opsched.proto import codec
    from tests.contract.wire_samples import SAMPLES

    for tag, message in SAMPLES.items():
        if not isinstance(message, Event):
            continue
        entry = entry_of(message)
        assert (entry is None) == (type(message) in NOT_SHOWN), tag
        if entry is not None:
            assert entry.event == tag and msgspec.json.decode(codec.encode(entry), type=HistoryEntry) == entry
