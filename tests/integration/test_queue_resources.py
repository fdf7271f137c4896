"""The queue configuration as custom resources on the real API server (deploy/base's CRDs and RBAC applied with
kubectl): the dispatcher, as its ServiceAccount, sends the configuration the resources make to admission; `kubectl
apply` of a queue changes what admission does; an invalid update is said in the resource's status with its field
path while the last valid configuration stays; `kubectl get opsqueues` shows pending and admitted ops; `opsched
queues --apply` is refused while the resources are the configuration, and works again once they are deleted."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from opsched.client import CommandRefused
from opsched.localcluster import kubectl
from opsched.proto.events import OperationAdmitted
from opsched.proto.queues import QueuesConfig
from opsched.rules.queue_resources import GROUP, KINDS, VERSION
from tests.builders import op
from tests.integration.test_rbac import service_account_kubeconfig
from tests.waiting import eventually

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ALL = ",".join(f"{k.plural}.opsched.io" for k in KINDS)


@pytest.fixture(scope="module")
def installed(control_plane) -> Iterator[Path]:
    """The CRDs, namespaces and RBAC of deploy/base, applied as an admin would; every queue resource deleted after."""
    kubeconfig = control_plane.kubeconfig
    base = DEPLOY / "base"
    files = ("00-namespace.yaml", "10-crds.yaml", "20-rbac.yaml", "22-queue-namespace-opsched.yaml")
    kubectl.run(kubeconfig, "apply", *(f"--filename={base / f}" for f in files))
    kubectl.run(kubeconfig, "wait", "--for=condition=Established", "--timeout=60s",
                *(f"crd/{k.plural}.opsched.io" for k in KINDS))
    yield kubeconfig
    kubectl.run(kubeconfig, "delete", ALL, "--all", check=False)


@pytest.fixture
def resources(installed) -> Iterator[Path]:
    yield installed
    kubectl.run(installed, "delete", ALL, "--all", "--wait=true", check=False)  # each test starts without any


def apply(kubeconfig: Path, tmp: Path, *docs: dict[str, Any], check: bool = True):
    path = tmp / "resources.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return kubectl.run(kubeconfig, "apply", f"--filename={path}", check=check)


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "opsched.io/v1alpha1", "kind": "OpsQueue", "metadata": {"name": name}, "spec": spec}


SETTINGS = {"apiVersion": "opsched.io/v1alpha1", "kind": "OpsConfig", "metadata": {"name": "opsched"},
            "spec": {"defaultQueue": "research"}}


def resource(api: k8s.ApiClient, plural: str, name: str) -> dict[str, Any]:
    """The resource as the API server holds it (empty: none). Read with the client: polling kubectl is a process
    a poll."""
    try:
        return k8s.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, plural, name)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return {}
        raise


def applied(api: k8s.ApiClient, plural: str, name: str) -> dict[str, Any]:
    """The resource's ``Applied`` condition (empty: none yet)."""
    status = resource(api, plural, name).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "Applied"), {})


