"""A tiny HTTP health endpoint: GET /healthz (alive: nothing dead or stuck, such as a handler loop or the
dispatcher's watch threads, and its NATS connection not given up) and /readyz (alive, connected to NATS now,
consumers bound and waiting for no dependency). A service that waits out an outage (NATS reconnecting, the
Kubernetes API down) is alive, so /healthz stays 200 and nothing restarts it (a restart would not bring NATS
back); /readyz is 503 and says what it waits for, since when:
``{"waiting_for": {"dispatcher": {"kubernetes": {"since": ..., "detail": ..., "failures": ...}}}}``.
A service that is not alive (a handler loop stuck, see ``liveness``) makes both 503 and says why:
``{"not_alive": {"dispatcher": {"dispatcher-admitted": "handling ops.admitted.op-1 since ..., ..."}}}``.
A service that is alive but cannot make progress (a publish the NATS server refused for its user's permissions,
a cycle that keeps failing: ``stalls``) makes /readyz 503 and says what:
``{"not_progressing": {"admission": {"publish ops.succeeded.op-1": {"since": ..., "count": ..., "detail": ...}}}}``.
GET /metrics: the Prometheus text format of ``metrics`` (``services.runtime.metrics``), when given.

A client cannot hold it: the whole request head (request line and headers) must arrive within ``read_timeout_s``
(5 s), in at most ``MAX_HEADER_LINES`` lines of at most ``MAX_LINE`` bytes each; one that sends nothing, trickles
its headers or sends too many is cut off (nothing answered), and the answer is written within the same time."""
from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from opsched.services.runtime.metrics import CONTENT_TYPE as METRICS_TYPE

READ_TIMEOUT_S = 5.0  # for the whole request head, however it trickles in; and again for writing the answer
MAX_HEADER_LINES, MAX_LINE = 100, 8192


class _TooLarge(Exception):
    """A request head over the limits: cut off."""


class HealthServer:
    def __init__(self, report: Callable[[], dict], port: int = 0, host: str = "127.0.0.1",
                 metrics: Callable[[], bytes] | None = None, read_timeout_s: float = READ_TIMEOUT_S) -> None:
        self.report, self.metrics = report, metrics
        self.read_timeout_s = read_timeout_s
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_LINE)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(_head(reader), timeout=self.read_timeout_s)
            path = request.split()[1].decode() if len(request.split()) > 1 else "/"
            if path.startswith("/metrics") and self.metrics is not None:
                status, content_type, payload = "200 OK", METRICS_TYPE, self.metrics()
            else:
                status, body = self._answer(path)
                content_type, payload = "application/json", json.dumps(body).encode()
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                         f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
            await asyncio.wait_for(writer.drain(), timeout=self.read_timeout_s)
        except (asyncio.TimeoutError, ConnectionError, IndexError, ValueError, _TooLarge):  # ValueError: a line too long
            pass
        finally:
            writer.close()

    def _answer(self, path: str) -> tuple[str, dict]:
        report = self.report()
        alive = not report.get("nats_closed") and not report.get("not_alive")
        if path.startswith("/healthz"):
            ok = alive
        elif path.startswith("/readyz"):
            ok = (alive and report.get("connected", False) and report.get("ready", False)
                  and not report.get("waiting_for") and not report.get("not_progressing"))
        else:
            return "404 Not Found", {"error": "try /healthz, /readyz or /metrics"}
        return ("200 OK" if ok else "503 Service Unavailable"), report


async def _head(reader: asyncio.StreamReader) -> bytes:
    """The request line, once the headers after it were read (and dropped) up to the blank line."""
    request = await reader.readline()
    for _ in range(MAX_HEADER_LINES):
        if await reader.readline() in (b"\r\n", b"\n", b""):
            return request
    raise _TooLarge(f"over {MAX_HEADER_LINES} header lines")
