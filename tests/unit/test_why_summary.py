"""`opsched why` of an op that ended and left admission's memory (issue 27): admission knows only that it ended;
the CLI fills in its queue, end reason and message from the op's summary (the ops bucket)."""
from __future__ import annotations

import argparse
import json

from opsched import reading
from opsched.proto.queries import WhyAnswer
from opsched.proto.summaries import OpSummary


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
