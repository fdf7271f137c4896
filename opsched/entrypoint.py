"""What an opsched program — the CLI, each service — does before it imports anything else.

nats-py imports aiohttp, when it is installed (the kubernetes client requires it), for a WebSocket transport;
aiohttp's import builds two default TLS contexts: 0.3 s of CPU, a third of a CLI call and of a service's start.
opsched connects over ``nats://`` and ``tls://`` only, so its own programs mark aiohttp absent (``None`` in
``sys.modules``, the import system's own "not available") and nats-py goes without that transport. A program that
imports opsched as a library (the SDK) is left as it is."""
from __future__ import annotations

import sys


def begin() -> None:
    """Mark aiohttp absent for this process; nothing once nats-py or aiohttp has been imported."""
    if "nats" not in sys.modules and "aiohttp" not in sys.modules:
        sys.modules["aiohttp"] = None  # type: ignore[assignment]  # typeshed's ModuleType only; None is documented
