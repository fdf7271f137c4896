"""Schedule formats: the cron parser (fields, next and previous times), the polyaxonfile ``schedule``
section (the edge) and the schedule messages on the wire."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import msgspec
import pytest

from opsched.bus.addressing import subject_for
from opsched.polyaxonfile import SpecError, parse_polyaxonfile_with_schedule
from opsched.proto import codec, subjects
from opsched.proto.schedules import (
    CreateSchedule,
    DeleteSchedule,
    ScheduleCreated,
    ScheduleDeleted,
    ScheduleFinished,
    ScheduleFired,
    ScheduleSpec,
    run_op_id,
)
from opsched.proto.schema_snapshots import SCHEDULE_SCHEMA_DIR, render_schedules
from opsched.rules import cron
from tests.builders import T0, case, case_name, op, t

TEMPLATE = op("train").gpus(1).build()


def at(text: str) -> datetime:
    """``at("2026-01-02 09:00")``, UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


# ---- cron: parsing --------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a star is every value", expr="* * * * *", minutes=set(range(60)), weekdays=set(range(7))),
    case("a step over a star starts at the field's minimum", expr="*/15 * * * *", minutes={0, 15, 30, 45}),
    case("a range with a step keeps every step-th value", expr="0 9-17/4 * * *", hours={9, 13, 17}),
    case("a value with a step runs to the field's maximum", expr="50/5 * * * *", minutes={50, 55}),
    case("lists mix values and ranges", expr="1,5-7,59 * * * *", minutes={1, 5, 6, 7, 59}),
    case("weekday 7 is Sunday like 0", expr="0 0 * * 7", weekdays={0}),
    case("months and weekdays may be named in any case", expr="0 0 * JAN,jul Mon-Fri", months={1, 7},
         weekdays={1, 2, 3, 4, 5}),
    case("a macro stands for its expression", expr="@daily", minutes={0}, hours={0}),
], ids=case_name)
def test_a_cron_field_parses_to_its_values(c):
    parsed = cron.parse(c.expr)
    for attr in ("minutes", "hours", "months", "weekdays"):
        if attr in c.args:
            assert set(getattr(parsed, attr)) == c.args[attr]


@pytest.mark.parametrize("c", [
    case("an empty expression", expr="", error="empty cron expression"),
    case("four fields", expr="* * * *", error="has 4 fields; expected 5"),
    case("a minute of 60", expr="60 * * * *", error="minute field '60': 60 is out of range 0-59"),
    case("an hour of 24", expr="0 24 * * *", error="hour field '24': 24 is out of range 0-23"),
    case("a day of month 0", expr="0 0 0 * *", error="day-of-month field '0': 0 is out of range 1-31"),
    case("a month of 13", expr="0 0 * 13 *", error="month field '13': 13 is out of range 1-12"),
    case("a weekday of 8", expr="0 0 * * 8", error="day-of-week field '8': 8 is out of range 0-7"),
    case("a step of 0", expr="*/0 * * * *", error="step '0' must be a whole number of at least 1"),
    case("a range that runs backwards", expr="5-1 * * * *", error="range '5-1' runs backwards"),
    case("a word in a numeric field", expr="x * * * *", error="'x' is not a number"),
    case("an unknown month name", expr="0 0 * foo *", error="'foo' is not a number or a name (jan"),
    case("an empty list item", expr="1,,2 * * * *", error="empty list item"),
    case("an unknown macro", expr="@reboot", error="unknown cron macro '@reboot'"),
    case("a day no month has", expr="0 0 30 2 *", error="never fires"),
], ids=case_name)
def test_an_invalid_cron_expression_says_which_field_and_why(c):
    with pytest.raises(cron.CronError, match=re.escape(c.error)):
        cron.parse(c.expr)


