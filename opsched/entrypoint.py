"""What an opsched program — the CLI, each service — does before it imports anything else.

nats-py imports aiohttp, when it is installed (the kubernetes client requires it), for a WebSocket transport;
aiohttp's import builds two default TLS contexts: 0.3 s of CPU, a third of a CLI call and of a service's start.
opsched connects over ``nats://`` and ``tls://`` only, so its own programs mark aiohttp absent (``None`` in
``sys.modules``, the import system's own "not available") and nats-py goes without that transport. A program that
imports opsched as a library (the SDK) is left as it is."""
from __future__ import annotations

import sys


def begin(service: bool = False) -> None:
    """Mark aiohttp absent for this process; nothing once nats-py or aiohttp has been imported. ``service``: a
    service's process, which a SIGTERM before it serves (while it imports, say: a pod stopped as it starts) ends with
    exit 0 — nothing is in hand yet; once it serves, the runner drains on SIGTERM instead."""
    if "nats" not in sys.modules and "aiohttp" not in sys.modules:
        sys.modules["aiohttp"] = None  # type: ignore[assignment]  # typeshed's ModuleType only; None is documented
    if service:
        import signal

        signal.signal(signal.SIGTERM, _not_serving_yet)


def _not_serving_yet(signum: int, frame: object) -> None:
    raise SystemExit(0)
