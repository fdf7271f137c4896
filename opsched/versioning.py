"""`opsched --version` and `opsched version [-o json|yaml]`: the CLI's version, its Python, the digest of the wire
contract (``proto/schemas``) and admission's version, asked of its health answer (null when it cannot be reached
within 2 s, which is not an error: the rest is the client's own)."""
from __future__ import annotations

import argparse
import asyncio
import platform
from typing import Any

from opsched.output import TABLE, add_output, emit
from opsched.proto.outputs import VersionInfo
from opsched.rules.version import version

SERVER_TIMEOUT_S = 2.0


def local(server: str | None = None) -> VersionInfo:
    from opsched.proto.schema_snapshots import digest

    return VersionInfo(client=version() or "unknown", python=platform.python_version(), wire_schemas=digest(),
                       server=server)


async def server_version(args: argparse.Namespace) -> str | None:
    """Admission's version, or None: no server, no answer in time, or an answer that does not tell."""
    from opsched.client import Client
    from opsched.connection import target

    where = target(args)

    async def ask() -> str | None:
        client = await Client.connect(where.url, credentials=where.credentials, ca_file=where.ca_file)
        try:
            return (await client.health("admission", timeout=SERVER_TIMEOUT_S)).version or None
        finally:
            await client.close()
    try:
        return await asyncio.wait_for(ask(), SERVER_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - the server's version is a bonus: unknown, not an error
        return None


def cmd_version(args: argparse.Namespace) -> int:
    info = local(asyncio.run(server_version(args)))
    if args.output != TABLE:
        emit(info, args.output)
    else:
        print(f"client:       opsched {info.client} (Python {info.python})\n"
              f"server:       {'opsched ' + info.server if info.server else 'unknown (no answer from admission)'}\n"
              f"wire schemas: sha256 {info.wire_schemas}")
    return 0


def add_parser(sub: Any) -> None:
    v = sub.add_parser("version", help="the CLI's version, the server's (admission's) and the wire contract's digest")
    add_output(v)
    v.set_defaults(func=cmd_version)


def add_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--version", action="version", version=f"opsched {version() or 'unknown'}")
