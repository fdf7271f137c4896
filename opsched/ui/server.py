"""The web view serving in this event loop (uvicorn on a socket bound here): `opsched ui` runs it on its own,
`opsched up --ui` beside the services. It reads the bus as a client (``opsched.client.Client``) and serves the
page at ``url``; ``close`` ends every page's stream, stops the HTTP server, then stops reading."""
from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
from typing import Any

import uvicorn

from opsched.inloop_http import InLoopServer
from opsched.ui.app import build_app
from opsched.ui.feed import Feed
from opsched.ui.hosts import HostCheck
from opsched.ui.options import DEFAULT_HOST, DEFAULT_PORT
from opsched.ui.sources import Sources


class WebView:
    def __init__(self, client: Any, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
                 interval: float = 5.0) -> None:
        self.client, self.host, self.port = client, host, port
        self.feed = Feed()
        self.sources = Sources(client, self.feed, interval=interval)
        self._server: InLoopServer | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def start(self) -> "WebView":
        """Bind (``OSError`` naming the address if it cannot), read the bus, then serve."""
        try:
            sock = socket.create_server((self.host, self.port), reuse_port=False)
        except OSError as exc:
            raise OSError(f"the web view cannot listen on {self.host}:{self.port}: {exc.strerror or exc}") from None
        self.port = sock.getsockname()[1]
        await self.sources.start()
        app = HostCheck(build_app(self.feed, why=self.sources.why, logs=self.sources.logs), self.host, self.port)  # DNS rebinding: only its own address
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=2)
        self._server = InLoopServer(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="ui-http")
        return self

    async def wait(self) -> None:
        if self._task is not None:
            await self._task

    async def close(self) -> None:
        self.feed.close()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await asyncio.gather(self._task, return_exceptions=True)
        await self.sources.close()


def say_serving(view: WebView) -> None:
    print(f"[opsched ui] the web view is at {view.url} (read-only; Ctrl-C stops it)", file=sys.stderr, flush=True)


def cmd_ui(args: argparse.Namespace) -> int:
    """`opsched ui`: the web view of the bus the CLI reaches, until Ctrl-C or SIGTERM (as a pod is stopped): then
    its pages' streams end, the server stops, the bus is closed, exit 0."""
    from opsched.connection import fail
    from opsched.reading import with_client

    async def serve(client: Any) -> int:
        try:
            view = await WebView(client, args.host, args.port).start()
        except OSError as exc:
            return fail(str(exc))
        say_serving(view)
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stopping.set)
        try:
            stopped = asyncio.create_task(stopping.wait())
            await asyncio.wait({asyncio.ensure_future(view.wait()), stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
        finally:
            loop.remove_signal_handler(signal.SIGTERM)
            await view.close()
        return 0
    try:
        return with_client(args, serve)
    except KeyboardInterrupt:
        return 0
