"""`opsched ops --watch`: the ops table, redrawn in place on a terminal as events come (kubectl's ``get -w``).

It folds the op stream from its start (past, then live: ``reads.follow``) into the same ``OpsView`` `opsched ops`
reads once, with the ops that left admission's memory from their summaries, and redraws at most ``REDRAWS_PER_S``
times a second (``rich.live.Live``). It runs until Ctrl-C (exit 0). Tables only: scripts follow events with
`opsched watch -o json`."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime, timezone
from typing import IO, Any

import msgspec

from opsched.proto import subjects
from opsched.proto.summaries import OpSummary
from opsched.view import OpRow, OpsView

REDRAWS_PER_S = 2


async def watch_ops(client: Any, render: Callable[[list[OpRow], datetime, int], str], out: IO[str], *,
                    until: asyncio.Event | None = None, interval: float = 1 / REDRAWS_PER_S) -> int:
    """Redraw ``render(rows, now, width)`` on ``out`` when ops change (at most once per ``interval`` seconds, and
    at least that often: ages move on) until ``until`` is set (or the task is cancelled)."""
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    view = OpsView()
    for data in await client.reads.read_bucket(subjects.OPS_BUCKET):
        view.add_summary(msgspec.json.decode(data, type=OpSummary))
    changed = asyncio.Event()

    async def on_message(data: bytes, seq: int) -> None:
        if view.fold_bytes(data) is not None:
            changed.set()

    console = Console(file=out)
    until = until or asyncio.Event()
    sub = await client.reads.follow(subjects.OPS_STREAM, subjects.VIEW_EVENTS, on_message)
    try:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            loop = asyncio.get_running_loop()
            while not until.is_set():
                drawn_at = loop.time()
                changed.clear()
                text = render(list(view.rows.values()), datetime.now(timezone.utc), console.width)
                live.update(Text(text), refresh=True)
                waiters = [asyncio.ensure_future(until.wait()), asyncio.ensure_future(changed.wait())]
                await asyncio.wait(waiters, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
                for w in waiters:
                    w.cancel()
                left = interval - (loop.time() - drawn_at)  # a change came sooner: not more often than this
                if left > 0 and not until.is_set():
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(until.wait(), left)
    finally:
        await sub.unsubscribe()
    return 0
