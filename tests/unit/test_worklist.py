"""The cycle's work lists: arrival order, each op once, taken from either end, dropped when it leaves."""
import pytest

from opsched.services.admission.state.worklist import WorkList


def test_taken_in_arrival_order_from_the_front_or_the_back_each_op_once():
    work = WorkList()
    for op_id in ("a", "b", "a", "c"):
        work.append(op_id)
    assert list(work) == ["a", "b", "c"] and len(work) == 3
    assert work.pop(0) == "a" and work.pop() == "c"
    assert "b" in work and "a" not in work


def test_an_op_that_left_memory_is_dropped_and_only_the_ends_can_be_taken():
    work = WorkList()
    work.append("a")
    work.discard("a")
    work.discard("never-there")
    assert not work
    work.append("b")
    with pytest.raises(ValueError):
        work.pop(1)
