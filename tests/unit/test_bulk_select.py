"""Which ops a bulk stop, approve or reject acts on (``opsched.bulk_select``), and how its verdicts are told
(``opsched.verdicts.bulk_lines``, ``bulk_list``, ``bulk_exit_code``)."""
from __future__ import annotations

import pytest

from opsched.bulk_select import SelectionError, select
from opsched.output import full
from opsched.verdicts import Verdict, bulk_exit_code, bulk_lines, bulk_list
from opsched.view import OpRow, OpsView


def view(*rows: OpRow) -> OpsView:
    v = OpsView()
    v.rows = {r.op_id: r for r in rows}
    return v


SWEEP = view(OpRow("t-0", status="on_hold", batch="b1", queue="gpu"),
             OpRow("t-1", status="pending", batch="b1", queue="gpu", history=["submitted", "approved"]),
             OpRow("t-2", status="pending", batch="b1", queue="cpu"),
             OpRow("t-3", status="running", batch="b1", queue="gpu"),
             OpRow("t-4", status="succeeded", batch="b1", queue="gpu"),
             OpRow("x", status="on_hold", batch="b2", queue="gpu"))


@pytest.mark.parametrize(("verb", "flags", "chosen"), [
    ("approve", dict(batch="b1"), ["t-0", "t-2"]),  # waiting and not yet approved
    ("reject", dict(batch="b1"), ["t-0"]),  # on hold
    ("stop", dict(batch="b1"), ["t-0", "t-1", "t-2", "t-3"]),  # not ended
    ("approve", dict(queue="gpu", all_=True), ["t-0", "x"]),
    ("approve", dict(batch="b1", queue="gpu", all_=True), ["t-0"]),  # both: the ops in both
    ("stop", dict(ids=["t-4", "nope"], batch="b2"), ["t-4", "nope", "x"]),  # typed ids pass as typed
])
def test_a_selection_picks_the_ops_the_verb_can_act_on_now(verb, flags, chosen):
    assert select(SWEEP, verb, **flags) == chosen


@pytest.mark.parametrize(("flags", "said"), [
    (dict(queue="gpu"), "add --all"),
    (dict(all_=True), "--all needs --queue"),
    ({}, "which ops?"),
    (dict(batch="nope"), "no op of batch 'nope'"),
])
def test_flags_that_do_not_say_which_ops_are_refused(flags, said):
    with pytest.raises(SelectionError, match=said):
        select(SWEEP, "approve", **flags)


DONE = Verdict("approve", "a", "approved", "a: approved by ann")
IDLE = Verdict("approve", "b", "already_approved", "nothing to do: b is already approved", nothing_to_do=True)
UNKNOWN = Verdict("approve", "c", "unknown_op", "cannot approve 'c': no such operation", refused=True)
ENDED = Verdict("approve", "d", "already_ended", "cannot approve d: it already succeeded", refused=True)


def test_a_line_per_op_then_the_summary():
    lines = bulk_lines("approve", {"a": DONE, "b": IDLE, "c": UNKNOWN, "e": None}, 10)
    assert lines == ["a: approved by ann", "b: nothing to do: b is already approved",
                     "c: refused (unknown_op): cannot approve 'c': no such operation",
                     "e: no verdict within 10s (it may or may not have taken effect)",
                     "approved 1, nothing to do 1, refused 1, no verdict 1"]


@pytest.mark.parametrize(("verdicts", "code"), [
    ({"a": DONE, "b": IDLE}, 0),
    ({"a": DONE, "d": ENDED}, 1),
    ({"d": ENDED, "c": UNKNOWN}, 2),
    ({"c": UNKNOWN, "e": None}, 4),
])
def test_the_exit_code_is_the_worst_verdicts(verdicts, code):
    assert bulk_exit_code(verdicts) == code


def test_json_is_a_list_of_verdicts_one_per_op():
    assert full(bulk_list("approve", {"a": DONE, "e": None})) == {"type": "verdict_list", "items": [
        {"opId": "a", "verb": "approve", "outcome": "approved", "message": "a: approved by ann", "refused": False,
         "nothingToDo": False, "answered": True},
        {"opId": "e", "verb": "approve", "outcome": "no_verdict", "message": "", "refused": False,
         "nothingToDo": False, "answered": False}]}
