"""`opsched watch` / `submit --wait` (``opsched.watching``): the tally of a sweep, one plain line per event with a
progress line as each op ends, one JSON object per event, and the live table's content."""
from __future__ import annotations

import io
import json

from opsched.view import OpsView
from opsched.watching import JSON, LIVE, PLAIN, Tally, follow, mode_for, render
from tests.builders import op, t
from tests.builders.events import admitted, failed, failure_final, running, submitted, succeeded


class FakeClient:
    """``follow_ops`` over a fixed list of events, folded as the client folds them."""

    def __init__(self, events) -> None:
        self.events = events

    async def follow_ops(self, op_ids, timeout=None):
        view = OpsView()
        for event in self.events:
            row = view.fold(event)
            if row is not None and row.op_id in op_ids:
                yield event, row


def sweep_events() -> list:
    spec = op("lr").gpus(1).build()
    out = [submitted(spec, op_id=f"s-{i}", at=t(0)) for i in range(3)]
    out += [admitted(spec, op_id="s-0", at=t(1)), running("s-0", at=t(2), node="gpu-a"),
            admitted(spec, op_id="s-1", at=t(1)), succeeded("s-0", at=t(3)), failed("s-1", at=t(4), reason="Error"),
            failure_final("s-1", at=t(4), message="")]
    return out


async def test_plain_prints_each_event_and_the_progress_as_each_op_ends():
    out = io.StringIO()
    code = await follow(FakeClient(sweep_events()), ["s-0", "s-1", "s-2"], PLAIN, out=out)
    lines = out.getvalue().splitlines()
    assert code == 1  # one failed, one never ended
    assert "12:00:02 s-0 running         -> running node=gpu-a  pod opsched/op-s-0-0" in lines
    progress = [line for line in lines if line.startswith("progress: ")]
    assert progress == ["progress: 1/3 ended: 1 succeeded, 0 failed; 0 running, 2 waiting",
                        "progress: 2/3 ended: 1 succeeded, 1 failed; 0 running, 1 waiting"]


async def test_json_is_one_object_per_event_with_the_row_and_the_tally():
    out = io.StringIO()
    await follow(FakeClient(sweep_events()), ["s-0", "s-1", "s-2"], JSON, out=out)
    objects = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(objects) == len(sweep_events())
    last = objects[-1]
    assert (last["op_id"], last["event"], last["status"]) == ("s-1", "failure_final", "failed")
    assert last["progress"] == {"total": 3, "ended": 2, "succeeded": 1, "failed": 1, "running": 0, "waiting": 1}


async def test_one_op_that_succeeded_exits_0():
    spec = op("one").build()
    events = [submitted(spec, op_id="x"), admitted(spec, op_id="x"), succeeded("x")]
    assert await follow(FakeClient(events), ["x"], PLAIN, out=io.StringIO()) == 0


def test_the_live_table_shows_the_progress_line_and_a_row_per_op():
    from rich.console import Console

    tally, view = Tally(["s-0", "s-1", "s-2"]), OpsView()
    for event in sweep_events():
        row = view.fold(event)
        if row is not None:
            tally.update(row)
    console = Console(file=io.StringIO(), width=120, force_terminal=False)
    console.print(render(tally, "lr-sweep"))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "lr-sweep  2/3 ended: 1 succeeded, 1 failed; 0 running, 1 waiting" in text
    assert [line.split()[:3] for line in text.splitlines() if line.startswith("s-")] == [
        ["s-0", "lr", "succeeded"], ["s-1", "lr", "failed"], ["s-2", "lr", "pending"]]


def test_a_terminal_gets_the_live_table_a_pipe_plain_lines_and_json_when_asked():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True
    assert (mode_for("table", Tty()), mode_for("table", io.StringIO()), mode_for("json", Tty())) == (LIVE, PLAIN, JSON)
