"""`opsched ops --watch`: the table redrawn from the op stream (past, then live) and the ops bucket's summaries,
until told to stop; refused without a terminal and with -o json (exit 2)."""
from __future__ import annotations

import asyncio
import io
import types

import msgspec

from opsched import cli
from opsched.opswatch import watch_ops
from opsched.proto import subjects
from opsched.proto.summaries import OpSummary
from opsched.view import table
from tests.builders import T0, op, running, submitted
from tests.builders.bus import memory_bus


async def test_the_table_is_redrawn_as_events_come_until_stopped():
    bus = memory_bus()
    await bus.publish(submitted(op("first").build(), op_id="a"))
    kv = await bus.ensure_cache_bucket(subjects.OPS_BUCKET)
    await kv.put("old", msgspec.json.encode(OpSummary(op_id="old", status="succeeded", name="gone")))
    drawn: list[str] = []
    until, first_drawn = asyncio.Event(), asyncio.Event()

    def render(rows, now, width):
        text = table(rows, now=now, width=width)
        drawn.append(text)
        if "first" in text:  # the stream's past is folded
            first_drawn.set()
        if any(r.op_id == "b" and r.status == "running" for r in rows):
            until.set()
        return text

    client = types.SimpleNamespace(reads=bus)
    task = asyncio.create_task(watch_ops(client, render, io.StringIO(), until=until, interval=0.01))
    await asyncio.wait_for(first_drawn.wait(), 5)
    assert "gone" in drawn[-1] and "pending" in drawn[-1]
    await bus.publish(submitted(op("second").build(), op_id="b"))
    await bus.publish(running("b", at=T0, node="gpu-1"))
    assert await asyncio.wait_for(task, 5) == 0
    assert "second" in drawn[-1] and "gpu-1" in drawn[-1]


def test_watch_needs_a_terminal_and_draws_tables_only(capsys):
    assert cli.main(["--nats", "nats://127.0.0.1:1", "ops", "--watch"]) == 2
    assert "--watch needs a terminal" in capsys.readouterr().err
    assert cli.main(["--nats", "nats://127.0.0.1:1", "ops", "--watch", "-o", "json"]) == 2
    assert "opsched watch ID... -o json" in capsys.readouterr().err
