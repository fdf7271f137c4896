"""What the CLI says when it cannot reach the bus. Where the bus is (URL, CA, user): ``opsched.context``."""
from __future__ import annotations

from pathlib import Path


def unreachable(url: str, ca: Path | None, exc: BaseException) -> str:
    """Why the CLI could not connect, plainly: a certificate the CA does not verify is not a server down."""
    import ssl

    if isinstance(exc, ssl.SSLCertVerificationError):
        trusted = f"the CA in {ca}" if ca else "no opsched CA (give --nats-ca or $OPSCHED_NATS_CA)"
        return f"NATS at {url}: the server's TLS certificate is not trusted ({exc.verify_message}); trusting {trusted}"
    return f"cannot reach NATS at {url} ({exc.__class__.__name__}); is `opsched up` running?"
