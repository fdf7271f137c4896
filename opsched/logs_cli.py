"""`opsched logs ID [--follow/-f] [--replica NAME] [--attempt N] [--container NAME] [--tail N] [--timestamps]`:
what a container of an op printed (``Client.logs``), a line per line on stdout. Exit 0 once the answer is whole
(with ``--follow``: once the container ended) and on Ctrl-C; a refusal (unknown op, no pod yet, pod gone, unknown
replica or attempt, ...) prints its reason on stderr and exits 2 for what names nothing (an unknown op, attempt,
replica or container, a bad request), 1 otherwise; no dispatcher answering: 1; NATS unreachable: 3."""
from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from opsched.connection import EXIT_INVALID, EXIT_UNREACHABLE
from opsched.connection import connect as _connect
from opsched.connection import fail as _fail
from opsched.proto.queries import LOGS_MAX_TAIL
from opsched.proto.reasons import LogsRefusal, Reason

NAMES_NOTHING = (Reason.UNKNOWN_OP, LogsRefusal.UNKNOWN_ATTEMPT, LogsRefusal.UNKNOWN_REPLICA,
                 LogsRefusal.UNKNOWN_CONTAINER, LogsRefusal.INVALID_LOGS_REQUEST)


def exit_code(reason: str) -> int:
    """A refusal's exit code: 2 when what was typed names nothing, 1 when it names something with no lines now."""
    return EXIT_INVALID if reason in NAMES_NOTHING else 1


def add_parser(sub: Any) -> None:
    lg = sub.add_parser("logs", help="what a container of an op printed (its latest attempt's main pod); -f follows "
                                     "it until it ends")
    lg.add_argument("id")
    lg.add_argument("--follow", "-f", action="store_true", help="keep printing lines as they come, until the "
                    "container ends (Ctrl-C stops, exit 0)")
    lg.add_argument("--replica", default="", metavar="NAME", help="a pod of a distributed op or a service by its "
                    "<role>-<index> (worker-0, replica-1; default: the main pod)")
    lg.add_argument("--attempt", type=_non_negative, metavar="N", help="an earlier attempt (default: the latest)")
    lg.add_argument("--container", default="", metavar="NAME", help="a sidecar (default: the main container)")
    lg.add_argument("--tail", type=_tail, metavar="N", help="only the last N lines (then, with -f, the new ones)")
    lg.add_argument("--timestamps", action="store_true", help="each line prefixed by its time (RFC 3339)")
    lg.set_defaults(func=cmd_logs)


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _tail(text: str) -> int:
    value = _non_negative(text)
    if value > LOGS_MAX_TAIL:
        raise argparse.ArgumentTypeError(f"at most {LOGS_MAX_TAIL}, got {value}")
    return value


def cmd_logs(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_logs(args))
    except KeyboardInterrupt:
        return 0


async def _logs(args: argparse.Namespace) -> int:
    from opsched.bus.refusals import NotPermitted
    from opsched.logstream import LogsRefused, LogsUnanswered

    client = await _connect(args)
    if client is None:
        return EXIT_UNREACHABLE
    try:
        async for line in client.logs(args.id, follow=args.follow, replica=args.replica, attempt=args.attempt,
                                      container=args.container, tail=args.tail, timestamps=args.timestamps):
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        return 0
    except LogsRefused as refused:
        return _fail(f"{refused} ({refused.reason})", exit_code(refused.reason))
    except LogsUnanswered as exc:
        return _fail(f"{exc} (is the dispatcher running?)", 1)
    except NotPermitted as exc:
        return _fail(str(exc))
    finally:
        await client.close()
