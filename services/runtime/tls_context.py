"""The SSL context of every NATS client (services, CLI, SDK, monitoring calls): trust the given CA alone
and check the server's name against its certificate."""
from __future__ import annotations

import ssl
from pathlib import Path


def client_context(ca_file: Path | str) -> ssl.SSLContext:
    """Raises ``FileNotFoundError``/``ssl.SSLError`` if ``ca_file`` is missing or not a certificate."""
    return ssl.create_default_context(cafile=str(ca_file))
