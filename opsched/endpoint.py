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
    None: no CA (a plain server, or a TLS server whose certificate the system's CAs verify). A CA named
    that is absent or no certificate raises ``ValueError`` naming where it was named."""
    state = Path(getattr(args, "data_dir", ".opsched")) / "up.json"
    for source, named in (("--nats-ca", getattr(args, "nats_ca", None)), (f"${CA_ENV}", os.environ.get(CA_ENV)),
                          (f"{state} (nats_ca)", _up_state(args).get("nats_ca"))):
        if named:
            return _usable(Path(named), source)
    default = Path(getattr(args, "data_dir", ".opsched")) / "tls" / "ca.pem"
    return default if default.exists() else None


def _usable(ca: Path, source: str) -> Path:
    import ssl

    from services.runtime.connecting import client_context

    if not ca.is_file():
        raise ValueError(f"{source}: no CA certificate file at {ca}")
    try:
        client_context(ca)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"{source}: {ca} is not a usable CA certificate ({exc})") from None
    return ca


def unreachable(url: str, ca: Path | None, exc: BaseException) -> str:
    """Why the CLI could not connect, plainly: a certificate the CA does not verify is not a server down."""
    import ssl

    if isinstance(exc, ssl.SSLCertVerificationError):
        trusted = f"the CA in {ca}" if ca else "no opsched CA (give --nats-ca or $OPSCHED_NATS_CA)"
        return f"NATS at {url}: the server's TLS certificate is not trusted ({exc.verify_message}); trusting {trusted}"
    return f"cannot reach NATS at {url} ({exc.__class__.__name__}); is `opsched up` running?"
