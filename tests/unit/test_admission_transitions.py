"""The fold announces every transition through one interface, in the order it happens, and only the
queue manager keeps generations: nobody else calls an invalidation inline."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from opsched.proto.lifecycle import Status
from opsched.services.admission.state.fold import OpFold
from opsched.services.admission.state.transitions import Transitions
from tests.builders import admitted, gates_cleared, node, op, running, submitted
from tests.builders.clock import T0
from tests.builders.preemption import evicted, preempt_requested, preempted

ROOT = Path(__file__).resolve().parents[2]


class Recorder(Transitions):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __getattribute__(self, name: str):
        if name in vars(Transitions) and not name.startswith("_"):
            def record(first=None, *rest) -> None:
                who = getattr(first, "op_id", None) or getattr(first, "queue", None) or ""
                self.seen.append((name, who))
            return record
        return super().__getattribute__(name)


def folded(*events) -> tuple[OpFold, Recorder]:
    recorder = Recorder()
    fold = OpFold([recorder])
    for event in events:
        if isinstance(event, list):
            for e in event:
                fold.apply(e)
        elif hasattr(event, "node") and not hasattr(event, "op_id"):
            fold.observe(event)
        else:
            fold.apply(event)
    return fold, recorder


def started(*names: str) -> tuple[OpFold, Recorder]:
    """Ops submitted with both gates cleared and queued; the first one admitted."""
    subs = {n: submitted(op(n).gpus(1).build(), op_id=n) for n in names}
    fold, rec = folded(*[[subs[n], *gates_cleared(n)] for n in names])
    for n in names:
        fold.enqueue_cleared(fold.ops[n], T0)
    fold.apply(admitted(subs[names[0]]))
    return fold, rec


def test_an_op_submitted_cleared_admitted_and_running_announces_each_step_once():
    fold, rec = started("a")
    fold.apply(running("a", node="n1"))
    fold.apply(running("a", node="n1"))  # redelivered: nothing new
    assert rec.seen == [("entered", "a"), ("gates_cleared", "a"), ("queued", "a"), ("left", "a"),
                        ("activated", "a"), ("located", "a")]


def test_an_evicted_attempt_frees_its_quota_backs_off_and_waits_again():
    fold, rec = started("a")
    rec.seen.clear()
    fold.apply(evicted("a", retry_after_s=30))
    assert rec.seen == [("deactivated", "a"), ("backing_off", "a"), ("entered", "a"), ("queued", "a")]
    assert fold.ops["a"].status == Status.QUEUED and fold.ops["a"].attempt == 1


def test_a_preempted_victim_leaves_room_held_for_its_preemptor_until_it_is_admitted():
    fold, rec = started("lo", "hi")
    rec.seen.clear()
    fold.apply(preempt_requested("lo", preemptor="hi"))
    fold.apply(preempted("lo", preemptor="hi"))
    queue = fold.ops["lo"].queue
    assert rec.seen == [("held", queue), ("deactivated", "lo"), ("entered", "lo"), ("queued", "lo")]
    assert len(fold.ghosts["hi"]) == 1
    rec.seen.clear()
    fold.apply(admitted(submitted(op("hi").gpus(1).build(), op_id="hi")))
    assert rec.seen == [("left", "hi"), ("held", queue), ("activated", "hi")]
    assert fold.ghosts == {} and fold.nominated == {}


def test_a_node_change_is_announced_only_when_the_node_changed():
    fold, rec = folded(node("n1", gpus=2), node("n1", gpus=2))
    assert rec.seen == [("nodes_changed", "")]


@pytest.mark.parametrize("call", ["bump", "invalidate"])
def test_only_the_queue_manager_moves_generations(call):
    hits = []
    for path in sorted((ROOT / "services" / "admission").rglob("*.py")):
        if path.name == "queue_manager.py":
            continue
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == call:
                hits.append(f"{path.relative_to(ROOT)}:{n.lineno}")
    assert not hits, f"{call}() outside the queue manager: the fold announces, followers act: {hits}"
