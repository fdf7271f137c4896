"""How the CLI reaches NATS: the server's URL and CA (``endpoint``) and the user it connects as."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from opsched.endpoint import nats_ca, nats_url, unreachable
from opsched.natsauth import client_credentials
from services.runtime.credentials import CredentialsError

EXIT_INVALID = 2
EXIT_UNREACHABLE = 3


def fail(message: str, code: int = EXIT_INVALID) -> int:
    print(f"opsched: error: {message}", file=sys.stderr)
    return code


async def connect(args: argparse.Namespace):
    from opsched.client import Client

    url = nats_url(args)
    try:
        credentials = client_credentials(Path(args.data_dir))
    except CredentialsError as exc:
        raise SystemExit(fail(f"cannot use the NATS credentials: {exc}")) from None
    try:
        ca = nats_ca(args)
    except ValueError as exc:  # a CA named but absent: the user's input
        raise SystemExit(fail(str(exc))) from None
    try:
        return await Client.connect(url, credentials=credentials, ca_file=ca)
    except Exception as exc:  # noqa: BLE001 - no server, or one we do not trust: say so plainly
        fail(unreachable(url, ca, exc), EXIT_UNREACHABLE)
        return None