async def until_applied(api: k8s.ApiClient, plural: str, name: str, status: str, reason: str) -> dict[str, Any]:
    async def there() -> bool:
        found = await asyncio.to_thread(applied, api, plural, name)
        return found.get("status") == status and found.get("reason") == reason
    try:
        await eventually(there, f"{plural}/{name} Applied={status} ({reason})", timeout=30, interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it says {await asyncio.to_thread(applied, api, plural, name)}") from None
    return await asyncio.to_thread(applied, api, plural, name)


async def concurrency_in_force(client, name: str) -> int | None:
    return next((q.concurrency for q in (await client.queues()).queues if q.name == name), None)


async def test_kubectl_apply_of_a_queue_changes_what_admission_does(
        resources, control_plane, core_v1, k8s_api, sim_nodes, stack_factory, client, events, tmp_path):
    kubeconfig = resources
    account = await asyncio.to_thread(service_account_kubeconfig, control_plane, core_v1, tmp_path / "sa.yaml")
    await asyncio.to_thread(sim_nodes, ("gpu-crd-0", 2, "A100"))
    await asyncio.to_thread(apply, kubeconfig, tmp_path, SETTINGS, queue("research", concurrency=1, namespace="opsched"))
    await stack_factory(kubeconfig=account, namespace="opsched",
                        pod_namespaces="opsched", queue_status_interval_s=0.5)

    # the resources' configuration is in force, and each resource says so
    await eventually(lambda: _in_force(client, "research", 1), "the resources' configuration in force", timeout=30)
    assert (await client.queues()).source.startswith("resources#")
    condition = await until_applied(k8s_api, "opsqueues", "research", "True", "Applied")
    assert condition["observedGeneration"] == 1 and condition["message"].startswith("in force (resources#")
    await until_applied(k8s_api, "opsconfigs", "opsched", "True", "Applied")

    # concurrency 1: one op admitted, the next waits; `kubectl get opsqueues` shows both
    first = await client.submit(op("first").gpus(1).runs("sleep 60").build())
    second = await client.submit(op("second").gpus(1).runs("sleep 60").build())
    await events.expect(OperationAdmitted, first)
    await eventually(lambda: _waits_for(client, second, "queue_concurrency"), "the second op to wait on concurrency")

    async def counted() -> bool:
        status = (await asyncio.to_thread(resource, k8s_api, "opsqueues", "research")).get("status") or {}
        return (status.get("pending"), status.get("admitted")) == (1, 1)
    await eventually(counted, "the OpsQueue's status: 1 pending, 1 admitted", timeout=30, interval=0.2)
    table = await asyncio.to_thread(kubectl.run, kubeconfig, "get", "opsqueues")
    rows = [line.split() for line in table.stdout.splitlines()]
    assert rows[0][:6] == ["NAME", "COHORT", "CONCURRENCY", "PENDING", "ADMITTED", "APPLIED"]
    assert rows[1][:5] == ["research", "1", "1", "1", "True"]  # no cohort: an empty column

    # a wrong type is refused by the API server itself (the CRD's schema), naming the field
    refused = await asyncio.to_thread(apply, kubeconfig, tmp_path, SETTINGS,
                                      queue("research", concurrency="two", namespace="opsched"), check=False)
    assert refused.returncode != 0 and "spec.concurrency" in refused.stderr

    # a misspelt field is kept by the API server and refused by the dispatcher, by its path; the last valid stays
    await asyncio.to_thread(apply, kubeconfig, tmp_path, SETTINGS,
                            queue("research", concurency=2, namespace="opsched"))
    condition = await until_applied(k8s_api, "opsqueues", "research", "False", "Invalid")
    assert condition["message"].startswith("spec.concurency: unknown field") and condition["observedGeneration"] == 2
    assert "the last valid queue configuration stays in force" in condition["message"]
    assert await concurrency_in_force(client, "research") == 1
    assert (await client.why(second)).reasons[0].code == "queue_concurrency"

    # corrected: in force, and admission admits the second op
    await asyncio.to_thread(apply, kubeconfig, tmp_path, SETTINGS,
                            queue("research", concurrency=2, namespace="opsched"))
    await events.expect(OperationAdmitted, second, timeout=30)
    assert await concurrency_in_force(client, "research") == 2
    await until_applied(k8s_api, "opsqueues", "research", "True", "Applied")

    # while the resources are the configuration, `opsched queues --apply` is refused, saying why
    with pytest.raises(CommandRefused) as apply_refused:
        await client.set_queues(QueuesConfig(), requested_by="test")
    assert apply_refused.value.verdict.outcome == "queues_from_resources"
    for op_id in (first, second):
        await client.stop(op_id)


async def test_deleting_the_resources_keeps_the_last_valid_configuration_then_hands_it_back(
        resources, control_plane, core_v1, k8s_api, stack_factory, client, tmp_path):
    kubeconfig = resources
    account = await asyncio.to_thread(service_account_kubeconfig, control_plane, core_v1, tmp_path / "sa.yaml")
    await asyncio.to_thread(apply, kubeconfig, tmp_path, SETTINGS, queue("research", concurrency=3),
                            queue("cpu", concurrency=5))
    await stack_factory(kubeconfig=account, namespace="opsched",
                        pod_namespaces="opsched")
    await eventually(lambda: _in_force(client, "cpu", 5), "the resources' configuration in force", timeout=30)

    # the default queue deleted: the configuration left is invalid; the OpsConfig naming it says so, nothing moves
    await asyncio.to_thread(kubectl.run, kubeconfig, "delete", "opsqueues.opsched.io", "research")
    condition = await until_applied(k8s_api, "opsconfigs", "opsched", "False", "Invalid")
    assert condition["message"].startswith("spec.defaultQueue: 'research' is not one of the queues ['cpu']")
    blocked = await until_applied(k8s_api, "opsqueues", "cpu", "True", "Applied")  # unchanged: still in force
    assert blocked["observedGeneration"] == 1
    assert sorted(q.name for q in (await client.queues()).queues) == ["cpu", "research"]

    # every resource deleted: the configuration in force is handed back, and `--apply` works again
    await asyncio.to_thread(kubectl.run, kubeconfig, "delete", ALL, "--all")
    await eventually(lambda: _source(client, "command:dispatcher#"), "the configuration handed back", timeout=30)
    assert sorted(q.name for q in (await client.queues()).queues) == ["cpu", "research"]
    verdict = await client.set_queues(QueuesConfig(), requested_by="test")
    assert verdict.done


async def _in_force(client, name: str, concurrency: int) -> bool:
    return await concurrency_in_force(client, name) == concurrency


async def _source(client, prefix: str) -> bool:
    return (await client.queues()).source.startswith(prefix)


async def _waits_for(client, op_id: str, code: str) -> bool:
    answer = await client.why(op_id)
    return bool(answer.reasons) and answer.reasons[0].code == code
