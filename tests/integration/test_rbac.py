"""The dispatcher's RBAC in deploy/base/, applied with kubectl to the real API server (authorization
mode RBAC; the test's kubeconfig is system:masters): its ServiceAccount may do exactly what its code does
with pods in its queue namespaces, read nodes, and nothing else; a queue namespace added the way the
manifests say gets the same pod verbs. And the real dispatcher, run as that ServiceAccount, runs an op in
its queue namespace end to end (its pod watch works under RBAC) and refuses one elsewhere."""
from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from opsched.localcluster import kubectl
from opsched.proto.events import OperationDispatched, OperationFailed, OperationRunning, OperationSucceeded
from tests.builders import admitted, op, queues_configured
from tests.integration.rbac import CLUSTER_GRANTS, QUEUE_NAMESPACE_GRANTS, can_i, granted

pytestmark = pytest.mark.integration

BASE = Path(__file__).resolve().parents[2] / "deploy" / "base"


@pytest.fixture(scope="module")
def applied(control_plane) -> tuple[Path, str]:
    """deploy/base's namespaces and RBAC, and a second queue namespace added as 22-queue-namespace-opsched.yaml
    says (its copy with the marked namespace replaced), applied with kubectl as the admin."""
    kubeconfig = control_plane.kubeconfig
    extra = f"q-{secrets.token_hex(4)}"
    template = (BASE / "22-queue-namespace-opsched.yaml").read_text()
    added = control_plane.workdir / f"22-queue-namespace-{extra}.yaml"
    added.write_text(template.replace("opsched  # QUEUE NAMESPACE", extra))
    files = [BASE / "00-namespace.yaml", BASE / "20-rbac.yaml", BASE / "22-queue-namespace-opsched.yaml", added]
    kubectl.run(kubeconfig, "apply", *(f"--filename={f}" for f in files))
    control_plane.ensure_namespace("elsewhere")
    return kubeconfig, extra


def test_the_dispatcher_may_use_pods_in_its_queue_namespaces_and_read_nodes_nothing_more(applied):
    kubeconfig, extra = applied
    for queue_namespace in ("opsched", extra):
        assert granted(kubeconfig, queue_namespace) == QUEUE_NAMESPACE_GRANTS, queue_namespace


@pytest.mark.parametrize("namespace", ["kube-system", "default", "elsewhere", "opsched-system"])
def test_elsewhere_the_dispatcher_may_only_read_nodes(applied, namespace):
    kubeconfig, _ = applied
    assert granted(kubeconfig, namespace) == CLUSTER_GRANTS


@pytest.mark.parametrize(("verb", "resource", "namespace"), [
    ("create", "namespaces", "opsched"), ("get", "secrets", "opsched"), ("list", "secrets", "opsched"),
    ("create", "pods", "kube-system"), ("list", "pods", "default"), ("update", "pods", "opsched"),
    ("create", "pods/exec", "opsched"), ("patch", "pods/status", "opsched"), ("create", "serviceaccounts/token", "opsched-system"),
    ("patch", "nodes", "opsched"), ("delete", "nodes", "opsched"),
    ("get", "services", "opsched"), ("list", "services", "opsched"), ("update", "services", "opsched"),
    ("create", "services", "default"), ("delete", "services", "kube-system"),
    # the queue resources: read, and their status written; never changed, made or deleted (people do that)
    ("create", "opsqueues.opsched.io", "opsched"), ("patch", "opsqueues.opsched.io", "opsched"),
    ("update", "opsconfigs.opsched.io", "opsched"), ("delete", "opsflavors.opsched.io", "opsched"),
    ("update", "opsqueues.opsched.io/status", "opsched"),
])
def test_the_dispatcher_is_refused_what_it_does_not_do(applied, verb, resource, namespace):
    kubeconfig, _ = applied
    assert can_i(kubeconfig, verb, resource, namespace) == "no"


def service_account_kubeconfig(control_plane, core_v1: client.CoreV1Api, path: Path) -> Path:
    """The admin kubeconfig with the dispatcher's ServiceAccount token (TokenRequest API) instead."""
    request = {"spec": {"expirationSeconds": 3600}}
    token = core_v1.create_namespaced_service_account_token("opsched-dispatcher", "opsched-system", request)
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    config["users"] = [{"name": "admin", "user": {"token": token.status.token}}]
    path.write_text(yaml.safe_dump(config))
    return path


async def test_the_dispatcher_as_its_service_account_runs_ops_in_its_queue_namespace_only(
        applied, control_plane, core_v1, sim_nodes, stack_factory, bus, events, tmp_path):
    _, queue_namespace = applied
    kubeconfig = await asyncio.to_thread(service_account_kubeconfig, control_plane, core_v1, tmp_path / "sa.yaml")
    await asyncio.to_thread(sim_nodes, ("gpu-rbac-0", 1, "A100"))
    await stack_factory(names=("dispatcher",), kubeconfig=kubeconfig, namespace=queue_namespace,
                        pod_namespaces=queue_namespace)
    ours, theirs = f"rbac-{secrets.token_hex(3)}", f"rbac-{secrets.token_hex(3)}"
    # admission's configuration (the dispatcher checks admitted events against it): a queue in a namespace not its
    await bus.publish(queues_configured("queues:\n  - name: default\n  - name: other\n    namespace: elsewhere\n"))
    await bus.publish(admitted(op("ok").gpus(1).runs("sleep 0.5").build(), op_id=ours, namespace=queue_namespace))
    await bus.publish(admitted(op("no").gpus(1).runs("sleep 0.5").build(), op_id=theirs, queue="other",
                               namespace="elsewhere"))

    await events.expect(OperationDispatched, ours)
    await events.expect(OperationRunning, ours, timeout=30)  # its pod watch, a namespaced one, works
    await events.expect(OperationSucceeded, ours, timeout=30)
    refused = await events.expect(OperationFailed, theirs)
    assert refused.reason == "NamespaceRefused" and "namespace elsewhere is not one of the dispatcher's" in refused.message
    assert not await asyncio.to_thread(lambda: core_v1.list_namespaced_pod("elsewhere").items)
