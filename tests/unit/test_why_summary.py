"""`opsched why` of an op that ended and left admission's memory (issue 27): admission knows only that it ended;
the CLI fills in its queue, name, end reason and message and its history from the op's summary (the ops bucket);
the history in words, grouped by attempt (issue 32)."""
from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone

import pytest

from opsched import reading
from opsched.proto.history import HistoryEntry
from opsched.proto.queries import PendingReason, WhyAnswer
from opsched.proto.summaries import OpSummary
from opsched.tables import entry_text
from tests.builders import case, case_name


class GoneOp:
    """A client whose admission no longer holds the op: its status only; its summary holds how it ended."""

    def __init__(self, summary: OpSummary | None) -> None:
        self.summary_of = summary

    async def why(self, op_id: str, timeout: float = 5.0) -> WhyAnswer:
        return WhyAnswer(op_id=op_id, found=True, status="failed")

    async def summary(self, op_id: str) -> OpSummary | None:
        return self.summary_of

    async def close(self) -> None:
        pass


def why(monkeypatch, capsys, client: GoneOp, output: str = "json") -> tuple[int, str]:
    async def connect(args):
        return client
    monkeypatch.setattr(reading, "_connect", connect)
    code = reading.cmd_why(argparse.Namespace(id="gone-1", output=output))
    return code, capsys.readouterr().out


def test_an_op_that_left_memory_is_explained_from_its_summary(monkeypatch, capsys):
    summary = OpSummary(op_id="gone-1", status="failed", queue="gpu-a", reason="Error", message="exit 1")
    code, out = why(monkeypatch, capsys, GoneOp(summary))
    answer = json.loads(out)
    assert code == 0 and answer["queue"] == "gpu-a" and answer["endReason"] == "Error"
    assert answer["endMessage"] == "exit 1"
    code, text = why(monkeypatch, capsys, GoneOp(summary), output="table")
    assert code == 0 and "exit 1" in text and "gpu-a" in text


def test_without_a_summary_it_says_what_admission_knows(monkeypatch, capsys):
    code, out = why(monkeypatch, capsys, GoneOp(None))
    answer = json.loads(out)
    assert code == 0 and answer["status"] == "failed" and answer["endReason"] == ""  # (json prints every field)


# ---- its history (issue 32 §1) ---------------------------------------------------------------------

def _entry(second: int, event: str, attempt: int = 0, **fields) -> HistoryEntry:
    return HistoryEntry(at=datetime(2026, 1, 1, 12, 0, second, tzinfo=timezone.utc), attempt=attempt, event=event,
                        **fields)


HISTORY = [_entry(0, "submitted", queue="gpu-a"), _entry(1, "admitted", queue="gpu-a", flavors={"nvidia.com/gpu": "a100"}),
           _entry(2, "preempted", by="op-9", reason="reclaim", message="queue research reclaims 1 GPU"),
           _entry(3, "admitted", attempt=1, queue="gpu-a"), _entry(4, "failed", attempt=1, node="n2", reason="Error")]


def test_an_op_that_left_memory_shows_its_history_grouped_by_attempt(monkeypatch, capsys):
    summary = OpSummary(op_id="gone-1", status="failed", name="train", queue="gpu-a", reason="Error",
                        history=HISTORY, history_dropped=3)
    code, out = why(monkeypatch, capsys, GoneOp(summary))
    answer = json.loads(out)
    assert code == 0 and answer["name"] == "train" and answer["historyDropped"] == 3
    assert [e["event"] for e in answer["history"]] == ["submitted", "admitted", "preempted", "admitted", "failed"]
    code, text = why(monkeypatch, capsys, GoneOp(summary), output="table")
    lines = text.splitlines()
    assert lines[0] == "gone-1 (train): failed in queue gpu-a (ended: Error)"
    assert lines[1:] == [
        "  history (UTC, from 2026-01-01):",
        "    attempt 0",
        "      12:00:00  submitted to gpu-a",
        "      … 3 entries dropped (the first and the latest are kept)",
        "      12:00:01  admitted to gpu-a (nvidia.com/gpu=a100)",
        "      12:00:02  preempted by op-9 (reclaim): queue research reclaims 1 GPU",
        "    attempt 1",
        "      12:00:03  admitted to gpu-a",
        "      12:00:04  failed on n2 (Error)"]


class ForgottenOp(GoneOp):
    """Admission forgot even its tombstone; its summary is still in the ops bucket."""

    async def why(self, op_id: str, timeout: float = 5.0) -> WhyAnswer:
        return WhyAnswer(op_id=op_id, found=False, reasons=[PendingReason(code="unknown_op", message="unknown")])


def test_an_op_admission_forgot_is_still_explained_from_its_summary(monkeypatch, capsys):
    summary = OpSummary(op_id="gone-1", status="rejected", name="train", queue="nosuch", reason="unknown_queue",
                        message="unknown queue 'nosuch'", history=[_entry(0, "rejected", reason="unknown_queue")])
    code, text = why(monkeypatch, capsys, ForgottenOp(summary), output="table")
    assert code == 0
    assert text.splitlines()[0] == "gone-1 (train): rejected in queue nosuch (ended: unknown_queue: unknown queue 'nosuch')"
    code, _ = why(monkeypatch, capsys, ForgottenOp(None))
    assert code == 1


@pytest.mark.parametrize("c", [
    case("preempted by an op", entry=_entry(0, "preempted", by="op-9", reason="within_queue"),
         text="preempted by op-9 (within_queue)"),
    case("preempted by no op (a queue drained): no 'by'",
         entry=_entry(0, "preempted", reason="queue_drained", message="queue gpu is draining"),
         text="preempted (queue_drained): queue gpu is draining"),
    case("admitted borrowing, on an agent, with its estimate",
         entry=_entry(0, "admitted", queue="q", node="east", reason="borrowing", amount=3.2),
         text="admitted to q est 3.20 via agent east (borrowing)"),
    case("evicted, back after a while", entry=_entry(0, "evicted", reason="pods_not_ready", retry_after_s=30),
         text="evicted (pods_not_ready); back in its queue after 30s"),
    case("charged at a pool's prices", entry=_entry(0, "cost_recorded", amount=1.5, pool="t4"),
         text="charged 1.50 at pool t4's prices"),
    case("a cache hit names its original", entry=_entry(0, "cache_hit", by="op-0"), text="cache hit of op-0"),
    case("an event type this client does not know is named as it is",
         entry=_entry(0, "queue_held", by="admin", reason="maintenance"), text="queue held by admin (maintenance)"),
], ids=case_name)
def test_a_history_entry_in_words(c):
    assert entry_text(c.entry) == c.text
