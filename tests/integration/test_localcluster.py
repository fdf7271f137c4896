"""The local control plane and the simulated kubelet, end to end with the real kube-scheduler."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from opsched.localcluster.nodes import NOT_READY_TAINTS

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"


def make_pod(name: str, command: list[str], gpus: int = 0, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "command": command}
    if gpus:
        container["resources"] = {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}
    return {"metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [container], **spec}}


def get_pod(core: client.CoreV1Api, ns: str, name: str) -> client.V1Pod | None:
    try:
        return core.read_namespaced_pod(name, ns)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def phase_is(core: client.CoreV1Api, ns: str, name: str, *phases: str):
    def check() -> client.V1Pod | None:
        pod = get_pod(core, ns, name)
        return pod if pod is not None and pod.status.phase in phases else None

    return check


def bound_node(core: client.CoreV1Api, ns: str, name: str):
    def check() -> str | None:
        pod = get_pod(core, ns, name)
        return pod.spec.node_name if pod is not None else None

    return check


def unschedulable(core: client.CoreV1Api, ns: str, name: str):
    def check() -> client.V1PodCondition | None:
        pod = get_pod(core, ns, name)
        for c in (pod.status.conditions or []) if pod else []:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                return c
        return None

    return check


def test_nodes_register_with_gpus_and_no_not_ready_taint(sim_nodes, core_v1):
    sim_nodes(("gpu-a", 2, "A100"), ("gpu-b", 1, "T4"))
    for name, gpus, product in (("gpu-a", "2", "A100"), ("gpu-b", "1", "T4")):
        node = core_v1.read_node(name)
        assert node.status.allocatable[GPU] == gpus
        assert node.status.capacity[GPU] == gpus
        assert node.metadata.labels["nvidia.com/gpu.product"] == product
        assert node.metadata.labels["opsched.io/simulated"] == "true"
        assert not [t for t in node.spec.taints or [] if t.key in NOT_READY_TAINTS]
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def test_gpu_pods_queue_until_a_gpu_frees_up(sim_nodes, core_v1, k8s_namespace, wait_for):
    ns = k8s_namespace
    sim_nodes(("gpu-a", 2, "A100"), ("gpu-b", 1, "T4"))
    core_v1.create_namespaced_pod(ns, make_pod("a", ["sh", "-c", "sleep 60"], gpus=2))
    assert wait_for(bound_node(core_v1, ns, "a"), message="a bound") == "gpu-a"
    core_v1.create_namespaced_pod(ns, make_pod("b", ["sh", "-c", "sleep 1.5"], gpus=1))
    assert wait_for(bound_node(core_v1, ns, "b"), message="b bound") == "gpu-b"

    core_v1.create_namespaced_pod(ns, make_pod("c", ["sh", "-c", "sleep 0.5"], gpus=1))
    condition = wait_for(unschedulable(core_v1, ns, "c"), message="c unschedulable")
    assert f"Insufficient {GPU}" in condition.message
    assert get_pod(core_v1, ns, "c").spec.node_name is None

    wait_for(phase_is(core_v1, ns, "b", "Succeeded"), message="b Succeeded")
    assert wait_for(bound_node(core_v1, ns, "c"), timeout=15, message="c bound") == "gpu-b"
    wait_for(phase_is(core_v1, ns, "c", "Succeeded"), message="c Succeeded")
    assert get_pod(core_v1, ns, "a").status.phase == "Running"


def test_nonzero_exit_fails_the_pod(sim_nodes, core_v1, k8s_namespace, wait_for):
    sim_nodes(("gpu-a", 1, "A100"))
    core_v1.create_namespaced_pod(k8s_namespace, make_pod("fails", ["sh", "-c", "exit 1"]))
    pod = wait_for(phase_is(core_v1, k8s_namespace, "fails", "Failed", "Succeeded"), message="pod finished")
    assert pod.status.phase == "Failed"
    terminated = pod.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 1
    assert terminated.reason == "Error"


def test_active_deadline_exceeded(sim_nodes, core_v1, k8s_namespace, wait_for):
    sim_nodes(("gpu-a", 1, "A100"))
    pod = make_pod("slow", ["sh", "-c", "sleep 30"], activeDeadlineSeconds=1)
    core_v1.create_namespaced_pod(k8s_namespace, pod)
    done = wait_for(phase_is(core_v1, k8s_namespace, "slow", "Failed", "Succeeded"), message="pod finished")
    assert done.status.phase == "Failed"
    assert done.status.reason == "DeadlineExceeded"
    assert "deadline" in done.status.message


def test_graceful_delete_of_a_running_pod_completes(sim_nodes, core_v1, k8s_namespace, wait_for):
    sim_nodes(("gpu-a", 1, "A100"))
    core_v1.create_namespaced_pod(k8s_namespace, make_pod("victim", ["sh", "-c", "sleep 30"]))
    wait_for(phase_is(core_v1, k8s_namespace, "victim", "Running"), message="pod Running")
    core_v1.delete_namespaced_pod("victim", k8s_namespace)  # default grace period: 30 s
    wait_for(lambda: get_pod(core_v1, k8s_namespace, "victim") is None, timeout=10, message="pod gone")


def test_a_start_stored_whose_answer_was_lost_still_runs_to_its_end(sim_nodes, core_v1, k8s_namespace, wait_for):
    """The API server stored the kubelet's Running and died before it answered: the retried start finds
    the pod Running already, and the pod still finishes (it used to stay Running forever)."""
    sim_nodes(("gpu-a", 1, "A100"), start_delay=1.5)
    core_v1.create_namespaced_pod(k8s_namespace, make_pod("lost-answer", ["sh", "-c", "sleep 0.2"],
                                                         nodeName="gpu-a"))
    status = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}  # as if the kubelet's patch was stored
    core_v1.patch_namespaced_pod_status("lost-answer", k8s_namespace, {"status": status})
    wait_for(phase_is(core_v1, k8s_namespace, "lost-answer", "Succeeded"), timeout=15, message="pod Succeeded")
