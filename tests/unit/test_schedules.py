"""Schedules: when runs fire (interval, cron, datetime, startAt/endAt/maxRuns, dependsOnPast, downtime),
replay, the command handlers and the runner. Time comes from a FakeClock; nothing sleeps.
(The cron parser, the polyaxonfile ``schedule`` section and the wire: ``test_schedule_formats.py``.)"""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from opsched.bus.errors import InvalidInput
from opsched.proto import codec, subjects
from opsched.proto.commands import SubmitOperation
from opsched.proto.schedules import (
    CreateSchedule,
    DeleteSchedule,
    ScheduleCreated,
    ScheduleDeleted,
    ScheduleFinished,
    ScheduleFired,
    ScheduleSpec,
)
from opsched.services.admission.model.records import Status
from opsched.services.admission.schedule_runner import fire_due, run_schedules, submitter
from opsched.services.admission.schedules import (
    Schedules,
    on_create,
    on_delete,
    run_status,
)
from tests.builders import T0, case, case_name, op, t
from tests.builders.bus import MemoryBus, memory_bus
from tests.builders.clock import FakeClock

TEMPLATE = op("train").gpus(1).build()
UTC = timezone.utc


def at(text: str) -> datetime:
    """``at("2026-01-02 09:00")``, UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# ---- when runs fire ---------------------------------------------------------------------------------

def created(sid: str = "s", *, at_: datetime = T0, template=TEMPLATE, **fields) -> ScheduleCreated:
    fields.setdefault("kind", "interval")
    return ScheduleCreated(op_id=sid, at=at_, spec=ScheduleSpec(**fields), op=template)


def tick(schedules: Schedules, clock: FakeClock) -> list:
    """What the runner does in one pass, minus the bus: fire due runs, then mark finished schedules."""
    events = [*schedules.due(clock.now())]
    for e in events:
        schedules.apply(e)
    done = schedules.finished(clock.now())
    for e in done:
        schedules.apply(e)
    return events + done


def fired_offsets(events: list) -> list[float]:
    return [(e.scheduled_for - T0).total_seconds() for e in events if isinstance(e, ScheduleFired)]


@pytest.mark.parametrize("c", [
    case("an interval without startAt fires at once and then every frequency", spec=dict(frequency_s=60),
         steps=[(0, [0]), (30, []), (30, [60]), (60, [120])]),
    case("an interval with a future startAt waits for it", spec=dict(frequency_s=60, start_at=t(100)),
         steps=[(0, []), (99, []), (1, [100]), (60, [160])]),
    case("a startAt in the past fires once for the latest slot, not once per slot",
         spec=dict(frequency_s=600, start_at=t(-3600)), steps=[(0, [0]), (600, [600])]),
    case("a datetime schedule fires once at startAt", spec=dict(kind="datetime", start_at=t(50)),
         steps=[(0, []), (50, [50]), (1000, [])]),
    case("a datetime schedule whose time has passed fires once at once", spec=dict(kind="datetime", start_at=t(-10)),
         steps=[(0, [-10]), (10, [])]),
    case("maxRuns stops the schedule after that many runs", spec=dict(frequency_s=60, max_runs=2),
         steps=[(0, [0]), (60, [60]), (60, []), (600, [])]),
    case("endAt is inclusive", spec=dict(frequency_s=60, end_at=t(120)),
         steps=[(0, [0]), (60, [60]), (60, [120]), (60, [])]),
    case("nothing fires once endAt has passed, not even a slot missed before it",
         spec=dict(frequency_s=60, end_at=t(150)), steps=[(0, [0]), (600, [])]),
    case("a cron schedule fires on its matching minutes", spec=dict(kind="cron", cron="*/15 * * * *"),
         steps=[(0, [0]), (600, []), (300, [900]), (900, [1800])]),
    case("a cron schedule starts at the first match at or after startAt",
         spec=dict(kind="cron", cron="0 * * * *", start_at=t(5400)), steps=[(0, []), (7199, []), (1, [7200])]),
    case("a cron run missed while the service was down fires once, for the latest slot",
         spec=dict(kind="cron", cron="0 * * * *"), steps=[(0, [0]), (5 * 3600 + 1800, [5 * 3600]), (1800, [6 * 3600])]),
    case("an interval missed while the service was down fires once and keeps its grid",
         spec=dict(frequency_s=60), steps=[(0, [0]), (610, [600]), (50, [660])]),
], ids=case_name)
def test_when_runs_fire(c):
    clock, schedules = FakeClock(T0), Schedules()
    schedules.apply(created(**c.spec))
    for advance, expected in c.steps:
        clock.advance(advance)
        assert fired_offsets(tick(schedules, clock)) == expected, f"at +{(clock.now() - T0).total_seconds()}s"


def test_runs_are_numbered_from_one_and_name_their_ops_after_the_schedule():
    clock, schedules = FakeClock(T0), Schedules()
    schedules.apply(created("nightly", frequency_s=60))
    runs = []
    for _ in range(3):
        runs += [(e.run, e.run_op_id) for e in tick(schedules, clock)]
        clock.advance(60)
    assert runs == [(1, "nightly-1"), (2, "nightly-2"), (3, "nightly-3")]
    assert all(subjects.valid_token(op_id) for _, op_id in runs)


@pytest.mark.parametrize("c", [
    case("maxRuns reached finishes the schedule", spec=dict(frequency_s=60, max_runs=1), after=0, reason="max_runs"),
    case("a datetime schedule that fired is completed", spec=dict(kind="datetime", start_at=T0), after=0,
         reason="completed"),
    case("a next slot beyond endAt finishes it before endAt passes", spec=dict(frequency_s=100, end_at=t(50)),
         after=0, reason="end_at"),
    case("endAt passing finishes it", spec=dict(kind="cron", cron="0 0 * * *", end_at=t(10)), after=20,
         reason="end_at"),
], ids=case_name)
def test_a_schedule_that_can_never_fire_again_is_finished_once(c):
    clock, schedules = FakeClock(T0), Schedules()
    schedules.apply(created("s", **c.spec))
    clock.advance(c.after)
    finished = [e for e in tick(schedules, clock) if isinstance(e, ScheduleFinished)]
    assert [(e.op_id, e.reason) for e in finished] == [("s", c.reason)]
    clock.advance(3600)
    assert tick(schedules, clock) == []


def test_a_deleted_schedule_fires_nothing_more_and_is_not_reported_finished():
    clock, schedules = FakeClock(T0), Schedules()
    schedules.apply(created("s", frequency_s=60))
    tick(schedules, clock)
    assert schedules.apply(ScheduleDeleted(op_id="s", at=T0))
    clock.advance(600)
    assert tick(schedules, clock) == [] and schedules.next_fire(clock.now()) is None


# ---- dependsOnPast -----------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a succeeded previous run lets the next one fire", status="succeeded", fires=True),
    case("a previous run still going holds the next one", status="running", fires=False),
    case("a previous run admission does not know yet holds the next one", status=None, fires=False),
    case("a failed previous run holds the next one", status="failed", fires=False),
], ids=case_name)
def test_depends_on_past_waits_for_the_previous_run_to_succeed(c):
    clock, statuses = FakeClock(T0), {}
    schedules = Schedules(status_of=statuses.get)
    schedules.apply(created("s", frequency_s=60, depends_on_past=True))
    assert fired_offsets(tick(schedules, clock)) == [0], "the first run depends on nothing"
    if c.status is not None:
        statuses["s-1"] = c.status
    clock.advance(60)
    assert fired_offsets(tick(schedules, clock)) == ([60] if c.fires else [])
    assert ("s" in schedules.waiting(clock.now())) is not c.fires


def test_a_held_schedule_fires_once_for_the_latest_slot_when_the_previous_run_succeeds():
    clock, statuses = FakeClock(T0), {}
    schedules = Schedules(status_of=statuses.get)
    schedules.apply(created("s", frequency_s=60, depends_on_past=True))
    tick(schedules, clock)
    statuses["s-1"] = "failed"
    clock.advance(600)
    assert tick(schedules, clock) == [] and schedules.waiting(clock.now()) == {"s": ("s-1", "failed")}
    assert schedules.next_fire(clock.now()) is None, "a held schedule waits for an op, not for a time"
    statuses["s-1"] = "succeeded"  # e.g. `opsched resume s-1`, and it succeeded
    clock.advance(30)
    assert [(e.run, fired_offsets([e])[0]) for e in tick(schedules, clock)] == [(2, 600)]


@pytest.mark.parametrize("status,expected", [
    (Status.SUCCEEDED, "succeeded"), (Status.SKIPPED, "succeeded"), (Status.FAILED, "failed"),
    (Status.TIMED_OUT, "failed"), (Status.STOPPED, "failed"), (Status.REJECTED, "failed"),
    (Status.RUNNING, "running"), (Status.RETRYING, "running"), (Status.PENDING, "running"), (None, None),
])
def test_run_status_maps_admissions_status_for_depends_on_past(status, expected):
    assert run_status(status) == expected


# ---- replay ------------------------------------------------------------------------------------------

def _history(spec: dict, steps: int, step_s: float) -> tuple[Schedules, list, FakeClock]:
    clock, schedules = FakeClock(T0), Schedules()
    events = [created("s", **spec)]
    schedules.apply(events[0])
    for _ in range(steps):
        events += tick(schedules, clock)
        clock.advance(step_s)
    return schedules, events, clock


@pytest.mark.parametrize("spec", [dict(frequency_s=60, max_runs=5), dict(kind="cron", cron="*/5 * * * *")],
                         ids=["interval", "cron"])
def test_replaying_the_events_gives_the_same_decisions(spec):
    live, events, clock = _history(spec, steps=3, step_s=300)
    replayed = Schedules()
    for e in events + events:  # twice: folding is idempotent
        replayed.apply(codec.decode_ops_stream(codec.encode(e)))
    for later in (0, 1, 299, 300, 3600):
        now = clock.now() + timedelta(seconds=later)
        assert replayed.due(now) == live.due(now)
        assert replayed.finished(now) == live.finished(now)
        assert replayed.next_fire(now) == live.next_fire(now)


def test_a_fired_run_already_folded_is_not_fired_again():
    _, events, clock = _history(dict(frequency_s=60), steps=2, step_s=60)
    replayed = Schedules()
    for e in events:
        replayed.apply(e)
    assert [e.run for e in replayed.due(clock.now())] == [3]
    assert not replayed.apply(next(e for e in events if isinstance(e, ScheduleFired)))


def test_next_fire_is_the_earliest_next_slot_of_any_schedule():
    clock, schedules = FakeClock(T0), Schedules()
    assert schedules.next_fire(T0) is None
    schedules.apply(created("a", frequency_s=60))
    schedules.apply(created("b", kind="datetime", start_at=t(30)))
    assert schedules.next_fire(T0) == T0
    tick(schedules, clock)
    assert schedules.next_fire(T0) == t(30)


# ---- command handlers --------------------------------------------------------------------------------

def create_cmd(sid: str = "nightly", **fields) -> CreateSchedule:
    fields.setdefault("kind", "interval")
    if fields["kind"] == "interval":
        fields.setdefault("frequency_s", 60)
    return CreateSchedule(schedule_id=sid, spec=ScheduleSpec(**fields), op=TEMPLATE, requested_by="alice")


def test_creating_a_schedule_records_it_with_times_in_utc():
    naive = datetime(2026, 2, 1, 9, 0)
    plus_two = datetime(2026, 2, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    event = on_create(create_cmd(start_at=naive, end_at=plus_two), T0)
    assert isinstance(event, ScheduleCreated) and event.op_id == "nightly" and event.at == T0
    assert event.spec.start_at == at("2026-02-01 09:00") and event.spec.end_at == at("2026-02-01 10:00")
    assert event.requested_by == "alice" and event.op == TEMPLATE


@pytest.mark.parametrize("c", [
    case("an id that is not a token", cmd=create_cmd("Nightly"), reason="invalid_schedule_id"),
    case("an id too long for its run ids", cmd=create_cmd("a" * 41), reason="invalid_schedule_id"),
    case("a bad cron expression", cmd=create_cmd(kind="cron", cron="61 * * * *"), reason="invalid_schedule",
         message="cron: minute field '61'"),
    case("a cron schedule without an expression", cmd=create_cmd(kind="cron"), reason="invalid_schedule",
         message="empty cron expression"),
    case("an interval schedule without a frequency", cmd=create_cmd(frequency_s=None), reason="invalid_schedule",
         message="frequencyS: an interval schedule needs the seconds between runs"),
    case("a frequency on a cron schedule", cmd=create_cmd(kind="cron", cron="@daily", frequency_s=60),
         reason="invalid_schedule", message="frequencyS: only an interval schedule takes a frequency, not kind cron"),
    case("a cron expression on an interval schedule", cmd=create_cmd(cron="@daily"), reason="invalid_schedule",
         message="cron: only a cron schedule takes a cron expression, not kind interval"),
    case("a datetime schedule without startAt", cmd=create_cmd(kind="datetime"), reason="invalid_schedule",
         message="startAt: a datetime schedule needs"),
    case("endAt before startAt", cmd=create_cmd(start_at=t(10), end_at=t(5)), reason="invalid_schedule",
         message="endAt: "),
], ids=case_name)
def test_an_invalid_schedule_is_refused_with_a_clear_reason(c):
    with pytest.raises(InvalidInput) as err:
        on_create(c.cmd, T0)
    assert err.value.reason == c.reason and c.args.get("message", "") in err.value.message


def test_the_same_create_again_is_a_no_op_and_a_used_id_is_refused():
    schedules = Schedules()
    schedules.apply(on_create(create_cmd(), T0))
    assert on_create(create_cmd(), t(5), schedules) is None
    with pytest.raises(InvalidInput) as err:
        on_create(create_cmd(frequency_s=120), t(5), schedules)
    assert err.value.reason == "schedule_exists" and err.value.op_id == "nightly"


def test_deleting_a_schedule_once_and_an_unknown_one():
    schedules = Schedules()
    schedules.apply(on_create(create_cmd(), T0))
    deleted = on_delete(DeleteSchedule(schedule_id="nightly", requested_by="bob"), t(1), schedules)
    assert isinstance(deleted, ScheduleDeleted) and deleted.requested_by == "bob"
    schedules.apply(deleted)
    assert on_delete(DeleteSchedule(schedule_id="nightly"), t(2), schedules) is None
    with pytest.raises(InvalidInput, match="no such schedule 'other'"):
        on_delete(DeleteSchedule(schedule_id="other"), t(3), schedules)


# ---- the runner ----------------------------------------------------------------------------------------

def sent(bus: MemoryBus) -> list[tuple]:
    """Every publish, in order: (message, Nats-Msg-Id, subject)."""
    return [(codec.decode(p.data), p.msg_id, p.subject) for p in bus.published]


async def test_a_run_is_submitted_before_it_is_recorded_as_fired():
    bus, clock, schedules = memory_bus(), FakeClock(T0), Schedules()
    schedules.apply(created("s", frequency_s=60, max_runs=1))
    await fire_due(bus, clock, schedules, submitter(bus, clock))
    log = sent(bus)
    kinds = [(type(m).__name__, mid, subj) for m, mid, subj in log]
    assert kinds == [("SubmitOperation", "s-1.submit.0", subjects.submit(TEMPLATE.queue)),
                     ("ScheduleFired", "s.fired.1", "ops.schedule_fired.s"),
                     ("ScheduleFinished", "s.schedule_finished.0", "ops.schedule_finished.s")]
    assert log[0][0].spec == TEMPLATE and log[0][0].requested_by == "schedule"


async def until(condition, turns: int = 2000) -> None:
    """Let the event loop run until ``condition()`` (no time passes on any clock)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


