"""Budgets over calendar windows in admission: cost_recorded folds into the window's spend, and an
op waits (budget_exhausted, not resolvable by preemption) when spend + running + its estimate exceeds."""
from __future__ import annotations

from datetime import timedelta

import msgspec
import pytest

from opsched.proto.events import CostEstimated, CostRecorded, Money
from opsched.proto.queues import Budget
from opsched.services.admission.cycle import decide
from opsched.services.admission.policies import budgets, preemption
from opsched.services.admission.policies.admit import ADMIT, WAIT, evaluate
from opsched.services.admission.state.admission_state import snapshot_of
from tests.builders import (
    T0,
    admitted,
    book,
    cache_missed,
    case,
    case_name,
    fold,
    op,
    queue,
    running,
    submitted,
    succeeded,
    t,
)


def recorded(op_id: str, amount: float, *, at=T0, queue_name: str = "a", project: str = "vision",
             gpu_hours: float = 0.0, attempt: int = 0) -> CostRecorded:
    return CostRecorded(op_id=op_id, at=at, attempt=attempt, amount=amount, seconds=3600.0, queue=queue_name,
                        project=project, gpu_hours=gpu_hours)


def with_budgets(*items: Budget):
    b = book(queue("a"), queue("b"))
    b.config = msgspec.structs.replace(b.config, budgets=list(items))
    return b


def waiting(op_id: str = "new", *, amount: float = 3.0, gpus: int = 1, duration_s: float = 3600.0,
            queue_name: str = "a", project: str = "vision") -> list:
    spec = op(op_id).gpus(gpus).queue(queue_name).project(project).build()
    return [submitted(spec, op_id=op_id), CostEstimated(op_id=op_id, at=T0, estimate=Money(amount=amount),
                                                        basis="timeout", duration_s=duration_s),
            cache_missed(op_id)]


@pytest.mark.parametrize("c", [
    case("within a daily money budget the op is admitted", budget=Budget(scope="queue", name="a", window="day",
         money=10.0), spent=[recorded("x", 6.0)], outcome=ADMIT),
    case("spend plus the estimate over the daily money budget waits", budget=Budget(scope="queue", name="a",
         window="day", money=8.0), spent=[recorded("x", 6.0)], outcome=WAIT),
    case("exactly reaching the limit is allowed", budget=Budget(scope="queue", name="a", window="day", money=9.0),
         spent=[recorded("x", 6.0)], outcome=ADMIT),
    case("yesterday's spend does not count against today", budget=Budget(scope="queue", name="a", window="day",
         money=8.0), spent=[recorded("x", 6.0, at=T0 - timedelta(days=1))], outcome=ADMIT),
    case("yesterday's spend counts against this week", budget=Budget(scope="queue", name="a", window="week",
         money=8.0), spent=[recorded("x", 6.0, at=T0 - timedelta(days=1))], outcome=WAIT),
    case("a project budget counts the project's spend in every queue", budget=Budget(scope="project",
         name="vision", window="month", money=8.0), spent=[recorded("x", 6.0, queue_name="b")], outcome=WAIT),
    case("another queue's budget does not apply", budget=Budget(scope="queue", name="b", window="day", money=1.0),
         spent=[recorded("x", 6.0)], outcome=ADMIT),
    case("a redelivered record counts once", budget=Budget(scope="queue", name="a", window="day", money=10.0),
         spent=[recorded("x", 4.0), recorded("x", 4.0)], outcome=ADMIT),
    case("GPU-hours: its GPUs x expected hours over the limit waits", budget=Budget(scope="queue", name="a",
         window="day", gpu_hours=4.0), spent=[recorded("x", 0.0, gpu_hours=3.0)], outcome=WAIT),
    case("GPU-hours within the limit is admitted", budget=Budget(scope="queue", name="a", window="day",
         gpu_hours=4.0), spent=[recorded("x", 0.0, gpu_hours=3.0)], outcome=ADMIT, duration_s=1800.0),
], ids=case_name)
def test_budget_verdicts(c):
    gpus = 2 if c.budget.gpu_hours else 1
    state = fold(*c.spent, waiting(gpus=gpus, duration_s=c.args.get("duration_s", 3600.0)))
    verdict = evaluate(state.ops["new"], snapshot_of(state, with_budgets(c.budget), t(60)))
    assert verdict.outcome == c.outcome
    if c.outcome == WAIT:
        assert [r.code for r in verdict.reasons] == [budgets.CODE]


