"""`opsched up`: nats-server + a local control plane with simulated GPU nodes (or $KUBECONFIG)
+ the five services in one process. With --demo it submits the examples and shows them run."""
from __future__ import annotations

import argparse
import asyncio
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opsched.agents_local import LocalAgents
    from opsched.localcluster.controlplane import ControlPlane
    from opsched.natsserver import NatsCluster, NatsServer
    from opsched.tls import TlsFiles

DEFAULT_NODES = ["gpu-a100-0:2:A100", "gpu-a100-1:1:A100", "gpu-t4-0:1:T4"]
EXAMPLE_QUEUES = Path(__file__).resolve().parents[1] / "examples" / "queues.yaml"
ADMIN_TOKEN = "admin.token"  # the gateway's token for admin, in DATA_DIR/auth (with --gateway)
AUTOSCALE_QUEUES = EXAMPLE_QUEUES.with_name("queues-autoscale.yaml")  # `up --autoscale`'s default: pools from zero
AUTOSCALE_NODES = ["cpu-0:0"]  # with --autoscale: a CPU node (the CPU demo op, services' pods); GPU nodes come
METRICS_HOST, METRICS_PORT = "127.0.0.1", 8090  # `opsched up`'s /metrics, /healthz, /readyz (the web view: 8089)
ENV_KEY = "env.key"  # in the auth directory: the key sealing env values (``services.runtime.sealing``)
DEMO_EXAMPLES = ["train-2gpu.yaml", "train-1gpu.yaml", "train-1gpu.yaml", "eval-fails.yaml", "cpu-preprocess.yaml"]


def add_up_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", action="append", default=[], metavar="NAME:GPUS[:PRODUCT]",
                   help=f"simulated GPU node; GPUS 2x16Gi: 2 cards sharing GPU memory (default: {' '.join(DEFAULT_NODES)})")
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"),
                   help="use this cluster instead of the local control plane (default: $KUBECONFIG)")
    p.add_argument("--namespace", default="opsched")
    p.add_argument("--queues", type=Path, default=EXAMPLE_QUEUES if EXAMPLE_QUEUES.exists() else None,
                   help="queue configuration YAML (default: examples/queues.yaml)")
    p.add_argument("--autoscale", type=Path, nargs="?", const=AUTOSCALE_QUEUES, default=None, metavar="QUEUES_FILE",
                   help="the local cluster's GPU nodes come and go with its node pools (flavors' pool:, "
                        "docs/autoscaling.md): the queue configuration (instead of --queues; default "
                        f"examples/{AUTOSCALE_QUEUES.name}); nodes default to {' '.join(AUTOSCALE_NODES)}")
    p.add_argument("--prices", type=Path, help="price catalogue YAML")
    p.add_argument("--connections", type=Path, help="the notifier's connections file: sinks' urls and secrets, the "
                                                     "admin's subscriptions (docs/notifications.md)")
    p.add_argument("--nats-port", type=int, default=None, help="default: a free port (a cluster: PORT, PORT+1, ...)")
    p.add_argument("--nats-monitor-port", type=int, default=None, metavar="PORT",
                   help="serve nats-server's monitoring endpoint on 127.0.0.1:PORT (https with TLS; it needs no "
                        "password and lists connections and subscriptions: default off)")
    p.add_argument("--nats-cluster", type=int, default=0, metavar="N",
                   help="start a JetStream cluster of N nats-servers (3: streams and KV with 3 replicas, "
                        "losing one node loses nothing) instead of one")
    p.add_argument("--user", action="append", default=[], metavar="NAME:ROLE",
                   help="a NATS user for people or systems (ROLE: viewer, submitter, approver, admin); its password file "
                        "is <data dir>/auth/NAME.password. Always created: one user per service and 'admin'")
    p.add_argument("--no-auth", action="store_true", help="an open NATS server (every client is 'anonymous')")
    p.add_argument("--no-tls", dest="tls", action="store_false",
                   help="plain NATS connections (default: TLS with a CA generated into DATA_DIR/tls)")
    p.add_argument("--tls-host", action="append", default=[], metavar="NAME",
                   help="another name or address the NATS server certificate is valid for (besides localhost, "
                        "127.0.0.1)")
    p.add_argument("--fresh", action="store_true", help="wipe the data dir first")
    p.add_argument("--agents", type=int, default=1, metavar="N",
                   help="N agents, each a local control plane of its own with the same nodes and a dispatcher "
                        "(default 1; 2 without --queues uses examples/queues-agents.yaml)")
    p.add_argument("--demo", action="store_true", help="submit the examples, show them run, then exit "
                   "(with --ui: then stay up until Ctrl-C, so the page can still be looked at)")
    p.add_argument("--ui", action="store_true", help="serve the read-only web view too (`opsched ui`)")
    p.add_argument("--gateway", action="store_true", help="serve the HTTP gateway too (REST + CloudEvents, "
                   "docs/gateway.md), on 127.0.0.1; a token for admin in DATA_DIR/auth/admin.token")
    p.add_argument("--gateway-port", type=int, default=8787, metavar="PORT", help="the gateway's port (default 8787)")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help=f"serve /metrics (Prometheus), /healthz and /readyz of the services on 127.0.0.1:PORT "
                        f"(default {METRICS_PORT}, off if taken; 0: off)")
    from opsched.ui.options import add_ui_arguments
    add_ui_arguments(p, prefix="ui-")


