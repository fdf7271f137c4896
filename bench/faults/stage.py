"""The stage a fault is played on: NATS (one server or a 3-node JetStream cluster), the real control plane
with simulated GPU nodes of its own, the four services as processes (any number of replicas each), and
the harness's own connection (a client to submit, the op stream followed, a pod ledger).

NATS is configured as `opsched up` configures it by default: TLS (a CA made in the stage's directory) and the
generated users (``opsched.natsauth``), each service connecting as its own, the harness as ``admin``."""
from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.faults.opwatch import OpWatch
from bench.faults.pods import PodLedger
from bench.faults.processes import SERVICES, ServiceProcesses
from opsched import natsauth
from opsched.bus.bus import Bus
from opsched.client import Client
from opsched.localcluster.controlplane import ControlPlane
from opsched.localcluster.nodes import delete_nodes
from opsched.localcluster.simkubelet import spawn, terminate
from opsched.natsserver import NatsCluster, NatsServer
from opsched.tls import ensure_tls

QUEUES = """\
defaultQueue: default
retryBackoff: {{baseSeconds: 0, factor: 2, maxSeconds: 0}}
flavors:
  - {{name: gpu, nodeLabels: {{nvidia.com/gpu.product: {product}}}}}
queues:
  - name: default
    resources: [{{resource: nvidia.com/gpu, flavors: [{{name: gpu, nominal: {gpus}}}]}}]
"""


@dataclass
class Layout:
    """What to start: NATS nodes (1, or 3 for a cluster), replicas per service, simulated GPUs."""

    nats_nodes: int = 1
    replicas: dict[str, int] = field(default_factory=lambda: {name: 1 for name in SERVICES})
    nodes: int = 2
    gpus_per_node: int = 16
    pod_start_s: float = 0.05  # bound -> Running, in the simulated kubelet
    reconcile_interval_s: float = 2.0
    reconcile_grace_s: float = 4.0
    ack_wait_s: float = 30.0  # what messages held by a killed replica wait before another gets them
    fetch_batch: int = 64  # messages a replica takes at once (and holds when it is killed)
    backoff_cap_s: float = 10.0  # the longest wait between tries of a dependency (below the ack wait)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


class Stage:
    """``await Stage(root, control_plane, layout).start()``; ``await stage.close()`` stops it all."""

    def __init__(self, root: Path, control_plane: ControlPlane, layout: Layout) -> None:
        self.root = Path(root)
        self.control_plane = control_plane
        self.layout = layout
        tag = secrets.token_hex(3)
        self.namespace = f"faults-{tag}"
        self.product = f"sim-{tag}"
        self.node_names = [f"gpu-{tag}-{i}" for i in range(layout.nodes)]
        self.tls = ensure_tls(self.root / "tls")
        self.auth_dir = self.root / "auth"
        users = natsauth.accounts_block(self.auth_dir, natsauth.users_of([]))
        self.nats: NatsServer | NatsCluster = (
            NatsCluster(self.root / "nats-cluster", n=layout.nats_nodes, authorization=users, tls=self.tls)
            if layout.nats_nodes > 1 else NatsServer(self.root / "nats", authorization=users, tls=self.tls))
        self.services: ServiceProcesses | None = None
        self.kubelet: subprocess.Popen[bytes] | None = None
        self.bus: Bus | None = None
        self.client: Client | None = None
        self.ops: OpWatch | None = None
        self.pods: PodLedger | None = None

    @property
    def nats_url(self) -> str:
        return self.nats.urls if isinstance(self.nats, NatsCluster) else self.nats.url

    @property
    def replicas(self) -> int:
        return min(self.layout.nats_nodes, 3)

    async def start(self) -> "Stage":
        self.nats.start()  # processes start on this thread: see bench.faults.kinds
        self._start_kubernetes_side()
        # the observer (stream leaders, every event) is in the services' account, as admission's user: a client
        # reads by direct gets only; the submitter is admin, a client as `opsched up`'s CLI is
        self.bus = await Bus.connect(self.nats_url, "faults-harness", replicas=self.replicas,
                                     credentials=natsauth.credentials(self.auth_dir, "admission"),
                                     tls_ca_file=self.tls.ca)
        await self.bus.ensure_streams()
        self.client = Client(await Bus.connect(self.nats_url, "faults-client", replicas=self.replicas,
                                               credentials=natsauth.credentials(self.auth_dir, natsauth.ADMIN),
                                               tls_ca_file=self.tls.ca))
        self.ops = await OpWatch(self.bus).start()
        self.services = ServiceProcesses(self._env(), self.root / "logs", self.user_env)
        await self.services.until_ready(self.services.start(self.layout.replicas))
        return self

    def _start_kubernetes_side(self) -> None:
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        self.control_plane.ensure_namespace(self.namespace)
        nodes = [(name, self.layout.gpus_per_node, self.product) for name in self.node_names]
        self.kubelet = spawn(self.control_plane.kubeconfig, nodes, start_delay=self.layout.pod_start_s,
                             log_file=self.root / "logs" / "simkubelet.log")
        self.pods = PodLedger(self.control_plane.kubeconfig, self.namespace).start()

    def user_env(self, user: str) -> dict[str, str]:
        """What a process connecting as ``user`` (a service, or ``admin``: the CLI) adds to its environment."""
        return {"OPSCHED_NATS_USER": user, "OPSCHED_NATS_CA": str(self.tls.ca),
                "OPSCHED_NATS_PASSWORD_FILE": str(natsauth.password_file(self.auth_dir, user))}

    def _env(self) -> dict[str, str]:
        queues = self.root / "queues.yaml"
        queues.write_text(QUEUES.format(product=self.product, gpus=self.layout.gpus))
        return {**os.environ, "NATS_URL": self.nats_url, "OPSCHED_KUBECONFIG": str(self.control_plane.kubeconfig),
                "OPSCHED_NAMESPACE": self.namespace, "OPSCHED_QUEUES_FILE": str(queues),
                "OPSCHED_STREAM_REPLICAS": str(self.replicas), "OPSCHED_LOG_FORMAT": "json",
                "OPSCHED_VERIFY_SNAPSHOT": "0",
                "OPSCHED_RECONCILE_INTERVAL_S": str(self.layout.reconcile_interval_s),
                "OPSCHED_RECONCILE_GRACE_S": str(self.layout.reconcile_grace_s),
                "OPSCHED_ACK_WAIT_S": str(self.layout.ack_wait_s),
                "OPSCHED_FETCH_BATCH": str(self.layout.fetch_batch),
                "OPSCHED_DEPENDENCY_BACKOFF_CAP_S": str(self.layout.backoff_cap_s)}

    async def close(self) -> dict[str, Any]:
        """Stop everything; the services' exit codes (SIGTERM drains: 0 each)."""
        codes: dict[str, Any] = {}
        if self.services is not None:
            codes = await asyncio.to_thread(self.services.stop_all)
        if self.ops is not None:
            await self.ops.stop()
        if self.client is not None:
            await self.client.close()
        if self.bus is not None:
            await self.bus.close()
        await asyncio.to_thread(self._stop_kubernetes_side)
        self.nats.stop()
        return codes

    def _stop_kubernetes_side(self) -> None:
        if self.pods is not None:
            self.pods.stop()
        if self.kubelet is not None:
            terminate(self.kubelet)
        with self.control_plane.api_client() as api:
            core = client.CoreV1Api(api)
            try:
                core.delete_collection_namespaced_pod(self.namespace, grace_period_seconds=0)
                delete_nodes(core, self.node_names)
            except Exception:  # noqa: BLE001 - best effort: the API server may be the thing that failed
                pass
