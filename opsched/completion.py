"""Shell completion for `opsched` (``argcomplete``): commands, options and their choices, file names for the
arguments that take files, and from the running opsched: op ids (and sweeps' batch ids) for the commands that take
an op (``ops``, ``watch``, ``why``, ``stop``, ``approve``, ...), schedule ids for ``schedules``, and queue names for
``--queue``. ``opsched completion bash`` (or zsh, fish, tcsh, powershell) prints the script to source.

A completer connects as the command would (``--nats``, ``--context``, the environment, the context file), has
``BUDGET_S`` in all, and completes nothing, silently, when the bus cannot be reached or answer in time: completion
never blocks or prints an error."""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

SHELLS = ("bash", "zsh", "fish", "tcsh", "powershell")
BUDGET_S = 1.0  # for connecting and asking, in all
MAX_IDS = 2000  # op ids read for a completion at most (the newest are those kept)

Fetch = Callable[[Any], Awaitable[list[str]]]


class _Batch(msgspec.Struct):
    batch: str | None = None


class _Submitted(msgspec.Struct):
    spec: _Batch


async def op_ids(client: Any) -> list[str]:
    """Every op id the client can read (the ops bucket's summaries, the op stream's ``submitted``s) and the batch
    ids of sweeps."""
    from opsched.proto import subjects
    from opsched.proto.summaries import OpSummary

    ids: dict[str, None] = {}
    for data in await client.reads.read_bucket(subjects.OPS_BUCKET):
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            ids[msgspec.json.decode(data, type=OpSummary).op_id] = None
    for message in (await client.reads.messages(subjects.OPS_STREAM, subjects.event("submitted", "*")))[-MAX_IDS:]:
        ids[message.subject.rsplit(".", 1)[-1]] = None
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            batch = msgspec.json.decode(message.data, type=_Submitted).spec.batch
            if batch:
                ids[batch] = None
    return list(ids)


async def queue_names(client: Any) -> list[str]:
    config = await client.queue_config()
    return [q.name for q in config.queues] if config is not None else []


async def schedule_ids(client: Any) -> list[str]:
    return [s.schedule_id for s in (await client.schedules()).schedules]


def complete(parsed_args: argparse.Namespace, fetch: Fetch, connect: Callable[[argparse.Namespace], Awaitable[Any]]
             | None = None, budget: float = BUDGET_S) -> list[str]:
    """``fetch(client)`` on a client connected as ``parsed_args`` say, within ``budget`` seconds; [] on any
    failure (no bus, no answer, a context that cannot be used: nothing printed)."""
    async def run() -> list[str]:
        client = await (connect or _connect)(parsed_args)
        try:
            return await fetch(client)
        finally:
            await client.close()

    async def bounded() -> list[str]:
        return await asyncio.wait_for(run(), budget)
    try:
        from opsched.bus import logging as oplog

        oplog.configure("console", "error")  # the client's connection warnings would land in the shell
        with contextlib.redirect_stderr(io.StringIO()):
            return asyncio.run(bounded())
    except BaseException:  # noqa: BLE001 - completion completes nothing rather than fail (SystemExit included)
        return []


async def _connect(args: argparse.Namespace) -> Any:
    from opsched.client import Client
    from opsched.connection import target

    where = target(args)
    return await Client.connect(where.url, credentials=where.credentials, ca_file=where.ca_file)


class Completer:
    """An argcomplete completer: the values ``fetch`` gives that start with what was typed."""

    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch

    def __call__(self, prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
        return sorted(v for v in complete(parsed_args, self.fetch) if v.startswith(prefix))


def op_id(action: argparse.Action) -> argparse.Action:
    """``action`` (an argument taking op ids) completes op ids and batch ids; returns it."""
    action.completer = Completer(op_ids)  # type: ignore[attr-defined]
    return action


def schedule_id(action: argparse.Action) -> argparse.Action:
    action.completer = Completer(schedule_ids)  # type: ignore[attr-defined]
    return action


def queue(action: argparse.Action) -> argparse.Action:
    action.completer = Completer(queue_names)  # type: ignore[attr-defined]
    return action


def autocomplete(p: argparse.ArgumentParser) -> None:
    """Answer the shell and exit when it asks for completions (``_ARGCOMPLETE`` set); nothing otherwise."""
    import argcomplete

    argcomplete.autocomplete(p)


def cmd_completion(args: argparse.Namespace) -> int:
    import argcomplete

    print(argcomplete.shellcode(["opsched"], shell=args.shell), end="")
    return 0


def add_parser(sub: Any) -> None:
    c = sub.add_parser("completion", help="print the shell completion script: "
                                          "eval \"$(opsched completion bash)\" (or zsh, fish, tcsh, powershell)")
    c.add_argument("shell", choices=SHELLS)
    c.set_defaults(func=cmd_completion)
