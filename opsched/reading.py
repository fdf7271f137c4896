"""The CLI's read commands: `ops`, `watch`, `why`, `queues`, `cost`, `schedules`. Each prints a table for people, or with
``--output json|yaml`` its typed answer in full for scripts (``opsched.output``; `watch`: one JSON object a line)."""
from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

import msgspec

from opsched.connection import EXIT_INVALID, EXIT_UNREACHABLE
from opsched.connection import connect as _connect
from opsched.connection import fail as _fail
from opsched.output import JSON, TABLE, add_output, emit

__all__ = ["JSON", "TABLE", "add_output", "add_read_parsers", "with_client"]


def print_json(value: Any) -> None:
    print(msgspec.json.encode(value).decode())


def with_client(args: argparse.Namespace, action: Callable[[Any], Awaitable[int]]) -> int:
    """Connect as the CLI does (exit 3 when NATS cannot be reached), run ``action(client)``, close."""
    from opsched.bus.bus import StreamFull
    from opsched.bus.refusals import NotPermitted

    async def run() -> int:
        client = await _connect(args)
        if client is None:
            return EXIT_UNREACHABLE
        try:
            return await action(client)
        except (NotPermitted, StreamFull) as exc:  # the server refused this user's role, or the command (a cap)
            return _fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - e.g. no admission answering the query
            return _fail(f"{exc.__class__.__name__}: {exc or 'no answer'} (is admission running?)", 1)
        finally:
            await client.close()
    return asyncio.run(run())


def cmd_ops(args: argparse.Namespace) -> int:
    from opsched.proto.outputs import OpList
    from opsched.selection import OpFilter, SelectionError
    from opsched.view import items, table

    now = datetime.now(timezone.utc)
    try:
        selected = OpFilter.from_args(args, now)
    except SelectionError as exc:
        return _fail(str(exc), EXIT_INVALID)

    def chosen(rows: list[Any], when: datetime) -> list[Any]:
        if args.id:  # these ops (a sweep's batch id: its ops)
            rows = [r for r in rows if r.op_id in args.id or r.batch in args.id]
        listed = {i.op_id for i in items(rows, when) if selected.matches(i)}
        return [r for r in rows if r.op_id in listed]

    def text(every: list[Any], when: datetime, width: int | None = None) -> str:
        rows = chosen(every, when)
        return (table(rows, wide=args.wide, now=when, width=width, among=every) if rows
                else "no operations (of those asked for)" if selected != OpFilter() or args.id else "no operations yet")

    if args.watch:
        return _watch_ops(args, text)

    async def show(client) -> int:
        rows = await client.ops()
        unknown = [i for i in args.id if not any(i in (r.op_id, r.batch) for r in rows)]
        if unknown:  # each id given is known
            return _fail(f"no operation {', '.join(unknown)} (`opsched ops` lists them all)", EXIT_INVALID)
        if args.output != TABLE:
            emit(OpList(items=items(chosen(rows, now), now, among=rows)), args.output)
        else:
            print(text(rows, now))
        return 0
    return with_client(args, show)


def _watch_ops(args: argparse.Namespace, text: Callable[..., str]) -> int:
    """`ops --watch`: the table redrawn until Ctrl-C (``opsched.opswatch``); a table on a terminal only."""
    if args.output != TABLE:
        return _fail("--watch draws the table; for scripts, `opsched watch ID... -o json` prints one JSON object "
                     "per event", EXIT_INVALID)
    if not sys.stdout.isatty():
        return _fail("--watch needs a terminal (`opsched ops` prints the table once; `opsched watch` follows ops)",
                     EXIT_INVALID)
    from opsched.opswatch import watch_ops

    try:
        return with_client(args, lambda client: watch_ops(client, text, sys.stdout))
    except KeyboardInterrupt:  # Ctrl-C: the way to stop watching
        return 0


def cmd_watch(args: argparse.Namespace) -> int:
    async def run(client) -> int:
        ids = await expand(client, args.id)
        return await watch(client, ids, args.output, title=args.id[0] if ids != args.id else "",
                           timeout=args.timeout)
    return with_client(args, run)


async def expand(client: Any, ids: list[str]) -> list[str]:
    """``ids``, or the ops of the sweep when the one id given is a batch's. An id nothing is known of yet is
    an op's (one just submitted: its events are on their way), watched until they come or ``--timeout``."""
    if len(ids) > 1 or await client.known(ids[0]):
        return ids
    return await client.batch_ops(ids[0]) or ids


