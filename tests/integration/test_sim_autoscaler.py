"""The simulated autoscaler against the real control plane (no opsched services): a pod that no node takes brings a
node of its pool; once the node is idle it is tainted ``ToBeDeletedByClusterAutoscaler``, then removed."""
from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from opsched.localcluster.autoscaling import POOL_LABEL, TO_BE_DELETED_TAINT
from tests.integration.kube_reads import node_or_none

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"


def queues_file(tmp_path: Path, tag: str, **pool: Any) -> Path:
    fields = {"maxNodes": 2, "provisioningSeconds": 1, "scaleDownUnneededSeconds": 2, **pool}
    lines = "\n".join(f"      {k}: {v}" for k, v in fields.items())
    path = tmp_path / "queues.yaml"
    path.write_text(f"""\
flavors:
  - name: a100
    nodeLabels: {{nvidia.com/gpu.product: A100, opsched.io/test-pool: "{tag}"}}
    pool:
      name: a100
      allocatable: {{nvidia.com/gpu: 1, cpu: "8", memory: 64Gi}}
{lines}
""")
    return path


def gpu_pod(name: str, tag: str, seconds: float = 1.0) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {"opsched.io/sim-runtime-seconds": str(seconds)}},
            "spec": {"restartPolicy": "Never",
                     "nodeSelector": {"nvidia.com/gpu.product": "A100", "opsched.io/test-pool": tag},
                     "containers": [{"name": "main", "image": "busybox", "command": ["true"],
                                     "resources": {"limits": {GPU: "1"}}}]}}


def pod_of(core: client.CoreV1Api, ns: str, name: str) -> client.V1Pod:
    return core.read_namespaced_pod(name, ns)


def test_an_unschedulable_pod_brings_a_node_that_goes_when_idle(sim_nodes, core_v1, k8s_namespace, wait_for,
                                                                 tmp_path):
    tag = secrets.token_hex(4)
    sim_nodes(f"cpu-{tag}:0", autoscale=queues_file(tmp_path, tag), delete_nodes_on_exit=True)
    core_v1.create_namespaced_pod(k8s_namespace, gpu_pod("train", tag, seconds=30))

    def registered() -> client.V1Node | None:   # created, then its status (allocatable) set
        node = node_or_none(core_v1, "a100-0")
        return node if node is not None and node.status and node.status.allocatable else None
    node = wait_for(registered, timeout=30, message="node a100-0 with its allocatable")
    assert node.metadata.labels["opsched.io/test-pool"] == tag
    assert node.metadata.labels[POOL_LABEL] == "a100"
    assert node.status.allocatable[GPU] == "1"
    wait_for(lambda: pod_of(core_v1, k8s_namespace, "train").status.phase == "Running", timeout=30,
             message="the pod Running")
    assert pod_of(core_v1, k8s_namespace, "train").spec.node_name == "a100-0"
    assert node_or_none(core_v1, "a100-1") is None  # one pod, one node

    core_v1.delete_namespaced_pod("train", k8s_namespace)

    def tainted() -> bool:
        current = node_or_none(core_v1, "a100-0")
        return current is None or any(t.key == TO_BE_DELETED_TAINT for t in current.spec.taints or [])

    wait_for(tainted, timeout=30, message=f"a100-0 tainted {TO_BE_DELETED_TAINT}")
    wait_for(lambda: node_or_none(core_v1, "a100-0") is None, timeout=30, message="a100-0 removed")


def test_min_nodes_come_at_start(sim_nodes, core_v1, k8s_namespace, wait_for, tmp_path):
    tag = secrets.token_hex(4)
    sim_nodes(f"cpu-{tag}:0", autoscale=queues_file(tmp_path, tag, minNodes=1), delete_nodes_on_exit=True)
    wait_for(lambda: node_or_none(core_v1, "a100-0"), timeout=30, message="the minNodes node a100-0")
    core_v1.create_namespaced_pod(k8s_namespace, gpu_pod("quick", tag))
    wait_for(lambda: pod_of(core_v1, k8s_namespace, "quick").status.phase == "Succeeded", timeout=30,
             message="the pod Succeeded on the minNodes node")
    assert pod_of(core_v1, k8s_namespace, "quick").spec.node_name == "a100-0"
