"""Where the CLI finds the bus: the NATS URL and the CA that verifies the server (TLS)."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

DEFAULT_URL = "nats://127.0.0.1:4222"
CA_ENV = "OPSCHED_NATS_CA"


def _up_state(args: argparse.Namespace) -> dict:
    """What the running `opsched up` of ``--data-dir`` wrote (``up.json``), {} if none runs there."""
    state = Path(getattr(args, "data_dir", ".opsched")) / "up.json"
    return json.loads(state.read_text()) if state.exists() else {}


def nats_url(args: argparse.Namespace) -> str:
    """--nats, then $NATS_URL, then the file `opsched up` wrote, then the default port."""
    if getattr(args, "nats", None):
        return args.nats
    if os.environ.get("NATS_URL"):
        return os.environ["NATS_URL"]
    return _up_state(args).get("nats_url") or DEFAULT_URL


def nats_ca(args: argparse.Namespace) -> Path | None:
    """--nats-ca, then $OPSCHED_NATS_CA, then the CA `opsched up` generated in --data-dir (``tls/ca.pem``);
    None: no CA (a plain server, or a TLS server whose certificate the system's CAs verify)."""
    if getattr(args, "nats_ca", None):
        return Path(args.nats_ca)
    if os.environ.get(CA_ENV):
        return Path(os.environ[CA_ENV])
    recorded = _up_state(args).get("nats_ca")
    if recorded:
        return Path(recorded)
    default = Path(getattr(args, "data_dir", ".opsched")) / "tls" / "ca.pem"
    return default if default.exists() else None


def unreachable(url: str, ca: Path | None, exc: BaseException) -> str:
    """Why the CLI could not connect, plainly: a certificate the CA does not verify is not a server down."""
    import ssl

    if isinstance(exc, ssl.SSLCertVerificationError):
        trusted = f"the CA in {ca}" if ca else "no opsched CA (give --nats-ca or $OPSCHED_NATS_CA)"
        return f"NATS at {url}: the server's TLS certificate is not trusted ({exc.verify_message}); trusting {trusted}"
    if isinstance(exc, (OSError, ssl.SSLError)) and ca is not None and not ca.is_file():
        return f"NATS CA file {ca} cannot be read ({exc.__class__.__name__}); check --nats-ca / ${CA_ENV}"
    return f"cannot reach NATS at {url} ({exc.__class__.__name__}); is `opsched up` running?"
