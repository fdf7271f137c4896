"""Fixtures for integration tests against a real local Kubernetes control plane.

``control_plane`` (session, in tests/conftest.py: the fault suite shares it) starts etcd + kube-apiserver +
kube-scheduler v1.20.2 on loopback; ``k8s_namespace`` gives each test a fresh namespace; ``sim_nodes(...)`` starts a simulated
kubelet for GPU nodes. Wait on conditions with the ``wait_for`` fixture, never with bare sleeps.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client

from opsched.localcluster.controlplane import ControlPlane
from opsched.localcluster.nodes import as_node_spec, delete_nodes
from opsched.localcluster.simkubelet import spawn, terminate

T = TypeVar("T")


def _wait_for(predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.05,
              message: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; return that, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message} (last value: {value!r})")
        time.sleep(interval)


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    """``wait_for(predicate, timeout=10, interval=0.05, message=...)``: poll until truthy."""
    return _wait_for


@pytest.fixture(scope="session")
def k8s_api(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    api = control_plane.api_client()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="session")
def core_v1(k8s_api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(k8s_api)


@pytest.fixture
def k8s_namespace(control_plane: ControlPlane, core_v1: client.CoreV1Api) -> Iterator[str]:
    """A fresh namespace ``t-<hex>``; its pods are force-deleted afterwards (the namespace stays:
    deleting namespaces needs kube-controller-manager)."""
    name = f"t-{secrets.token_hex(4)}"
    control_plane.ensure_namespace(name)
    yield name
    core_v1.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    _wait_for(lambda: not core_v1.list_namespaced_pod(name).items, timeout=15,
              message=f"pods in {name} to be deleted")


@pytest.fixture
def sim_nodes(control_plane: ControlPlane, core_v1: client.CoreV1Api,
              tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Factory: ``sim_nodes(("gpu-a", 2, "A100"), ("gpu-b", 1, "T4"), start_delay=0.2)`` spawns a
    simulated kubelet and returns once the nodes are Ready; they are deleted afterwards."""
    procs: list[Any] = []
    names: list[str] = []

    def start(*nodes: Any, **kwargs: Any) -> Any:
        specs = [as_node_spec(n) for n in nodes]
        names.extend(s.name for s in specs)
        log_file = tmp_path / f"simkubelet-{len(procs)}.log"
        proc = spawn(control_plane.kubeconfig, specs, log_file=log_file, **kwargs)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        terminate(proc)
    delete_nodes(core_v1, names)
