"""How the CLI reaches NATS: the server's URL and the user it connects as."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from opsched.natsauth import client_credentials
from services.runtime.credentials import CredentialsError

EXIT_INVALID = 2
EXIT_UNREACHABLE = 3


def fail(message: str, code: int = EXIT_INVALID) -> int:
    print(f"opsched: error: {message}", file=sys.stderr)
    return code


def nats_url(args: argparse.Namespace) -> str:
    """--nats, then $NATS_URL, then the file `opsched up` wrote, then the default port."""
    if getattr(args, "nats", None):
        return args.nats
    if os.environ.get("NATS_URL"):
        return os.environ["NATS_URL"]
    state = Path(getattr(args, "data_dir", ".opsched")) / "up.json"
    if state.exists():
        return json.loads(state.read_text())["nats_url"]
    return "nats://127.0.0.1:4222"


async def connect(args: argparse.Namespace):
    from opsched.client import Client

    url = nats_url(args)
    try:
        return await Client.connect(url, credentials=client_credentials(Path(args.data_dir)))
    except CredentialsError as exc:
        raise SystemExit(fail(f"cannot use the NATS credentials: {exc}")) from None
    except Exception as exc:  # noqa: BLE001 - no server: say so plainly
        fail(f"cannot reach NATS at {url} ({exc.__class__.__name__}); is `opsched up` running?",
              EXIT_UNREACHABLE)
        return None