async def test_the_runner_fires_as_the_clock_moves_and_retries_after_a_failed_publish():
    bus, clock, schedules, stop = memory_bus(), FakeClock(T0), Schedules(), asyncio.Event()
    schedules.apply(created("s", frequency_s=60))
    task = asyncio.create_task(run_schedules(bus, clock, schedules, submitter(bus, clock), stop))
    fired = lambda: [m.run for m, _, _ in sent(bus) if isinstance(m, ScheduleFired)]
    await until(lambda: fired() == [1])
    clock.advance(30)
    await until(lambda: clock._sleepers)  # asleep again, nothing fired
    assert fired() == [1]
    # run 2 is submitted, its fired event is not stored: retried a step later
    bus.fail_publish(1, subject=subjects.events_of("schedule_fired"))
    clock.advance(30)
    await until(lambda: clock._sleepers and not bus.failing)
    assert fired() == [1]
    clock.advance(1)
    await until(lambda: fired() == [1, 2])
    submits = [m.op_id for m, _, _ in sent(bus) if isinstance(m, SubmitOperation)]
    assert submits == ["s-1", "s-2", "s-2"]  # submitted again under the same op id: still one op
    assert [p.duplicate for p in bus.published if p.subject == subjects.submit(TEMPLATE.queue)] == [False, False, True]
    stop.set()
    await asyncio.wait_for(task, 1)