def _say(message: str) -> None:
    print(f"[opsched up] {message}", file=sys.stderr, flush=True)


class AutoscaleError(ValueError):
    """``--autoscale`` combined with what it cannot work with."""


def _check_autoscale(args: argparse.Namespace) -> None:
    """``--autoscale`` drives the local cluster's simulated autoscaler from one queue file: refuse what contradicts it,
    naming the flag."""
    if args.kubeconfig:
        raise AutoscaleError("--autoscale simulates the local cluster's autoscaler: not with --kubeconfig (a real "
                             "cluster has its own: docs/autoscaling.md)")
    if args.agents > 1:
        raise AutoscaleError("--autoscale works with one agent (not --agents)")
    if args.queues not in (None, EXAMPLE_QUEUES) and Path(args.queues).resolve() != Path(args.autoscale).resolve():
        raise AutoscaleError("--autoscale QUEUES_FILE is the queue configuration: give it once, not also --queues")


def _nodes_text(nodes: Any) -> str:
    """The nodes as ``--node`` writes them; one without GPUs (the CPU node of ``--autoscale``) says so."""
    from opsched.localcluster.nodes import as_node_spec

    specs = [as_node_spec(n) for n in nodes]
    return ", ".join(f"{n.name} (no GPU)" if not n.gpus and not n.cards else f"{n.name}:{n.gpus_text}:{n.product}"
                     for n in specs)


def _pools_text(queues: Path) -> str:
    from opsched.localcluster.autoscaling import pools_from
    from opsched.rules.queues_file import load_queues

    pools = pools_from(load_queues(queues))
    return ", ".join(f"{p.name} ({p.min_nodes}..{p.max_nodes})" for p in pools) or "(none: no flavor has a pool)"


