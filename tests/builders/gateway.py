"""The gateway serving in this process on a test nats-server, as its own NATS user (``gateway``), fronting
``admin`` and the test users: ``async with serving(nats_server, tmp_path) as (service, store)``."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from opsched.gateway_tokens import TokenStore
from opsched.proto import permissions
from opsched.services.gateway.service import Gateway
from tests.builders.identities import USERS, Identity

FRONTED = ["admin:admin", *(f"{name}:{role}" for name, role in USERS.items())]


@contextlib.asynccontextmanager
async def serving(nats_server, tmp_path: Path) -> AsyncIterator[tuple[Gateway, TokenStore]]:
    store = TokenStore(tmp_path / "auth" / "gateway-tokens.json")
    settings = nats_server.settings(gateway_tokens_file=store.path, gateway_port=0, gateway_users=FRONTED)
    service = Gateway(settings)
    bus = await nats_server.connect(None, "opsched-gateway", Identity(permissions.GATEWAY, permissions.GATEWAY))
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(bus, stop))
    try:
        await asyncio.wait_for(service.ready.wait(), 10)
        yield service, store
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await bus.close()
