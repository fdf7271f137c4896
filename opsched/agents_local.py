"""`opsched up --agents N`: agents ``agent-2`` ... ``agent-N`` beside the default one, each a local control plane
of its own (etcd, kube-apiserver, kube-scheduler) with the same simulated GPU nodes, and a dispatcher
(``OPSCHED_AGENT=agent-<i>``) in this process. The queue configuration must declare them (``--agents 2`` without
``--queues``: ``examples/queues-agents.yaml``)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

AGENTS_QUEUES = Path(__file__).resolve().parents[1] / "examples" / "queues-agents.yaml"


def agent_names(count: int) -> list[str]:
    return [f"agent-{i}" for i in range(2, count + 1)]


class LocalAgents:
    """The extra agents' clusters: started in order, stopped in reverse."""

    def __init__(self, data_dir: Path, names: list[str], nodes: list[str], namespaces: dict[str, str]) -> None:
        self.data_dir, self.names, self.nodes, self.namespaces = data_dir, names, nodes, namespaces
        self.planes: dict[str, Any] = {}
        self.kubelets: list[Any] = []

    @property
    def kubeconfigs(self) -> dict[str, Path]:
        return {name: plane.kubeconfig for name, plane in self.planes.items()}

    def start(self) -> "LocalAgents":
        from opsched.localcluster.controlplane import ControlPlane
        from opsched.localcluster.simkubelet import spawn
        from opsched.rules.pod_security import ENFORCE_LABEL

        for name in self.names:
            workdir = self.data_dir / f"k8s-{name}"
            shutil.rmtree(workdir, ignore_errors=True)
            plane = self.planes[name] = ControlPlane(workdir).start()
            for namespace, level in self.namespaces.items():
                plane.ensure_namespace(namespace, {ENFORCE_LABEL: level})
            self.kubelets.append(spawn(plane.kubeconfig, self.nodes, log_file=self.data_dir / f"simkubelet-{name}.log"))
            print(f"[opsched up] {name}: its own kube-apiserver + kube-scheduler at {plane.server} (kubeconfig "
                  f"{plane.kubeconfig}), nodes {', '.join(self.nodes)}", file=sys.stderr, flush=True)
        return self

    def close(self) -> None:
        from opsched.localcluster.simkubelet import terminate

        for kubelet in self.kubelets:
            terminate(kubelet)
        for plane in reversed(list(self.planes.values())):
            plane.stop()


async def start_dispatchers(agents: LocalAgents, settings: Any, connect: Any, stop: Any) -> list[Any]:
    """One dispatcher per extra agent, on its own cluster; ``stop`` (shared with the other services) ends them."""
    from opsched.embedded import ServicesInProcess

    running = []
    for name, kubeconfig in agents.kubeconfigs.items():
        # no health port of its own: `opsched up`'s metrics port serves the four main services
        dispatcher = ServicesInProcess(settings.model_copy(update={"agent": name, "kubeconfig": kubeconfig,
                                                                   "health_port": None}),
                                       ("dispatcher",), connect)
        dispatcher.stop = stop  # one signal handler (the last serve's) stops them all
        running.append(await dispatcher.start())
    return running
