"""The simulated kubelet's container-log endpoint: ``GET /containerLogs/{namespace}/{pod}/{container}``, over HTTPS
on loopback, as the real kubelet serves it to the API server (which proxies ``pods/log``: ``kubectl logs``,
``read_namespaced_pod_log``).

Query parameters, as the kubelet reads them: ``follow`` (keep the answer open and write each line as it is printed,
until the container ends or the client goes), ``tailLines`` (the last N lines only), ``sinceSeconds`` /
``sinceTime`` (RFC 3339: lines printed since then), ``timestamps`` (each line prefixed with its RFC 3339 time with
nanoseconds and a space), ``limitBytes`` (stop after that many bytes), ``previous`` (a terminated earlier instance:
simulated containers are never restarted, so there is none, as a kubelet answers). What a container prints is the
simulation's (``nodes.container_log``). Errors are plain text, with the kubelet's statuses: 404 for a pod not on
these nodes, 400 for a container not started yet, no previous instance or a malformed parameter.

The certificate is a self-signed one of this process (``opsched.tls`` in a temporary directory): the API server of
the local control plane does not verify its kubelets' serving certificates (no ``--kubelet-certificate-authority``),
as a bare kube-apiserver does not."""
from __future__ import annotations

import logging
import shutil
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from opsched.localcluster.nodes import LogLine, container_log, container_span, next_tick
from opsched.tls import ensure_tls

log = logging.getLogger("opsched.simkubelet")
PREFIX = "/containerLogs/"


