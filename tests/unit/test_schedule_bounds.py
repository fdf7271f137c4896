"""The bounds of a schedule (issue 14): refused on construction, on decode and at the polyaxonfile edge,
each naming the field and the bound; at the bounds every decision can be computed; a schedule whose
decision fails anyway is disabled with its reason while the others go on firing. FakeClock; no sleeps."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import msgspec
import pytest

import opsched.proto.schedules as contract
from opsched.bus.errors import InvalidInput
from opsched.polyaxonfile import SpecError, parse_polyaxonfile_with_schedule
from opsched.proto import codec
from opsched.proto.schedules import (
    EARLIEST_TIME,
    LATEST_TIME,
    MAX_CRON_CHARS,
    MAX_FREQUENCY_S,
    MAX_RUNS,
    MIN_FREQUENCY_S,
    CreateSchedule,
    ScheduleCreated,
    ScheduleFinished,
    ScheduleFired,
    ScheduleSpec,
    refused_creation,
)
from opsched.rules import cron
from opsched.services.admission.schedules import Schedules, on_create
from tests.builders import T0, case, case_name, op, t
from tests.builders.clock import FakeClock

TEMPLATE = op("train").build()
UTC = timezone.utc
YEAR_9999 = datetime(9999, 12, 31, 23, 59, 30, tzinfo=UTC)
WIRE_NAMES = {"frequency_s": "frequencyS", "start_at": "startAt", "end_at": "endAt", "max_runs": "maxRuns"}


# ---- the contract: construction and decode ------------------------------------------------------------

OUT_OF_BOUNDS = [
    case("an interval under a minute", spec=dict(kind="interval", frequency_s=59), field="frequencyS",
         bound="from 60 s", limit=MIN_FREQUENCY_S),
    case("an interval of 10**18 seconds", spec=dict(kind="interval", frequency_s=10**18), field="frequencyS",
         bound=f"to {MAX_FREQUENCY_S} s (ten years)", limit=MAX_FREQUENCY_S),
    case("a startAt in year 9999", spec=dict(kind="datetime", start_at=YEAR_9999), field="startAt",
         bound="to 2199-12-31T23:59:59Z", limit="2199-12-31T23:59:59Z"),
    case("an endAt before 1970", spec=dict(kind="cron", cron="@daily", end_at=datetime(1969, 12, 31, tzinfo=UTC)),
         field="endAt", bound="from 1970-01-01T00:00:00Z", limit="1970-01-01T00:00:00Z"),
    case("maxRuns of zero", spec=dict(kind="interval", frequency_s=60, max_runs=0), field="maxRuns",
         bound=f"from 1 to {MAX_RUNS}", limit=">= 1"),
    case("maxRuns above the bound", spec=dict(kind="interval", frequency_s=60, max_runs=MAX_RUNS + 1),
         field="maxRuns", bound=f"from 1 to {MAX_RUNS}", limit=MAX_RUNS),
    case("a cron expression longer than the bound", spec=dict(kind="cron", cron="0" + " " * MAX_CRON_CHARS),
         field="cron", bound=f"at most {MAX_CRON_CHARS}", limit=MAX_CRON_CHARS),
]


@pytest.mark.parametrize("c", OUT_OF_BOUNDS, ids=case_name)
def test_a_schedule_out_of_bounds_cannot_be_built_and_the_refusal_names_the_field_and_the_bound(c):
    with pytest.raises(ValueError) as err:
        ScheduleSpec(**c.spec)
    assert f"{c.field}: " in str(err.value) and c.bound in str(err.value)


def _wire_spec(spec: dict) -> dict:
    return {WIRE_NAMES.get(k, k): v.isoformat() if isinstance(v, datetime) else v for k, v in spec.items()}


@pytest.mark.parametrize("c", OUT_OF_BOUNDS, ids=case_name)
def test_a_create_schedule_out_of_bounds_does_not_decode_and_the_error_names_the_field_and_the_bound(c):
    doc = json.loads(codec.encode(CreateSchedule(schedule_id="s", spec=ScheduleSpec(kind="cron", cron="@daily"),
                                                 op=TEMPLATE)))
    doc["spec"] = _wire_spec(c.spec)
    with pytest.raises(msgspec.ValidationError) as err:
        codec.decode_command(json.dumps(doc).encode())
    assert c.field in str(err.value) and str(c.limit) in str(err.value)


def test_the_bounds_themselves_are_accepted():
    edge = [dict(kind="interval", frequency_s=MIN_FREQUENCY_S, max_runs=1, start_at=EARLIEST_TIME),
            dict(kind="interval", frequency_s=MAX_FREQUENCY_S, max_runs=MAX_RUNS, end_at=LATEST_TIME),
            dict(kind="cron", cron="0 0 * * *".ljust(MAX_CRON_CHARS))]
    for fields in edge:
        spec = ScheduleSpec(**fields)  # type: ignore[arg-type]
        assert msgspec.json.decode(msgspec.json.encode(spec), type=ScheduleSpec) == spec


def test_no_cron_expression_fires_more_often_than_the_minimum_interval():
    every_minute, t0 = cron.parse("* * * * *"), T0
    t1 = every_minute.next_after(t0)
    assert t1 is not None and (t1 - t0).total_seconds() >= MIN_FREQUENCY_S  # cron's grain is the minimum
    with pytest.raises(cron.CronError, match="a seconds field is not supported .*at most once a minute"):
        cron.parse("* * * * * *")


# ---- the edge: the polyaxonfile's schedule section ------------------------------------------------------

FILE = """
version: 1.1
kind: operation
name: nightly
schedule: {schedule}
component:
  run:
    kind: job
    container: {{image: busybox}}