def test_the_reason_names_the_budget_the_spend_the_limit_and_the_reset():
    state = fold(recorded("x", 6.0), waiting())
    verdict = evaluate(state.ops["new"], snapshot_of(state, with_budgets(
        Budget(scope="queue", name="a", window="day", money=8.0)), t(60)))
    message = verdict.reasons[0].message
    assert message.startswith("queue a daily budget exhausted")
    assert "6.00 spent" in message and "3.00 estimated" in message and "8.00 limit" in message
    assert "2026-01-02T00:00:00+00:00" in message


def test_running_ops_count_their_estimate_until_their_cost_is_recorded():
    spec = op("first").gpus(1).queue("a").project("vision").build()
    state = fold(waiting("first", amount=3.0), admitted(spec, op_id="first"), waiting("second", amount=3.0))
    b = with_budgets(Budget(scope="queue", name="a", window="day", money=5.0))
    assert evaluate(state.ops["second"], snapshot_of(state, b, t(60))).outcome == WAIT


def test_an_ended_op_holds_its_estimate_until_its_charge_is_folded_then_what_it_cost():
    """Between an attempt's end and its cost_recorded no cycle may admit past the budget."""
    spec = op("first").gpus(1).queue("a").project("vision").build()
    ran = [waiting("first", amount=3.0), admitted(spec, op_id="first"), running("first", at=t(10)),
           succeeded("first", at=t(20))]
    b = with_budgets(Budget(scope="queue", name="a", window="day", money=5.0))
    state = fold(*ran, waiting("second", amount=3.0))
    verdict = evaluate(state.ops["second"], snapshot_of(state, b, t(60)))
    assert verdict.outcome == WAIT and "3.00 expected of running ops (and of ended ones" in verdict.reasons[0].message
    state = fold(*ran, recorded("first", 1.0, at=t(21)), waiting("second", amount=3.0))
    assert evaluate(state.ops["second"], snapshot_of(state, b, t(60))).outcome == ADMIT  # 1 spent + 3 <= 5
    state = fold(*ran, recorded("first", 2.5, at=t(21)), waiting("second", amount=3.0))
    assert evaluate(state.ops["second"], snapshot_of(state, b, t(60))).outcome == WAIT  # 2.5 spent + 3 > 5


def test_an_op_that_never_ran_holds_nothing_after_its_end_and_a_forgotten_one_lets_its_charge_go():
    spec = op("first").gpus(1).queue("a").project("vision").build()
    b = with_budgets(Budget(scope="queue", name="a", window="day", money=5.0))
    never_ran = fold(waiting("first", amount=3.0), admitted(spec, op_id="first"),
                     succeeded("first", at=t(20)), waiting("second", amount=3.0))
    assert evaluate(never_ran.ops["second"], snapshot_of(never_ran, b, t(60))).outcome == ADMIT
    state = fold(waiting("first", amount=3.0), admitted(spec, op_id="first"), running("first", at=t(10)),
                 succeeded("first", at=t(20)), waiting("second", amount=3.0))
    assert state.fold.forget("first") is not None
    assert evaluate(state.ops["second"], snapshot_of(state, b, t(60))).outcome == ADMIT


def test_a_cycle_admits_the_first_op_and_holds_the_second_then_wakes_at_the_reset():
    b = with_budgets(Budget(scope="queue", name="a", window="day", money=5.0))
    state = fold(waiting("first", amount=3.0), waiting("second", amount=3.0))
    decisions = decide(state, b, t(60), "ml")
    assert [d.op_id for d in decisions] == ["first"]
    assert [r.code for r in state.ops["second"].blocked] == [budgets.CODE]
    assert t(12 * 3600) in state.queues.timers  # midnight UTC after T0 (12:00)


def test_budget_exhausted_is_not_resolvable_by_preemption():
    assert budgets.CODE not in preemption.RESOLVABLE
