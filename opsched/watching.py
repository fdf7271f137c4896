"""`opsched watch` and `submit --wait`: one op or a sweep, followed live until every op has ended.

Three ways to show it, picked by where the output goes (``mode_for``):

- ``live`` (stdout is a terminal): a table redrawn in place (``rich``), one row per op with its status, attempt,
  node and reason, under a progress bar and the sweep's tally (n/total ended, running, failed, waiting);
- ``plain`` (a pipe, a file, a CI log): one line per event, and for several ops a tally line each time one ends;
- ``json`` (``--output json``): one JSON object per event (or per op known only from its summary), for scripts.

The exit code is 0 when every op succeeded, else 1."""
from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

import msgspec

from opsched.proto import codec
from opsched.proto.events import Event
from opsched.proto.lifecycle import ATTEMPT_FAILED_SHOWN, Status
from opsched.view import OpRow

LIVE, PLAIN, JSON = "live", "plain", "json"
SUCCEEDED, RUNNING = Status.SUCCEEDED.label, Status.RUNNING.label


def mode_for(output: str | None, stream: IO[str]) -> str:
    if output == "json":
        return JSON
    return LIVE if stream.isatty() else PLAIN


@dataclass(frozen=True)
class Counts:
    total: int
    succeeded: int
    failed: int  # ended any other way: failed, stopped, rejected, timed out, skipped ...
    running: int
    waiting: int

    @property
    def ended(self) -> int:
        return self.succeeded + self.failed

    def line(self) -> str:
        return (f"{self.ended}/{self.total} ended: {self.succeeded} succeeded, {self.failed} failed; "
                f"{self.running} running, {self.waiting} waiting")


class Tally:
    """The latest row of each op followed, in the order given."""

    def __init__(self, op_ids: Sequence[str]) -> None:
        self.rows: dict[str, OpRow] = {op_id: OpRow(op_id) for op_id in op_ids}

    def update(self, row: OpRow) -> None:
        self.rows[row.op_id] = row

    def counts(self) -> Counts:
        rows = list(self.rows.values())
        succeeded = sum(1 for r in rows if r.status == SUCCEEDED)
        failed = sum(1 for r in rows if r.terminal) - succeeded
        running = sum(1 for r in rows if r.status == RUNNING)
        return Counts(len(rows), succeeded, failed, running, len(rows) - succeeded - failed - running)

    def exit_code(self) -> int:
        return 0 if all(r.status == SUCCEEDED for r in self.rows.values()) else 1


class Plain:
    """One line per event; with several ops, the tally each time one ends."""

    def __init__(self, out: IO[str], many: bool) -> None:
        self.out, self.many = out, many

    def shown(self, event: Event | None, row: OpRow, tally: Tally) -> None:
        if event is None:
            print(f"{row.op_id} {row.status}{'  ' + row.reason if row.reason else ''} (its events have expired)",
                  file=self.out, flush=True)
        else:
            detail = f" node={row.node}" if row.node else ""
            print(f"{event.at:%H:%M:%S} {row.op_id} {codec.type_of(event):<15} -> {row.status}{detail}"
                  f"{'  ' + row.reason if row.reason else ''}", file=self.out, flush=True)
        if self.many and row.terminal:
            print(f"progress: {tally.counts().line()}", file=self.out, flush=True)

    def close(self, tally: Tally) -> None:
        pass


class Json:
    """One JSON object a line: the event (``null``: known from its summary), the op's row after it, the tally."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def shown(self, event: Event | None, row: OpRow, tally: Tally) -> None:
        c = tally.counts()
        line = {"op_id": row.op_id, "event": codec.type_of(event) if event is not None else None,
                "at": event.at if event is not None else None, "status": row.status, "attempt": row.attempt,
                "node": row.node or None, "reason": row.reason,
                "progress": {**dataclasses.asdict(c), "ended": c.ended}}
        print(msgspec.json.encode(line).decode(), file=self.out, flush=True)

    def close(self, tally: Tally) -> None:
        pass


class Live:
    """A table redrawn in place (``rich.live``) under a progress bar and the tally."""

    def __init__(self, out: IO[str], title: str) -> None:
        from rich.console import Console
        from rich.live import Live as RichLive

        self.title = title
        self.console = Console(file=out)
        self.live = RichLive(console=self.console, refresh_per_second=8, transient=False)
        self.live.start()

    def shown(self, event: Event | None, row: OpRow, tally: Tally) -> None:
        self.live.update(render(tally, self.title))

    def close(self, tally: Tally) -> None:
        self.live.update(render(tally, self.title), refresh=True)
        self.live.stop()


def render(tally: Tally, title: str) -> Any:
    """The tally's progress bar and line over a table of its ops."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    c = tally.counts()
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("ID", "NAME", "STATUS", "ATTEMPT", "NODE", "REASON"):
        table.add_column(column, overflow="fold" if column == "REASON" else "ellipsis")
    for r in tally.rows.values():
        table.add_row(r.op_id, r.name or "?", Text(r.status, style=STYLES.get(r.status, "")), str(r.attempt), r.node or "-",
                      r.reason[:80])
    bar = ProgressBar(total=max(c.total, 1), completed=c.ended, width=40)
    return Group(Text(f"{title}  {c.line()}", style="bold"), bar, table)


STYLES = {Status.SUCCEEDED.label: "green", Status.FAILED.label: "red", Status.TIMED_OUT.label: "red",
          Status.REJECTED.label: "red", Status.STOPPED.label: "yellow", Status.RUNNING.label: "cyan",
          Status.RETRYING.label: "yellow", Status.ON_HOLD.label: "magenta", ATTEMPT_FAILED_SHOWN.label: "yellow"}


async def follow(client: Any, op_ids: Sequence[str], mode: str, *, title: str = "",
                 timeout: float | None = None, out: IO[str] | None = None) -> int:
    """Follow ``op_ids`` to their ends, shown as ``mode`` says; 0 when all succeeded, else 1.
    A quiet spell over ``timeout`` raises ``asyncio.TimeoutError`` (the display is closed first)."""
    out = out or sys.stdout
    tally = Tally(op_ids)
    many = len(op_ids) > 1
    shower: Plain | Json | Live
    if mode == LIVE:
        shower = Live(out, title or (op_ids[0] if not many else f"{len(op_ids)} ops"))
    else:
        shower = Json(out) if mode == JSON else Plain(out, many)
    try:
        async for event, row in client.follow_ops(op_ids, timeout=timeout):
            tally.update(row)
            shower.shown(event, row, tally)
    except asyncio.TimeoutError:
        shower.close(tally)
        raise
    shower.close(tally)
    return tally.exit_code()