class Embedded:
    """Everything `opsched up` starts, in start order; ``close`` stops it in reverse."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.data_dir = Path(args.data_dir).resolve()
        self.nats: NatsServer | NatsCluster | None = None
        self.nats_url = ""
        self.replicas = 1
        self.tls: TlsFiles | None = None  # when TLS is on
        self.control_plane: ControlPlane | None = None
        self.kubelet: subprocess.Popen[bytes] | None = None
        self.kubeconfig: Path | None = Path(args.kubeconfig) if args.kubeconfig else None
        self.auth_dir: Path | None = None if args.no_auth else self.data_dir / "auth"
        self.agents: LocalAgents | None = None  # with --agents N > 1
        self.metrics_port: int | None = None  # where /metrics, /healthz and /readyz are served (None: off)
        if getattr(args, "autoscale", None) is not None:
            _check_autoscale(args)
            args.queues = args.autoscale
        if args.agents > 1 and args.queues == EXAMPLE_QUEUES:
            from opsched.agents_local import AGENTS_QUEUES
            args.queues = AGENTS_QUEUES

    def start(self) -> None:
        from opsched.natsserver import NatsServer

        if self.args.fresh and self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_port = self._metrics_port()
        self._ensure_tls()
        if self.args.nats_cluster:
            self._start_nats_cluster(self.args.nats_cluster)
        else:
            self.nats = server = NatsServer(self.data_dir / "nats", port=self.args.nats_port, tls=self.tls,
                                            authorization=self._authorization() or None,
                                            monitor_port=getattr(self.args, "nats_monitor_port", None)).start()
            self.nats_url = server.url
            _say(f"nats-server (JetStream) on {server.url}, store {self.data_dir / 'nats'}, "
                 f"monitoring {server.monitor_url or 'off'}")
        if self.kubeconfig is None:
            self._start_local_cluster()
        else:
            _say(f"using the cluster in {self.kubeconfig}")
        if self.args.agents > 1:
            self._start_agents()
        state, partial = self.data_dir / "up.json", self.data_dir / "up.json.partial"
        partial.write_text(json.dumps(
            {"nats_url": self.nats_url, "kubeconfig": str(self.kubeconfig), "pid": os.getpid(),
             "auth_dir": str(self.auth_dir) if self.auth_dir else None,
             "nats_ca": str(self.tls.ca) if self.tls else None,
             "queues_file": str(Path(self.args.queues).resolve()) if self.args.queues else None}))
        os.replace(partial, state)  # whole or absent: whoever waits for it to appear reads all of it
        self._write_context()
        if self.gateway:
            self._write_admin_token()

    @property
    def context_file(self) -> Path:
        from opsched import context

        return context.default_path(self.data_dir)

    def _write_context(self) -> None:
        """The context file clients connect with (``opsched.context``): the URL, the CA, ``admin`` and its
        password file (never the password)."""
        from opsched import context, natsauth

        password_file = natsauth.password_file(self.auth_dir, natsauth.ADMIN) if self.auth_dir else None
        context.write(self.context_file, url=self.nats_url, ca=self.tls.ca if self.tls else None,
                      user=natsauth.ADMIN if self.auth_dir else None, password_file=password_file,
                      description=f"opsched up in {self.data_dir}")

    def _metrics_port(self) -> int | None:
        """``--metrics-port`` (0: off), else ``METRICS_PORT``; the default taken by another process: off, said so;
        a port given that is taken: exit 2 before anything starts."""
        given = self.args.metrics_port
        if given == 0:
            return None
        port = METRICS_PORT if given is None else given
        try:
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the health server binds
                probe.bind((METRICS_HOST, port))
        except OSError as exc:
            if given is not None:
                _say(f"error: --metrics-port {port}: {exc.strerror} (choose another, or 0 for none)")
                raise SystemExit(2) from None
            _say(f"metrics port {port} is taken ({exc.strerror}): no /metrics (choose one with --metrics-port)")
            return None
        return port

    def _authorization(self) -> str:
        """The accounts and users (``natsauth.accounts_block``; "" without auth); their password files under ``auth_dir``."""
        from opsched import natsauth

        if self.auth_dir is None:
            return ""
        users = natsauth.users_of([natsauth.parse_user(u) for u in self.args.user])
        _say(f"NATS users (password files in {self.auth_dir}): {', '.join(f'{u.name} ({u.role})' for u in users)}")
        from opsched.agents_local import agent_names
        return natsauth.accounts_block(self.auth_dir, users, tuple(agent_names(self.args.agents)))

    async def connect(self, url: str, name: str):
        """A service's bus, as the service's own NATS user (the runner's ``connect``)."""
        from opsched import natsauth
        from opsched.bus.bus import Bus

        credentials = natsauth.credentials(self.auth_dir, natsauth.service_of(name)) if self.auth_dir else None
        return await Bus.connect(url, name, replicas=self.replicas, credentials=credentials,
                                 tls_ca_file=self.tls.ca if self.tls else None)

    def client_credentials(self):
        from opsched import natsauth

        return natsauth.credentials(self.auth_dir, natsauth.ADMIN) if self.auth_dir else None

    def _ensure_tls(self) -> None:
        from opsched.tls import ensure_tls

        if not self.args.tls:
            _say("TLS is off (--no-tls): NATS connections are plain")
            return
        self.tls = tls = ensure_tls(self.data_dir / "tls", tuple(self.args.tls_host))
        _say(f"TLS on every NATS connection; CA {tls.ca} (clients find it in the context file)")

    def _start_nats_cluster(self, n: int) -> None:
        from opsched.natsserver import NatsCluster

        store = self.data_dir / "nats-cluster"
        self.nats = cluster = NatsCluster(store, n=n, base_port=self.args.nats_port, tls=self.tls,
                                          authorization=self._authorization()).start()
        self.nats_url = cluster.urls
        self.replicas = min(n, 3)
        _say(f"NATS cluster of {n} nats-servers (JetStream, {self.replicas} replicas) on {self.nats_url}, "
             f"stores under {store}")

    def _start_local_cluster(self) -> None:
        from opsched.localcluster.controlplane import ControlPlane, ensure_built
        from opsched.localcluster.simkubelet import spawn
        from opsched.rules.pod_security import ENFORCE_LABEL

        ensure_built()
        workdir = self.data_dir / "k8s"
        shutil.rmtree(workdir, ignore_errors=True)  # a fresh cluster each time: pods do not outlive `up`
        self.control_plane = plane = ControlPlane(workdir).start()
        self.kubeconfig = plane.kubeconfig
        _say(f"kube-apiserver + kube-scheduler v1.20.2 at {plane.server} "
             f"(kubeconfig {self.kubeconfig})")
        for namespace, level in namespace_levels_of(self.args.namespace, self.args.queues).items():
            plane.ensure_namespace(namespace, {ENFORCE_LABEL: level})
        autoscale = getattr(self.args, "autoscale", None)
        nodes = self.args.node or (AUTOSCALE_NODES if autoscale is not None else DEFAULT_NODES)
        self.kubelet = spawn(self.kubeconfig, nodes, log_file=self.data_dir / "simkubelet.log", autoscale=autoscale)
        _say(f"simulated kubelet registered nodes (NAME:GPUS:PRODUCT): {_nodes_text(nodes)}")
        if autoscale is not None:
            _say(f"autoscaling pools {_pools_text(autoscale)} (simulated; log in {self.data_dir / 'simkubelet.log'})")

    def _start_agents(self) -> None:
        from opsched.agents_local import LocalAgents, agent_names

        if self.control_plane is None:
            raise SystemExit("opsched up: --agents starts local control planes; it cannot be used with --kubeconfig")
        namespaces = namespace_levels_of(self.args.namespace, self.args.queues)
        self.agents = LocalAgents(self.data_dir, agent_names(self.args.agents), self.args.node or DEFAULT_NODES,
                                  namespaces).start()

    def settings(self):
        from opsched.services.runtime.sealing import write_key
        from opsched.services.runtime.settings import Settings

        env_key = write_key(self.auth_dir / ENV_KEY) if self.auth_dir else None  # with the users: a secured bus
        return Settings(nats_url=self.nats_url, nats_ca_file=self.tls.ca if self.tls else None, env_key_file=env_key,
                        stream_replicas=self.replicas, kubeconfig=self.kubeconfig, namespace=self.args.namespace,
                        queues_file=self.args.queues, prices_file=self.args.prices,
                        connections_file=self.args.connections,
                        log_format="json" if self.args.demo else "auto",
                        health_port=self.metrics_port, health_host=METRICS_HOST, **self._gateway_settings())

    @property
    def gateway(self) -> bool:
        return bool(getattr(self.args, "gateway", False))

    @property
    def service_names(self) -> tuple[str, ...]:
        """The services this `opsched up` serves in its process: the five, and the gateway with ``--gateway``."""
        from opsched.proto import permissions

        return (*SERVICES, permissions.GATEWAY) if self.gateway else SERVICES

    def _gateway_settings(self) -> dict[str, Any]:
        """The gateway's (``--gateway``): on loopback, fronting ``admin`` and every ``--user``, HTTPS with the NATS
        server's certificate (same CA) unless ``--no-tls``, its tokens in ``DATA_DIR/auth``."""
        from opsched import natsauth
        from opsched.gateway_tokens import FILE_NAME

        if not self.gateway:
            return {}
        users = natsauth.users_of([natsauth.parse_user(u) for u in self.args.user])
        tls = {"gateway_tls_cert": self.tls.cert, "gateway_tls_key": self.tls.key} if self.tls else {}
        return {"gateway_port": self.args.gateway_port, "gateway_tokens_file": self.data_dir / "auth" / FILE_NAME,
                "gateway_users": [f"{name}:{role}" for name, role in natsauth.fronted(users)], **tls}

    def _write_admin_token(self) -> None:
        """A gateway token for ``admin`` in ``DATA_DIR/auth/admin.token``, made once (kept across restarts)."""
        from opsched import natsauth
        from opsched.gateway_tokens import FILE_NAME, TokenStore

        admin_token = self.data_dir / "auth" / ADMIN_TOKEN
        if not admin_token.exists():
            _, token = TokenStore(self.data_dir / "auth" / FILE_NAME).create(natsauth.ADMIN)
            natsauth.write_private(admin_token, token + "\n")

    def close(self) -> None:
        from opsched.localcluster.simkubelet import terminate

        if self.agents is not None:
            self.agents.close()
        if self.kubelet is not None:
            terminate(self.kubelet)
        if self.control_plane is not None:
            self.control_plane.stop()
        if self.nats is not None:
            self.nats.stop()
        (self.data_dir / "up.json").unlink(missing_ok=True)
        self.context_file.unlink(missing_ok=True)


def namespace_levels_of(default: str, queues: Path | None) -> dict[str, str]:
    """Where ops may run — the default namespace and each queue's own — each with its Pod Security level; a file
    admission will refuse: the default namespace only (the services say what is wrong with the file). `opsched up`
    creates them as the admin: the dispatcher creates none."""
    from opsched.rules.pod_security import namespace_levels
    from opsched.rules.queues_file import QueuesConfigError, load_queues

    try:
        config = load_queues(queues)
    except (QueuesConfigError, OSError):
        config = load_queues(None)
    return dict(namespace_levels(config, default))


SERVICES = ("admission", "cost", "cache", "dispatcher", "notifier")


def build_services(settings, names: tuple[str, ...] = SERVICES):
    import importlib

    return [importlib.import_module(f"opsched.services.{name}.service").build(settings) for name in names]


class ServicesInProcess:
    """Some or all of the five services serving in this process (as `opsched up`, the tests and the
    benchmarks run them): ``start`` returns once each is ready, ``close`` drains them. ``connect(url, name)``
    opens each service's bus connection (default: ``Bus.connect`` to ``settings.nats_url``)."""

    def __init__(self, settings, names: tuple[str, ...] = SERVICES, connect=None) -> None:
        self.settings = settings
        self.connect = connect
        self.services = build_services(settings, names)
        self.stop = asyncio.Event()
        self.task: asyncio.Task | None = None

    async def start(self, timeout: float = 30.0) -> "ServicesInProcess":
        from opsched.services.runtime.runner import serve

        self.task = asyncio.create_task(serve(self.services, self.settings, self.stop, self.connect))
        waits = {asyncio.create_task(s.ready.wait()) for s in self.services}
        deadline = asyncio.get_running_loop().time() + timeout
        while waits:
            left = max(deadline - asyncio.get_running_loop().time(), 0)
            done, _ = await asyncio.wait({self.task, *waits}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            waits -= done
            if self.task in done or not done:
                for w in waits:
                    w.cancel()
            if self.task in done:
                self.task.result()  # raises the startup error
                raise RuntimeError("the services stopped before they were all ready")
            if not done:
                stuck = "; ".join(f"{s.name}: {s.starting}" for s in self.services if not s.ready.is_set())
                raise TimeoutError(f"services not ready after {timeout:.0f} s ({stuck})")
        return self

    def service(self, name: str):
        return next(s for s in self.services if s.name == name)

    async def wait(self) -> None:
        if self.task:
            await self.task

    async def close(self, timeout: float = 20.0) -> None:
        self.stop.set()
        if self.task:
            try:
                await asyncio.wait_for(self.task, timeout=timeout)
            except asyncio.TimeoutError:
                self.task.cancel()


async def _start_services(embedded: Embedded) -> ServicesInProcess:
    """The services, serving ``/metrics`` on the metrics port; the default port taken since it was probed (another
    `opsched up` starting beside this one): off, said so, as when the probe finds it taken."""
    try:
        return await ServicesInProcess(embedded.settings(), embedded.service_names, embedded.connect).start()
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE or embedded.args.metrics_port is not None or embedded.metrics_port is None:
            raise
        _say(f"metrics port {embedded.metrics_port} was taken as the services started ({exc.strerror}): no /metrics "
             "(choose one with --metrics-port)")
        embedded.metrics_port = None
        return await ServicesInProcess(embedded.settings(), embedded.service_names, embedded.connect).start()


async def _serve(embedded: Embedded) -> int:
    from opsched.context import CONTEXT_ENV

    running = await _start_services(embedded)
    others: list[Any] = []
    if embedded.agents is not None:
        from opsched.agents_local import start_dispatchers
        others = await start_dispatchers(embedded.agents, embedded.settings(), embedded.connect, running.stop)
    if embedded.metrics_port is not None:
        _say(f"metrics (Prometheus) at http://{METRICS_HOST}:{embedded.metrics_port}/metrics, "
             "health at /healthz and /readyz (--metrics-port: another port, 0: off)")
    _say(f"{', '.join(SERVICES[:-1])} and {SERVICES[-1]} are serving; try: opsched submit examples/train-1gpu.yaml --wait")
    _say(f"other shells and the SDK (Client.from_context()): export {CONTEXT_ENV}={embedded.context_file}")
    if embedded.gateway:
        from opsched.proto import permissions

        _say(f"the gateway is at {running.service(permissions.GATEWAY).url} (token for admin: "
             f"{embedded.data_dir / 'auth' / ADMIN_TOKEN}; more: opsched tokens create USER)")
    try:
        view = await _start_view(embedded) if embedded.args.ui else None
    except OSError as exc:  # its port taken: said plainly, everything stopped
        _say(f"error: {exc} (choose another with --ui-port)")
        running.stop.set()
        await running.wait()
        return 2
    code = 0
    try:
        if embedded.args.demo:
            from opsched.demo import run_demo

            code = await run_demo(embedded.nats_url, embedded.kubeconfig, embedded.args.namespace, DEMO_EXAMPLES,
                                  credentials=embedded.client_credentials(),
                                  ca_file=embedded.tls.ca if embedded.tls else None,
                                  agents=embedded.agents.kubeconfigs if embedded.agents else {})
            if view is None:
                running.stop.set()
            else:
                _say(f"the demo has ended; everything stays up for the web view at {view.url} until Ctrl-C")
        await running.wait()
        for other in others:
            await other.wait()
    finally:
        if view is not None:
            await view.close()
            await view.client.close()
    return code


async def _start_view(embedded: Embedded):
    """The web view, reading the bus as the admin user (as the CLI of this `opsched up` does)."""
    from opsched.client import Client
    from opsched.ui.server import WebView, say_serving

    client = await Client.connect(embedded.nats_url, "opsched-ui", credentials=embedded.client_credentials(),
                                  ca_file=embedded.tls.ca if embedded.tls else None)
    try:
        view = await WebView(client, embedded.args.ui_host, embedded.args.ui_port).start()
    except BaseException:
        await client.close()
        raise
    say_serving(view)
    return view


def run_up(args: argparse.Namespace) -> int:
    from opsched.bus import logging as oplog
    from opsched.bus import tracing
    from opsched.services.runtime import eventloop

    settings_log = "json" if args.demo else "auto"
    oplog.configure(settings_log, "warning" if args.demo else "info")
    tracing.configure_or_exit()  # OTEL_TRACES_EXPORTER: the services' spans (docs/observability.md, "Traces")
    try:
        embedded = Embedded(args)
    except AutoscaleError as exc:
        _say(f"error: {exc}")
        return 2
    try:
        embedded.start()
        return eventloop.run(_serve(embedded), embedded.settings().event_loop)
    except KeyboardInterrupt:
        return 130
    finally:
        _say("stopping")
        embedded.close()
        tracing.shutdown()