async def watch(client: Any, ids: list[str], output: str | None, *, title: str = "",
                timeout: float | None = None) -> int:
    """Follow ``ids`` to their ends (``opsched.watching``): 0 when all succeeded, else 1."""
    from opsched.watching import follow, mode_for

    try:
        return await follow(client, ids, mode_for(output, sys.stdout), title=title, timeout=timeout)
    except asyncio.TimeoutError:
        return _fail(f"no news of {', '.join(ids)} within {timeout}s", 1)


def cmd_why(args: argparse.Namespace) -> int:
    from opsched.tables import why_text
    from opsched.why_any import why

    async def run(client) -> int:
        answer = await why(client, args.id)  # an op that left admission's memory: completed from its summary
        print(why_text(answer)) if args.output == TABLE else emit(answer, args.output)
        return 0 if answer.found else 1
    return with_client(args, run)


def cmd_notifications(args: argparse.Namespace) -> int:
    from opsched.proto.outputs import NotificationsAnswer
    from opsched.tables import notifications_text
    from opsched.why_any import why

    async def run(client) -> int:
        answer = NotificationsAnswer.of(await why(client, args.id))  # its why timeline's notification entries
        print(notifications_text(answer)) if args.output == TABLE else emit(answer, args.output)
        return 0 if answer.found else 1
    return with_client(args, run)


def show_queues(args: argparse.Namespace) -> int:
    from opsched.tables import queues_table

    async def show(client) -> int:
        answer = await client.queues()
        print(queues_table(answer)) if args.output == TABLE else emit(answer, args.output)
        return 0
    return with_client(args, show)


def cmd_cost(args: argparse.Namespace) -> int:
    from opsched.tables import cost_text

    async def show(client) -> int:
        answer = await client.cost()
        print(cost_text(answer)) if args.output == TABLE else emit(answer, args.output)
        return 0
    return with_client(args, show)


def cmd_schedules(args: argparse.Namespace) -> int:
    from opsched.tables import schedules_table

    async def show(client) -> int:
        answer = await client.schedules(args.id)
        unknown = [i for i in args.id if i not in {s.schedule_id for s in answer.schedules}]
        if unknown:
            return _fail(f"no schedule {', '.join(unknown)} (`opsched schedules` lists them all)", EXIT_INVALID)
        print(schedules_table(answer)) if args.output == TABLE else emit(answer, args.output)
        return 0
    return with_client(args, show)


def add_read_parsers(sub: Any) -> None:
    o = sub.add_parser("ops", help="list operations (-o json: every field, the outputs of those that succeeded)")
    from opsched import completion

    completion.op_id(o.add_argument("id", nargs="*", help="only these ops (op ids, or a sweep's batch id)"))
    add_output(o)
    from opsched.selection import add_arguments as add_filters

    add_filters(o)
    o.add_argument("--wide", action="store_true", help="never cut REASON; add PROJECT, USER and BATCH columns")
    o.add_argument("--watch", "-w", action="store_true", help="redraw the table as ops change, until Ctrl-C")
    o.set_defaults(func=cmd_ops)
    w = sub.add_parser("watch", help="follow operations until they end: one op, several, or a sweep's batch id "
                                     "(a live table on a terminal, one line per event otherwise)")
    completion.op_id(w.add_argument("id", nargs="+", help="op ids, or one sweep's batch id"))
    w.add_argument("--timeout", type=float, default=None, help="give up after this many quiet seconds")
    w.add_argument("--output", "-o", choices=(TABLE, JSON), default=TABLE,
                   help="json: one JSON object per event, for scripts")
    w.set_defaults(func=cmd_watch)
    y = sub.add_parser("why", help="why an operation is pending: ranked reasons and its queue position; an op "
                                   "that ended: its status and the reason and message it ended with; then what "
                                   "happened to it, per attempt (admitted where, preempted by whom and why, ...)")
    completion.op_id(y.add_argument("id"))
    add_output(y)
    y.set_defaults(func=cmd_why)
    nt = sub.add_parser("notifications", help="an operation's notifications: each delivery attempt to each "
                                              "connection (delivered, or failed and when it is retried) and "
                                              "those given up (docs/notifications.md)")
    completion.op_id(nt.add_argument("id"))
    add_output(nt)
    nt.set_defaults(func=cmd_notifications)
    co = sub.add_parser("cost", help="spend per queue and project (today, week, month), burn rate, budgets left")
    add_output(co)
    co.set_defaults(func=cmd_cost)
    sc = sub.add_parser("schedules", help="schedules: when each runs, its state (active, waiting, finished, "
                                          "deleted, disabled), its next run and its last runs")
    completion.schedule_id(sc.add_argument("id", nargs="*", help="only these schedules"))
    add_output(sc)
    sc.set_defaults(func=cmd_schedules)
