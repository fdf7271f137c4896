"""The lifecycle once (proto.lifecycle): what the fold folds and what the client's view shows agree, and
no module outside proto/ spells the statuses out again."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from opsched.proto.events import (
    DispatchDelayed,
    Event,
    FailureFinal,
    OperationAdmitted,
    OperationFailed,
    RetryScheduled,
)
from opsched.proto.lifecycle import ATTEMPT_ENDS, OP_ENDS, SHOWN, STATUS_OF, TERMINAL_LABELS, Status, allowed

ROOT = Path(__file__).resolve().parents[2]
LABELS = {s.label for s in Status} | {"stopping", "preempting", "preempted", "evicted", "attempt_failed"}


S = Status


@pytest.mark.parametrize("before, after, ok", [
    (S.PENDING, S.ON_HOLD, True), (S.ON_HOLD, S.QUEUED, True), (S.QUEUED, S.ADMITTED, True),
    (S.RUNNING, S.SUCCEEDED, True), (S.RUNNING, S.RETRYING, True), (S.PENDING, S.REJECTED, True),
    (S.RUNNING, S.QUEUED, True), (S.RETRYING, S.QUEUED, True), (S.STOPPED, S.QUEUED, True),
    (S.TIMED_OUT, S.QUEUED, True), (S.RUNNING, S.ADMITTED, False), (S.SUCCEEDED, S.RUNNING, False),
    (S.SUCCEEDED, S.QUEUED, False), (S.REJECTED, S.QUEUED, False), (S.FAILED, S.STOPPED, False),
    (S.QUEUED, S.PENDING, False), (S.ADMITTED, S.ADMITTED, False),
], ids=lambda v: v.label if isinstance(v, Status) else str(v))
def test_the_status_machine(before, after, ok):
    """Forward within an attempt, never out of an end; an attempt taken away, a retry or a resumed end
    queues the next attempt."""
    assert allowed(before, after) is ok


def test_the_view_shows_each_lifecycle_event_as_the_status_the_fold_moves_an_op_to():
    for event, status in STATUS_OF.items():
        if event is not OperationFailed:  # admission's to decide: shown as such until it says (below)
            assert SHOWN[event] == (status.label, status), event.__name__


def test_a_failed_attempt_is_no_end_until_admission_decides_on_it():
    """``failed`` ends an attempt, not the op: the view waits for admission's ``retry_scheduled`` or ``failure_final``
    (the op's end), each ranking above it."""
    assert OperationFailed in ATTEMPT_ENDS and OperationFailed not in OP_ENDS and FailureFinal in OP_ENDS
    assert SHOWN[OperationFailed].label not in TERMINAL_LABELS
    assert SHOWN[OperationFailed].rank < SHOWN[RetryScheduled].rank < SHOWN[FailureFinal].rank
    assert SHOWN[FailureFinal] == ("failed", Status.FAILED) and STATUS_OF[FailureFinal] == Status.FAILED


def test_what_ends_an_op_shows_as_an_end_and_every_end_of_an_attempt_is_shown():
    assert {SHOWN[e].label for e in OP_ENDS} <= set(TERMINAL_LABELS)
    assert all(e in SHOWN for e in ATTEMPT_ENDS)


def test_a_request_to_stop_or_preempt_ranks_between_running_and_the_end_of_the_attempt():
    ranks = {label: rank for label, rank in SHOWN.values()}
    assert ranks["running"] < ranks["stopping"] == ranks["preempting"] < ranks["preempted"] < ranks["succeeded"]


def test_a_dispatch_waiting_for_the_kubernetes_api_shows_as_still_admitted():
    assert SHOWN[DispatchDelayed] == SHOWN[OperationAdmitted] == ("admitted", Status.ADMITTED)


def test_every_event_that_concerns_an_ops_status_is_shown():
    assert set(SHOWN) >= set(STATUS_OF) and all(issubclass(e, Event) for e in SHOWN)


def _literals_of_statuses(path: Path) -> list[str]:
    hits, tree = [], ast.parse(path.read_text())
    unpacked = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Tuple)}
    for node in ast.walk(tree):  # a table of statuses; not ``A, B, C = "a", "b", "c"`` (names for words)
        if isinstance(node, (ast.Dict, ast.Tuple, ast.List, ast.Set)) and id(node) not in unpacked:
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            words = {k.value for k in items if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if len(words & LABELS) >= 3:
                hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(words & LABELS)}")
    return hits


@pytest.mark.parametrize("package", ["opsched", "services", "rules", "bus"])
def test_no_module_outside_proto_spells_the_statuses_out_again(package):
    hits = [hit for path in sorted((ROOT / package).rglob("*.py")) for hit in _literals_of_statuses(path)]
    assert not hits, "read them from proto.lifecycle:\n" + "\n".join(hits)
