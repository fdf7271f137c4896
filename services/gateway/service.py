"""The gateway: the REST API and the CloudEvents HTTP binding (``app``, ``events``) in front of the bus.

A bus client with its own NATS user (``gateway``, in the clients' account: ``proto.permissions.gateway``), never
Kubernetes. Each request acts as its bearer token's identity (``opsched.gateway_tokens``): its commands go on
``cmd.<identity>.<verb>`` (``Client.acting_as``), so admission records the identity as the requester, and the
gateway's user may send only the verbs of the users it fronts. Stateless but for the token file: run as many
replicas as wanted. It consumes nothing; its health is its HTTP ``/healthz`` (the clients' account answers no
query)."""
from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn

from opsched.bus.bus import Bus
from opsched.client import Client
from opsched.gateway_tokens import TokenStore
from opsched.inloop_http import InLoopServer
from opsched.natsauth import parse_user
from opsched.proto import permissions
from opsched.services.gateway.app import build_app
from opsched.services.gateway.metrics import Requests
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.service import Service
from opsched.services.runtime.settings import Settings


def roles_of(users: list[str]) -> dict[str, str]:
    """``NAME:ROLE`` entries (read as `opsched up --user` reads them) -> name -> role (ValueError naming a bad one)."""
    return {user.name: user.role for user in map(parse_user, users)}


class Gateway(Service):
    name = permissions.GATEWAY

    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        super().__init__(settings, clock)
        if settings.gateway_tokens_file is None:
            raise ValueError("the gateway needs OPSCHED_GATEWAY_TOKENS_FILE (its bearer tokens)")
        self.roles = roles_of(settings.gateway_users)
        self.store = TokenStore(settings.gateway_tokens_file, self.clock.now)
        self.requests = Requests()
        self.port = settings.gateway_port
        self._server: InLoopServer | None = None

    def metric_families(self) -> list[Any]:
        return self.requests.families()

    @property
    def url(self) -> str:
        scheme = "https" if self.settings.gateway_tls_cert else "http"
        return f"{scheme}://{self.settings.gateway_host}:{self.port}"

    async def run(self, bus: Bus, stop: asyncio.Event) -> None:
        """Serve HTTP until ``stop``: no streams to create, no consumers, no state to rebuild."""
        self.bus, self.stopping = bus, stop
        self.starting = f"listening on {self.settings.gateway_host}:{self.settings.gateway_port}"
        sock = socket.create_server((self.settings.gateway_host, self.settings.gateway_port))
        self.port = sock.getsockname()[1]
        app = build_app(Client(bus), self.store, self.roles, self.clock.now, self.requests)
        tls = ({"ssl_certfile": str(self.settings.gateway_tls_cert), "ssl_keyfile": str(self.settings.gateway_tls_key)}
               if self.settings.gateway_tls_cert else {})
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=2, **tls)  # type: ignore[arg-type]
        self._server = server = InLoopServer(config)
        task = asyncio.create_task(server.serve(sockets=[sock]), name="gateway-http")
        self.starting = "ready"
        self.ready.set()
        self.log.info("gateway_listening", url=self.url)
        try:
            await asyncio.wait({task, asyncio.create_task(stop.wait())}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            server.should_exit = True
            await asyncio.gather(task, return_exceptions=True)
            sock.close()


def build(settings: Settings, clock: Clock | None = None) -> Gateway:
    return Gateway(settings, clock)