"""


@pytest.mark.parametrize("c", [
    case("an interval under a minute", section="{kind: interval, frequency: 30}", loc="schedule.frequency",
         msg="30 s is out of bounds: from 60 s"),
    case("an interval of 10**18 seconds", section="{kind: interval, frequency: 1000000000000000000}",
         loc="schedule.frequency", msg=f"to {MAX_FREQUENCY_S} s"),
    case("a startAt in year 9999", section="{kind: interval, frequency: 60, startAt: '9999-12-31T23:59:30'}",
         loc="schedule.startAt", msg="9999-12-31T23:59:30 is out of bounds: from 1970-01-01T00:00:00Z to 2199"),
    case("an endAt before 1970", section="{kind: cron, cron: '@daily', endAt: '1969-07-20T20:17:00Z'}",
         loc="schedule.endAt", msg="is out of bounds: from 1970-01-01T00:00:00Z"),
    case("maxRuns above the bound", section="{kind: interval, frequency: 60, maxRuns: 10000000}",
         loc="schedule.maxRuns", msg=f"10000000 is out of bounds: from 1 to {MAX_RUNS}"),
    case("a cron with a seconds field", section="{kind: cron, cron: '* * * * * *'}", loc="schedule.cron",
         msg="a seconds field is not supported"),
    case("a cron expression longer than the bound", section="{kind: cron, cron: '" + "0," * 150 + "0 * * * *'}",
         loc="schedule.cron", msg=f"characters; at most {MAX_CRON_CHARS}"),
], ids=case_name)
def test_a_schedule_section_out_of_bounds_is_a_field_error_naming_the_bound(c):
    with pytest.raises(SpecError) as err:
        parse_polyaxonfile_with_schedule(FILE.format(schedule=c.section))
    assert [(e.loc, c.msg in e.msg) for e in err.value.errors] == [(c.loc, True)], err.value.errors


# ---- decisions: computable at the bounds; a broken schedule is disabled, the others fire -----------------

def tick(schedules: Schedules, clock: FakeClock) -> list:
    """One pass of the runner, minus the bus; ``next_fire`` and ``waiting`` asked too (they must not raise)."""
    events: list = [*schedules.due(clock.now())]
    for e in events:
        schedules.apply(e)
    done = schedules.finished(clock.now())
    for e in done:
        schedules.apply(e)
    schedules.next_fire(clock.now())
    schedules.waiting(clock.now())
    return events + done


@pytest.mark.parametrize("spec", [
    dict(kind="interval", frequency_s=MAX_FREQUENCY_S, start_at=LATEST_TIME),
    dict(kind="interval", frequency_s=MIN_FREQUENCY_S, start_at=EARLIEST_TIME),
    dict(kind="cron", cron="0 0 29 2 *", start_at=LATEST_TIME),  # Feb 29: the longest search
    dict(kind="cron", cron="59 23 31 12 *", start_at=EARLIEST_TIME, end_at=LATEST_TIME),
    dict(kind="datetime", start_at=LATEST_TIME, end_at=LATEST_TIME),
], ids=lambda spec: ", ".join(f"{k}={v}" for k, v in spec.items() if k != "kind"))
def test_every_decision_can_be_computed_for_a_schedule_at_the_bounds(spec):
    clock, schedules = FakeClock(T0), Schedules()
    schedules.apply(ScheduleCreated(op_id="edge", at=T0, spec=ScheduleSpec(**spec), op=TEMPLATE))
    events = tick(schedules, clock)
    for later in (LATEST_TIME - timedelta(seconds=1), LATEST_TIME, LATEST_TIME + timedelta(seconds=MAX_FREQUENCY_S)):
        clock.advance((later - clock.now()).total_seconds())
        events += tick(schedules, clock)
    assert [e for e in events if isinstance(e, ScheduleFinished) and e.reason == "failed"] == []
    assert schedules.records["edge"].disabled is None


def _status_of(op_id: str) -> str:
    if op_id.startswith("broken-"):
        raise RuntimeError("no status for you (a bug)")
    return "succeeded"


@pytest.mark.parametrize("c", [
    case("an interval of 10**18 s stored before the bounds overflows computing its slot",
         spec=dict(kind="interval", frequency_s=10**18), runs=0, error="OverflowError"),
    case("an interval of 10**13 s stored before the bounds fires once, then its next slot overflows",
         spec=dict(kind="interval", frequency_s=10**13), runs=1, error="OverflowError"),
    case("a cron schedule stored before the bounds with startAt 9999-12-31 overflows finding its first slot",
         spec=dict(kind="cron", cron="0 0 * * *", start_at=YEAR_9999), runs=0, error="OverflowError"),
    case("dependsOnPast whose previous run's status cannot be read (a bug)",
         spec=dict(kind="interval", frequency_s=60, depends_on_past=True), runs=1, error="RuntimeError: no status"),
], ids=case_name)
def test_a_broken_schedule_is_disabled_with_its_reason_and_the_others_go_on_firing(c, monkeypatch):
    monkeypatch.setattr(contract, "bound_problems", lambda spec: [])  # built as before the bounds existed
    clock, schedules = FakeClock(T0), Schedules(status_of=_status_of)
    created = [ScheduleCreated(op_id="broken", at=T0, spec=ScheduleSpec(**c.spec), op=TEMPLATE),
               ScheduleCreated(op_id="good", at=T0, spec=ScheduleSpec(kind="interval", frequency_s=60), op=TEMPLATE)]
    for event in created:
        schedules.apply(event)
    events = []
    for _ in range(3):
        events += tick(schedules, clock)
        clock.advance(60)

    runs = {sid: [e.run for e in events if isinstance(e, ScheduleFired) and e.op_id == sid] for sid in ("broken", "good")}
    assert runs == {"good": [1, 2, 3], "broken": list(range(1, c.runs + 1))}
    [finished] = [e for e in events if isinstance(e, ScheduleFinished)]
    assert (finished.op_id, finished.reason, finished.runs) == ("broken", "failed", c.runs)
    assert c.error in finished.message and "disabled" in finished.message

    replayed = Schedules(status_of=_status_of)  # a restart: the same decisions, the finish not published again
    for event in created + events:
        replayed.apply(codec.decode_ops_stream(codec.encode(event)) if event not in created else event)
    assert replayed.finished(clock.now()) == [] and [e.op_id for e in replayed.due(clock.now())] == ["good"]


def _stored_creation(schedule_id: str, **wire_spec) -> bytes:
    """A ``schedule_created`` as an older version stored it, before the contract's bounds."""
    event = ScheduleCreated(op_id=schedule_id, at=T0, spec=ScheduleSpec(kind="cron", cron="0 0 * * *"), op=TEMPLATE)
    doc = json.loads(codec.encode(event))
    doc["spec"].update(wire_spec)
    return json.dumps(doc).encode()


