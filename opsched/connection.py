"""How the CLI reaches NATS: the URL, CA and user ``opsched.context`` resolves from the command's options
(``--nats``, ``--nats-ca``, ``--context``, ``--data-dir``), the environment and the context file."""
from __future__ import annotations

import argparse
import sys

from opsched import context
from opsched.bus.credentials import CredentialsError
from opsched.endpoint import unreachable

EXIT_INVALID = 2
EXIT_UNREACHABLE = 3


def fail(message: str, code: int = EXIT_INVALID) -> int:
    print(f"opsched: error: {message}", file=sys.stderr)
    return code


def add_connection_arguments(p: argparse.ArgumentParser) -> None:
    """The options that say where the bus is (every command but ``up`` uses them)."""
    p.add_argument("--context", metavar="FILE", help="a context file naming the NATS URL, CA and user (default: "
                   f"${context.CONTEXT_ENV}, then DATA_DIR/{context.FILE_NAME}, which `opsched up` writes)")
    p.add_argument("--nats", help="NATS URL (default: $NATS_URL, then the context's)")
    p.add_argument("--nats-ca", help="CA certificate verifying the NATS server (TLS; default: "
                   "$OPSCHED_NATS_CA, then the context's, then DATA_DIR/tls/ca.pem)")
    p.add_argument("--data-dir", default=context.DEFAULT_DATA_DIR, help="where `opsched up` keeps its state")


def target(args: argparse.Namespace) -> context.Target:
    """Where the command connects, and as whom; exits 2 naming what cannot be used."""
    from opsched.bus.connecting import server_urls  # imports nats-py: after the CLI's start (opsched.entrypoint)

    try:
        where = context.resolve(url=getattr(args, "nats", None), ca_file=getattr(args, "nats_ca", None),
                                context=getattr(args, "context", None),
                                data_dir=getattr(args, "data_dir", context.DEFAULT_DATA_DIR))
        server_urls(where.url)  # a URL opsched cannot connect with (ws://): named, exit 2
        return where
    except CredentialsError as exc:
        raise SystemExit(fail(f"cannot use the NATS credentials: {exc}")) from None
    except ValueError as exc:  # a context or CA named but absent or unusable: the user's input
        raise SystemExit(fail(str(exc))) from None


async def connect(args: argparse.Namespace):
    from opsched.client import Client

    where = target(args)
    try:
        return await Client.connect(where.url, credentials=where.credentials, ca_file=where.ca_file)
    except Exception as exc:  # noqa: BLE001 - no server, or one we do not trust: say so plainly
        fail(unreachable(where.url, where.ca_file, exc), EXIT_UNREACHABLE)
        return None