class LogRequestError(ValueError):
    """A request the kubelet refuses: its HTTP status and plain-text message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LogOptions:
    follow: bool = False
    tail_lines: int | None = None
    since: float | None = None  # epoch seconds: lines printed at or after it
    timestamps: bool = False
    limit_bytes: int | None = None
    previous: bool = False


def _flag(values: dict[str, list[str]], name: str) -> bool:
    value = values.get(name, ["false"])[-1].lower()
    if value not in ("true", "false", "1", "0", ""):
        raise LogRequestError(400, f"{name}: not a boolean: {value!r}")
    return value in ("true", "1", "")


def _count(values: dict[str, list[str]], name: str, least: int) -> int | None:
    if name not in values:
        return None
    try:
        number = int(values[name][-1])
    except ValueError:
        raise LogRequestError(400, f"{name}: not an integer: {values[name][-1]!r}") from None
    if number < least:
        raise LogRequestError(400, f"{name}: must be at least {least}, got {number}")
    return number


def parse_options(query: str, now: float) -> LogOptions:
    """The kubelet's log options from a query string (``LogRequestError`` 400 naming a malformed one)."""
    values = parse_qs(query, keep_blank_values=True)
    since_seconds = _count(values, "sinceSeconds", 1)
    since = now - since_seconds if since_seconds is not None else None
    if "sinceTime" in values:
        if since is not None:
            raise LogRequestError(400, "at most one of sinceTime or sinceSeconds may be specified")
        try:
            since = datetime.fromisoformat(values["sinceTime"][-1].replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise LogRequestError(400, f"sinceTime: not an RFC 3339 time: {values['sinceTime'][-1]!r}") from None
    return LogOptions(follow=_flag(values, "follow"), tail_lines=_count(values, "tailLines", 0), since=since,
                      timestamps=_flag(values, "timestamps"), limit_bytes=_count(values, "limitBytes", 1),
                      previous=_flag(values, "previous"))


def parse_path(path: str) -> tuple[str, str, str]:
    """``/containerLogs/{namespace}/{pod}/{container}`` -> its three names (``LogRequestError`` 404 otherwise)."""
    parts = [unquote(p) for p in path.removeprefix(PREFIX).split("/")] if path.startswith(PREFIX) else []
    if len(parts) != 3 or not all(parts):
        raise LogRequestError(404, f"not found: {path} (expected {PREFIX}NAMESPACE/POD/CONTAINER)")
    return parts[0], parts[1], parts[2]


def stamp(at: float) -> str:
    """RFC 3339 with nanoseconds (to the microsecond: a float's precision), UTC, as the kubelet stamps a line."""
    whole = int(at)
    micros = round((at - whole) * 1e6)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    return datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{micros:06d}000Z"


def rendered(line: LogLine, timestamps: bool) -> bytes:
    return ((stamp(line.at) + " " if timestamps else "") + line.text + "\n").encode()


def backlog(lines: list[LogLine], options: LogOptions) -> list[LogLine]:
    """What a request answers at once: the lines since ``since``, the last ``tail_lines`` of them."""
    kept = [line for line in lines if options.since is None or line.at >= options.since]
    if options.tail_lines is not None:
        kept = kept[len(kept) - options.tail_lines:] if options.tail_lines else []
    return kept


def check_loggable(pod: dict[str, Any], container: str, options: LogOptions) -> None:
    """Refuse as the kubelet does: no previous instance; a container that has not started."""
    pod_name = pod["metadata"]["name"]
    if options.previous:
        raise LogRequestError(400, f'previous terminated container "{container}" in pod "{pod_name}" not found')
    if container not in [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]:
        raise LogRequestError(400, f'container "{container}" in pod "{pod_name}" is not valid')
    if container_span(pod, container) is None:
        raise LogRequestError(400, f'container "{container}" in pod "{pod_name}" is waiting to start: '
                                   "ContainerCreating")


class _Budget:
    """``limitBytes``: how much may still be written (None: no limit)."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit

    def take(self, data: bytes) -> bytes:
        if self.left is None:
            return data
        data = data[:self.left]
        self.left -= len(data)
        return data

    @property
    def spent(self) -> bool:
        return self.left is not None and self.left <= 0


POLL_S = 0.05  # how soon the serving thread sees stop()


class LogServer:
    """The endpoint on ``127.0.0.1:<port>`` (``port``), for the pods ``read_pod(namespace, name)`` returns (None: not
    one of this kubelet's: 404). ``start()`` serves in a thread; ``stop()`` ends it."""

    def __init__(self, read_pod: Callable[[str, str], dict[str, Any] | None], host: str = "127.0.0.1",
                 stopping: threading.Event | None = None) -> None:
        self.read_pod = read_pod
        self.stopping = stopping or threading.Event()
        self._dir = Path(tempfile.mkdtemp(prefix="opsched-kubelet-tls-"))
        files = ensure_tls(self._dir, (host,))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(files.cert, files.key)
        self.httpd = ThreadingHTTPServer((host, 0), _handler(self))
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port: int = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> LogServer:
        # serve_forever looks for shutdown() every poll_interval: at its default (0.5 s) each stop waited that long
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": POLL_S},
                                        name="simkubelet-logs", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def answer(self, path: str, query: str, write: Callable[[bytes], None]) -> None:
        """Write the lines a request asks for (``LogRequestError`` before anything is written)."""
        namespace, name, container = parse_path(path)
        options = parse_options(query, time.time())
        pod = self.read_pod(namespace, name)
        if pod is None:
            raise LogRequestError(404, f'pod "{name}" in namespace "{namespace}" not found on this node')
        check_loggable(pod, container, options)
        write(b"")  # the answer begins (a follow with nothing printed yet waits on an open answer)
        budget = _Budget(options.limit_bytes)
        last = time.time()
        for line in backlog(container_log(pod, container, last), options):
            write(budget.take(rendered(line, options.timestamps)))
            if budget.spent:
                return
        if options.follow:
            self._follow(namespace, name, container, options, budget, last, write)

    def _follow(self, namespace: str, name: str, container: str, options: LogOptions, budget: _Budget,
                after: float, write: Callable[[bytes], None]) -> None:
        """Each line as it is printed, until the container ends, the pod goes, or the kubelet stops."""
        pod: dict[str, Any] | None = self.read_pod(namespace, name)
        while pod is not None and not budget.spent:
            due = next_tick(pod, container, after)
            if due is None or self.stopping.wait(max(0.0, due - time.time())):
                return
            pod = self.read_pod(namespace, name)
            if pod is None:
                return
            now = time.time()
            for line in container_log(pod, container, now):
                if line.at > after:
                    write(budget.take(rendered(line, options.timestamps)))
            after = now


def _handler(server: LogServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urlsplit(self.path)
            started = False

            def write(data: bytes) -> None:
                nonlocal started
                if not started:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.end_headers()
                    started = True
                self.wfile.write(data)
                self.wfile.flush()

            try:
                server.answer(url.path, url.query, write)
                if not started:
                    write(b"")
            except LogRequestError as e:
                if started:
                    return
                body = str(e).encode()
                self.send_response(e.status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                return  # the client went away (a follow ended by it)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            log.debug("logs: " + format, *args)

    return Handler