# ---- cron: next and previous times ------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("every 15 minutes goes to the next quarter", expr="*/15 * * * *", after="2026-01-01 12:07",
         next="2026-01-01 12:15"),
    case("the next slot is strictly after the time given", expr="*/15 * * * *", after="2026-01-01 12:15",
         next="2026-01-01 12:30"),
    case("an hour step skips to the next hour of the step", expr="0 */6 * * *", after="2026-01-01 12:00",
         next="2026-01-01 18:00"),
    case("a stepped hour range wraps to the next day", expr="30 9-17/4 * * *", after="2026-01-01 17:30",
         next="2026-01-02 09:30"),
    case("the first of the month crosses a month boundary", expr="0 0 1 * *", after="2026-01-31 23:59",
         next="2026-02-01 00:00"),
    case("the 31st skips the months without one", expr="0 0 31 * *", after="2026-01-31 00:00",
         next="2026-03-31 00:00"),
    case("the last minute of the year crosses the year", expr="59 23 31 12 *", after="2026-12-31 23:59",
         next="2027-12-31 23:59"),
    case("February 29th waits for a leap year", expr="0 0 29 2 *", after="2026-01-01 00:00",
         next="2028-02-29 00:00"),
    case("weekdays skip the weekend", expr="0 9 * * mon-fri", after="2026-01-02 09:00",
         next="2026-01-05 09:00"),
    case("Sunday is 0 and 7", expr="0 0 * * 7", after="2026-01-01 00:00", next="2026-01-04 00:00"),
    case("a restricted day of month OR a restricted weekday matches", expr="0 0 13 * fri",
         after="2026-01-03 00:00", next="2026-01-09 00:00"),
    case("the day of month matches on its own too", expr="0 0 13 * fri", after="2026-01-09 00:00",
         next="2026-01-13 00:00"),
    case("a starred day of month with a weekday means only that weekday", expr="0 0 */1 * fri",
         after="2026-01-03 00:00", next="2026-01-09 00:00"),
    case("a month step gives quarters", expr="0 0 1 */3 *", after="2026-01-01 00:00", next="2026-04-01 00:00"),
    case("hourly is minute 0 of every hour", expr="@hourly", after="2026-01-01 12:00:30",
         next="2026-01-01 13:00"),
], ids=case_name)
def test_the_next_time_of_a_cron_expression(c):
    assert cron.parse(c.expr).next_after(at(c.after)) == at(c.next)


@pytest.mark.parametrize("c", [
    case("every 15 minutes goes back to the last quarter", expr="*/15 * * * *", at="2026-01-01 12:07",
         prev="2026-01-01 12:00"),
    case("a matching minute is its own latest slot", expr="*/15 * * * *", at="2026-01-01 12:15:30",
         prev="2026-01-01 12:15"),
    case("the first of the month goes back within the month", expr="0 0 1 * *", at="2026-03-15 10:00",
         prev="2026-03-01 00:00"),
    case("the 31st goes back over months without one", expr="0 0 31 * *", at="2026-03-15 00:00",
         prev="2026-01-31 00:00"),
    case("weekdays go back over the weekend", expr="0 9 * * mon-fri", at="2026-01-04 23:00",
         prev="2026-01-02 09:00"),
    case("an hour list goes back to the day before", expr="30 9,17 * * *", at="2026-01-02 09:29",
         prev="2026-01-01 17:30"),
    case("the last minute of a year is found from the next year", expr="59 23 31 12 *",
         at="2027-01-01 00:00", prev="2026-12-31 23:59"),
], ids=case_name)
def test_the_latest_time_of_a_cron_expression_at_or_before_a_time(c):
    assert cron.parse(c.expr).at_or_before(at(c.at)) == at(c.prev)


@pytest.mark.parametrize("expr", [
    "*/7 3-5 * * *", "0,30 */5 1-3,15 * mon", "15 10 * * 1-5", "*/20 * 2 1 *", "@hourly", "0 0 13 * fri",
])
def test_next_and_previous_times_agree_with_a_minute_by_minute_scan(expr):
    parsed = cron.parse(expr)
    start, minutes = at("2025-12-30 00:00"), 16 * 24 * 60
    scan = [start + timedelta(minutes=m) for m in range(minutes) if parsed.matches(start + timedelta(minutes=m))]
    forward, slot = [], parsed.first_at_or_after(start)
    while slot is not None and slot < start + timedelta(minutes=minutes):
        forward.append(slot)
        slot = parsed.next_after(slot)
    backward, slot = [], parsed.at_or_before(start + timedelta(minutes=minutes - 1))
    while slot is not None and slot >= start:
        backward.append(slot)
        slot = parsed.at_or_before(slot - timedelta(minutes=1))
    assert scan and forward == scan == backward[::-1]


# ---- the polyaxonfile edge -------------------------------------------------------------------------------

FILE = """
version: 1.1
kind: operation
name: nightly
{schedule}
component:
  run:
    kind: job
    container: {{image: busybox, command: [echo, hi]}}
"""


def schedule_of(section: str) -> ScheduleSpec | None:
    return parse_polyaxonfile_with_schedule(FILE.format(schedule=section))[1]


@pytest.mark.parametrize("c", [
    case("a cron schedule with every field", section="schedule: {kind: cron, cron: '0 2 * * *', "
         "startAt: 2026-01-01T00:00:00Z, endAt: 2026-02-01T00:00:00+01:00, maxRuns: 3, dependsOnPast: true}",
         spec=ScheduleSpec(kind="cron", cron="0 2 * * *", start_at=at("2026-01-01 00:00"),
                           end_at=at("2026-01-31 23:00"), max_runs=3, depends_on_past=True)),
    case("an interval in seconds", section="schedule: {kind: interval, frequency: 120}",
         spec=ScheduleSpec(kind="interval", frequency_s=120)),
    case("a datetime with a time without a zone taken as UTC", section="schedule: {kind: datetime, "
         "startAt: '2026-03-01T08:00:00'}", spec=ScheduleSpec(kind="datetime", start_at=at("2026-03-01 08:00"))),
    case("no schedule section", section="", spec=None),
], ids=case_name)
def test_the_schedule_section_of_a_polyaxonfile_is_read(c):
    assert schedule_of(c.section) == c.spec