def test_a_stored_schedule_the_contract_refuses_is_disabled_with_the_refusal_and_its_id_stays_taken():
    data = _stored_creation("old", startAt="9999-12-31T23:59:30Z")
    with pytest.raises(msgspec.ValidationError) as err:
        codec.decode_ops_stream(data)
    assert refused_creation(data) == "old"
    schedules = Schedules()
    assert schedules.refuse_stored("old", str(err.value)) and not schedules.refuse_stored("old", "again")

    [finished] = schedules.finished(T0)
    assert (finished.op_id, finished.reason) == ("old", "invalid_spec")
    assert "refused by the contract: startAt: 9999-12-31T23:59:30" in finished.message
    assert "to 2199-12-31T23:59:59Z" in finished.message
    assert schedules.apply(finished)
    assert schedules.finished(t(60)) == [] and schedules.due(t(60)) == [] and schedules.next_fire(t(60)) is None
    with pytest.raises(InvalidInput) as taken:
        on_create(CreateSchedule(schedule_id="old", spec=ScheduleSpec(kind="cron", cron="@daily"), op=TEMPLATE),
                  T0, schedules)
    assert taken.value.reason == "schedule_exists"


@pytest.mark.parametrize("data", [
    b"{not json", json.dumps({"type": "submitted", "opId": "x"}).encode(),
    json.dumps({"type": "schedule_created", "opId": "Not A Token", "spec": {"frequencyS": 1}}).encode(),
    json.dumps({"type": "schedule_created"}).encode(),
], ids=["not json", "another type", "an id that is not a token", "no id"])
def test_only_a_stored_schedule_creation_with_a_usable_id_is_taken_for_a_refused_schedule(data):
    assert refused_creation(data) is None


def test_a_schedule_another_producer_created_with_an_invalid_spec_is_disabled_with_why():
    schedules = Schedules()
    schedules.apply(ScheduleCreated(op_id="typo", at=T0, spec=ScheduleSpec(kind="cron", cron="61 * * * *"),
                                    op=TEMPLATE))
    assert schedules.due(T0) == []
    [finished] = schedules.finished(T0)
    assert finished.reason == "invalid_spec" and "cron: minute field '61'" in finished.message
