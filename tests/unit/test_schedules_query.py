"""`opsched schedules` (admission's ``Schedules.statuses``): each schedule's state (active, waiting, finished,
deleted, disabled), its next run, and its last runs (at most ``RECENT_RUNS``, with each run op's status); and the
table the CLI prints of it."""
from __future__ import annotations

from datetime import timedelta

from opsched.proto.schedules import ScheduleDeleted
from opsched.services.admission.schedules import RECENT_RUNS, Schedules
from opsched.tables import schedules_table
from tests.builders import T0
from tests.builders.clock import FakeClock
from tests.unit.test_schedules import created, tick


def state(schedules: Schedules, clock: FakeClock, sid: str = "s"):
    [status] = schedules.statuses(clock.now(), lambda op_id: "succeeded", [sid]).schedules
    return status


def test_an_active_schedule_has_its_next_run_and_its_last_runs_bounded():
    clock = FakeClock(T0)
    schedules = Schedules()
    schedules.apply(created("s", frequency_s=60))
    for _ in range(RECENT_RUNS + 2):
        tick(schedules, clock)
        clock.advance(60)
    clock.advance(-30)
    s = state(schedules, clock)
    assert (s.state, s.name, s.kind, s.frequency_s, s.runs) == ("active", "train", "interval", 60, RECENT_RUNS + 2)
    assert s.next_run_at == T0 + timedelta(seconds=60 * (RECENT_RUNS + 2))
    assert [r.run for r in s.last_runs] == list(range(3, RECENT_RUNS + 3))
    assert s.last_runs[-1].run_op_id == f"s-{RECENT_RUNS + 2}" and s.last_runs[-1].status == "succeeded"
    assert s.last_run_at == s.last_runs[-1].fired_at and s.created_at == T0


def test_a_schedule_held_by_depends_on_past_is_waiting_for_its_last_run():
    clock, statuses = FakeClock(T0), {}
    schedules = Schedules(status_of=statuses.get)
    schedules.apply(created("s", frequency_s=60, depends_on_past=True))
    tick(schedules, clock)
    statuses["s-1"] = "failed"
    clock.advance(120)
    s = state(schedules, clock)
    assert (s.state, s.waiting_for, s.next_run_at) == ("waiting", "s-1", None)
    assert "waits for s-1 to succeed (failed)" in s.message


def test_finished_deleted_and_disabled_schedules():
    clock = FakeClock(T0)
    schedules = Schedules()
    schedules.apply(created("done", frequency_s=60, max_runs=1))
    schedules.apply(created("gone", frequency_s=60))
    schedules.apply(created("bad", kind="cron", cron="61 * * * *"))  # stored before a check refused it
    schedules.refuse_stored("old", "a field the contract refuses")
    tick(schedules, clock)
    schedules.apply(ScheduleDeleted(op_id="gone", at=T0))
    by_id = {s.schedule_id: s for s in schedules.statuses(clock.now(), lambda _: "").schedules}
    assert (by_id["done"].state, by_id["done"].reason, by_id["done"].next_run_at) == ("finished", "max_runs", None)
    assert by_id["done"].message == "1 runs fired (maxRuns 1)"
    assert (by_id["gone"].state, by_id["gone"].next_run_at) == ("deleted", None)
    assert (by_id["bad"].state, by_id["bad"].reason) == ("disabled", "invalid_spec") and "cron" in by_id["bad"].message
    assert (by_id["old"].state, by_id["old"].reason) == ("disabled", "invalid_spec")


def test_a_schedule_past_its_end_is_finished_before_the_runner_says_so():
    clock = FakeClock(T0)
    schedules = Schedules()
    schedules.apply(created("s", frequency_s=60, end_at=T0 + timedelta(seconds=30)))
    clock.advance(3600)
    s = state(schedules, clock)
    assert (s.state, s.reason, s.next_run_at) == ("finished", "end_at", None)


def test_the_table_says_when_each_runs_its_state_and_its_last_runs():
    clock = FakeClock(T0)
    schedules = Schedules()
    schedules.apply(created("nightly", kind="cron", cron="0 3 * * *"))
    schedules.apply(created("hourly", frequency_s=3600, max_runs=5))
    tick(schedules, clock)
    answer = schedules.statuses(clock.now(), lambda _: "succeeded")
    lines = schedules_table(answer, now=clock.now() + timedelta(minutes=2)).splitlines()
    assert lines[0].split() == ["SCHEDULE", "NAME", "KIND", "WHEN", "STATE", "RUNS", "NEXT", "RUN", "LAST", "RUNS"]
    assert "every 1h0m" in lines[1] and "1/5" in lines[1] and "#1 succeeded 2m0s ago" in lines[1]
    assert "0 3 * * *" in lines[2] and "active" in lines[2]
    assert schedules_table(Schedules().statuses(T0, lambda _: "")) == "no schedules"