@pytest.mark.parametrize("c", [
    case("a bad cron expression", section="schedule: {kind: cron, cron: '0 2 * *'}", loc="schedule.cron",
         msg="has 4 fields"),
    case("an interval of zero", section="schedule: {kind: interval, frequency: 0}", loc="schedule.frequency",
         msg="0 s is out of bounds: from 60 s"),
    case("endAt before startAt", section="schedule: {kind: interval, frequency: 60, startAt: 2026-01-02T00:00:00Z, "
         "endAt: 2026-01-01T00:00:00Z}", loc="schedule.endAt", msg="is before startAt"),
    case("a datetime without startAt", section="schedule: {kind: datetime}", loc="schedule.startAt",
         msg="field required"),
    case("an unknown kind", section="schedule: {kind: hourly}", loc="schedule.kind", msg="kind 'hourly' is unknown"),
    case("maxRuns below one", section="schedule: {kind: interval, frequency: 60, maxRuns: 0}",
         loc="schedule.maxRuns", msg="0 is out of bounds: from 1 to 1000000"),
    case("an unknown field", section="schedule: {kind: interval, frequency: 60, every: 3}", loc="schedule.every",
         msg="unknown field 'every'"),
], ids=case_name)
def test_a_bad_schedule_section_is_a_field_error(c):
    with pytest.raises(SpecError) as err:
        schedule_of(c.section)
    assert [(e.loc, c.msg in e.msg) for e in err.value.errors] == [(c.loc, True)]


def test_reading_the_schedule_does_not_warn_about_it_but_the_plain_parser_refuses_it(recwarn):
    text = FILE.format(schedule="schedule: {kind: interval, frequency: 60}")
    parse_polyaxonfile_with_schedule(text)
    assert not [w for w in recwarn if "schedule" in str(w.message)]
    from opsched.polyaxonfile import SpecError, parse_polyaxonfile
    with pytest.raises(SpecError, match="opsched schedule FILE"):
        parse_polyaxonfile(text)


# ---- the wire ----------------------------------------------------------------------------------------------

SAMPLES = [
    CreateSchedule(schedule_id="s", spec=ScheduleSpec(kind="cron", cron="0 * * * *", start_at=T0, end_at=t(9),
                                                      max_runs=2, depends_on_past=True),
                   op=TEMPLATE, requested_at=T0, requested_by="alice"),
    DeleteSchedule(schedule_id="s", requested_at=T0, requested_by="bob"),
    ScheduleCreated(op_id="s", at=T0, spec=ScheduleSpec(kind="interval", frequency_s=60), op=TEMPLATE,
                    requested_by="alice"),
    ScheduleFired(op_id="s", at=T0, run=1, run_op_id=run_op_id("s", 1), scheduled_for=T0),
    ScheduleDeleted(op_id="s", at=T0, requested_by="bob"),
    ScheduleFinished(op_id="s", at=T0, reason="max_runs", message="2 runs", runs=2),
]


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: codec.type_of(m))
def test_a_schedule_message_round_trips_and_its_type_is_its_tag(message):
    data = codec.encode(message)
    assert codec.decode(data) == message
    decode = codec.decode_command if isinstance(message, (CreateSchedule, DeleteSchedule)) else codec.decode_ops_stream
    assert decode(data) == message and msgspec.json.decode(data)["type"] == codec.type_of(message)


def test_schedule_events_are_routed_under_the_schedule_id_and_op_views_ignore_them():
    fired = SAMPLES[3]
    assert subject_for(fired) == subjects.schedule_event("schedule_fired", "s") == "ops.schedule_fired.s"
    assert subjects.schedule_fired_msg_id("s", 1) == "s.fired.1"
    with pytest.raises(msgspec.ValidationError):
        codec.decode_event(codec.encode(fired))  # not an op event: OpsView and the other services skip it


def test_schedule_commands_fall_in_the_command_stream():
    for subject in (subjects.CMD_SCHEDULE_CREATE, subjects.CMD_SCHEDULE_DELETE):
        owners = [s for s, (patterns, _) in subjects.STREAMS.items()
                  if any(subject.startswith(p.rstrip(">")) for p in patterns)]
        assert owners == [subjects.CMD_STREAM]


@pytest.mark.parametrize("name", sorted(render_schedules()))
def test_the_checked_in_schedule_schema_equals_the_code(name):
    path = SCHEDULE_SCHEMA_DIR / name
    assert path.exists() and path.read_text() == render_schedules()[name], \
        "run `python -m opsched.proto.schema_snapshots`"
