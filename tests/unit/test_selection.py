"""`opsched ops` filters (``opsched.selection.OpFilter``): each flag, AND across flags, OR within a repeated one,
labels as tags (``k=v``/``k:v``, ``k!=v``, a bare tag), status groups, an unknown status refused."""
from __future__ import annotations

from datetime import timedelta

import pytest

from opsched import cli
from opsched.proto.outputs import OpItem
from opsched.selection import GROUPS, OpFilter, SelectionError, span
from tests.builders import T0

A = OpItem(op_id="a", queue="gpu", status="running", user="alice", project="vision", batch="b-1",
           tags=["nightly", "team=cv"], created_at=T0)
B = OpItem(op_id="b", queue="cpu", status="succeeded", user="bob", project="nlp", tags=["team:nlp"],
           created_at=T0 - timedelta(hours=3))
C = OpItem(op_id="c", queue="gpu", status="queued", user="bob", project="vision", created_at=None)


def selected(*argv: str) -> list[str]:
    args = cli.parser().parse_args(["ops", *argv])
    f = OpFilter.from_args(args, now=T0 + timedelta(minutes=1))
    return [i.op_id for i in (A, B, C) if f.matches(i)]


@pytest.mark.parametrize("argv, ids", [
    ((), ["a", "b", "c"]),
    (("-q", "gpu"), ["a", "c"]),
    (("-q", "gpu", "-q", "cpu"), ["a", "b", "c"]),  # OR within a flag
    (("-q", "gpu", "-u", "bob"), ["c"]),  # AND across flags
    (("--status", "running"), ["a"]),
    (("-s", "RUNNING", "-s", "queued"), ["a", "c"]),
    (("-s", "active"), ["a", "c"]),
    (("-s", "ended"), ["b"]),
    (("-s", "all"), ["a", "b", "c"]),
    (("-p", "vision"), ["a", "c"]),
    (("-b", "b-1"), ["a"]),
    (("-l", "nightly"), ["a"]),
    (("-l", "team=cv"), ["a"]),
    (("-l", "team=nlp"), ["b"]),  # a tag written team:nlp
    (("-l", "team!=cv"), ["b", "c"]),
    (("-l", "team!=cv", "-l", "team!=nlp"), ["c"]),  # every label must hold
    (("--since", "1h"), ["a"]),  # c has no submit time: not within any span
], ids=repr)
def test_filters(argv, ids):
    assert selected(*argv) == ids


def test_an_unknown_status_is_refused_naming_the_known_ones():
    with pytest.raises(SelectionError, match="unknown status 'runing'; known: active, all, ended, .*running"):
        selected("-s", "runing")


@pytest.mark.parametrize("text", ["2", "h", "2hours", "-1h", ""])
def test_a_span_that_cannot_be_read_is_refused(text):
    with pytest.raises(SelectionError, match="a span like 90s"):
        span(text)


def test_spans_add_up():
    assert span("1h30m") == timedelta(minutes=90) and span("1w") == timedelta(days=7) and span("90s").seconds == 90


def test_every_status_opsched_ops_shows_is_in_the_groups():
    assert {"pending", "on_hold", "queued", "running", "stopping", "attempt_failed", "preempted"} <= GROUPS["active"]
    assert GROUPS["active"] | GROUPS["ended"] == GROUPS["all"] and not GROUPS["active"] & GROUPS["ended"]


def test_a_bad_status_exits_2_before_connecting(capsys):
    assert cli.main(["--nats", "nats://127.0.0.1:1", "ops", "-s", "nope"]) == 2
    assert "unknown status 'nope'" in capsys.readouterr().err
