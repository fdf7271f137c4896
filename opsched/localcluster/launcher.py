"""Start the simulated kubelet as its own process and wait until its nodes are Ready (for tests and
`opsched up`); stop it again."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubernetes import client, config

from opsched.children import die_with_parent
from opsched.localcluster.nodes import (
    NodeResources,
    NodeSpec,
    as_node_spec,
    node_ready_and_untainted,
)


def spawn(kubeconfig: str | os.PathLike[str], nodes: Sequence[NodeSpec | str | tuple[Any, ...]], *,
          gpu_resource: str = NodeResources.gpu_resource, cpu: str = NodeResources.cpu,
          memory: str = NodeResources.memory, start_delay: float = 0.2, delete_nodes_on_exit: bool = False,
          log_file: str | os.PathLike[str] | None = None, timeout: float = 30.0,
          autoscale: str | os.PathLike[str] | None = None,
          stock: dict[str, int] | None = None) -> subprocess.Popen[bytes]:
    """Start the CLI in a subprocess; return once every node is Ready and untainted.

    ``autoscale``: a queue file whose node pools the simulated autoscaler grows (``stock``: ``--stock`` per pool);
    only the static ``nodes`` are waited for.

    Its log goes to ``log_file`` (else to this process's stderr). Stop it with ``terminate()``.
    """
    specs = [as_node_spec(n) for n in nodes]
    argv = [sys.executable, "-m", "opsched.localcluster.simkubelet", "--kubeconfig", os.fspath(kubeconfig),
            "--resource", gpu_resource, "--cpu", cpu, "--memory", memory, "--start-delay", str(start_delay)]
    argv += [a for s in specs for a in ("--node", f"{s.name}:{s.gpus_text}:{s.product}")]
    argv += ["--delete-nodes-on-exit"] if delete_nodes_on_exit else []
    argv += ["--autoscale", os.fspath(autoscale)] if autoscale is not None else []
    argv += [a for pool, n in sorted((stock or {}).items()) for a in ("--stock", f"{pool}={n}")]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                      env.get("PYTHONPATH")]))
    out = open(log_file, "ab") if log_file is not None else None  # noqa: SIM115
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT if out else None,
                                preexec_fn=die_with_parent,
                                env=env)
    finally:
        if out is not None:
            out.close()
    try:
        _wait_nodes_ready(kubeconfig, [s.name for s in specs], proc, timeout, log_file)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


def _wait_nodes_ready(kubeconfig: str | os.PathLike[str], names: list[str], proc: subprocess.Popen[bytes],
                      timeout: float, log_file: str | os.PathLike[str] | None) -> None:
    from opsched.localcluster.controlplane import tail

    def failure(what: str) -> RuntimeError:
        where = f"\n--- last lines of {log_file} ---\n{tail(Path(log_file))}" if log_file else ""
        return RuntimeError(f"simulated kubelet for {', '.join(names)}: {what}{where}")

    deadline = time.monotonic() + timeout
    with config.new_client_from_config(config_file=os.fspath(kubeconfig)) as api:
        core = client.CoreV1Api(api)
        while True:
            if proc.poll() is not None:
                raise failure(f"exited with code {proc.returncode}")
            nodes = {n.metadata.name: n for n in core.list_node().items}
            if all(name in nodes and node_ready_and_untainted(nodes[name]) for name in names):
                return
            if time.monotonic() > deadline:
                raise failure(f"nodes not Ready and untainted within {timeout}s")
            time.sleep(0.1)


def terminate(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM a spawned simulated kubelet; SIGKILL it if it does not exit in ``timeout``."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


