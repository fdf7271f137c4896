"""Expected durations learned from the op stream: run times (running -> succeeded) of the same
component, by project and op name (or, unnamed, by image, command and args)."""
from __future__ import annotations

import pytest

from opsched.proto.events import OperationTimedOut
from opsched.services.cost.durations import Durations, component_key
from tests.builders import case, case_name, failed, op, running, submitted, succeeded, t


def ran(durations: Durations, op_id: str, spec, seconds: float, *, start: float = 0.0) -> None:
    for e in (submitted(spec, op_id=op_id, at=t(start)), running(op_id, at=t(start)),
              succeeded(op_id, at=t(start + seconds))):
        durations.fold(e)


def test_succeeded_runs_of_a_component_are_learned_in_order():
    d = Durations()
    for i, seconds in enumerate([300.0, 100.0, 200.0]):
        ran(d, f"op-{i}", op("train").project("vision").build(), seconds)
    assert d.runs_of(op("train").project("vision").gpus(4).build()) == [300.0, 100.0, 200.0]
    assert d.runs_of(op("train").project("nlp").build()) == []
    assert d.runs_of(op("eval").project("vision").build()) == []


@pytest.mark.parametrize("c", [
    case("a failed attempt", end=lambda: failed("x", at=t(50))),
    case("a timed-out attempt", end=lambda: OperationTimedOut(op_id="x", at=t(50))),
], ids=case_name)
def test_only_succeeded_attempts_count(c):
    d = Durations()
    for e in (submitted(op("train").build(), op_id="x"), running("x"), c.end()):
        d.fold(e)
    assert d.runs_of(op("train").build()) == []


def test_a_retried_op_counts_the_run_of_its_succeeding_attempt():
    d = Durations()
    for e in (submitted(op("train").build(), op_id="x"), running("x"), failed("x", at=t(10)),
              running("x", at=t(100), attempt=1), succeeded("x", at=t(160), attempt=1)):
        d.fold(e)
    assert d.runs_of(op("train").build()) == [60.0]


def test_a_cache_hit_that_never_ran_and_a_duplicate_end_do_not_count():
    d = Durations()
    d.fold(submitted(op("train").build(), op_id="hit"))
    d.fold(succeeded("hit", reason="cache_hit"))
    ran(d, "x", op("train").build(), 30.0)
    d.fold(succeeded("x", at=t(99)))
    assert d.runs_of(op("train").build()) == [30.0]


def test_only_the_last_twenty_runs_are_kept():
    d = Durations()
    for i in range(25):
        ran(d, f"op-{i}", op("train").build(), float(i))
    assert d.runs_of(op("train").build()) == [float(i) for i in range(5, 25)]


def test_an_unnamed_op_is_known_by_its_image_command_and_args():
    def unnamed_op(args: str, **fields):  # the contract refuses an empty name; one stored before it may have it
        spec = op("x").image("trainer:1").command("python").args(args).build()
        spec.name = ""
        for key, value in fields.items():
            setattr(spec, key, value)
        return spec
    unnamed, same, other = unnamed_op("train.py"), unnamed_op("train.py", params={"lr": 0.1}), unnamed_op("eval.py")
    assert component_key(unnamed) == component_key(same) != component_key(other)
    assert component_key(unnamed).startswith("default/#")
    assert component_key(op("train").project("vision").build()) == "vision/train"


def test_the_trials_of_a_sweep_are_one_component_by_the_name_they_share():
    def trial(iteration: int):
        spec = op(f"train-{iteration}").project("vision").build()
        spec.iteration = iteration
        return spec
    d = Durations()
    for i, seconds in enumerate([30.0, 10.0, 20.0]):
        ran(d, f"op-{i}", trial(i), seconds)
    assert component_key(trial(7)) == "vision/train"
    assert d.runs_of(trial(3)) == d.runs_of(op("train").project("vision").build()) == [30.0, 10.0, 20.0]
    assert component_key(op("train-7").project("vision").build()) == "vision/train-7"  # not a trial: its own name
