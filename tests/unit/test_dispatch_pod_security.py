"""The dispatcher refuses an attempt whose pods break its queue's pod security level (``forbidden_pod_spec``,
naming the field and the level) before it creates any pod; a pod its queue allows is created (in a namespace
the admin made, labelled with the level: the dispatcher creates none)."""
from __future__ import annotations

import msgspec

from opsched.bus import logging as oplog
from opsched.proto.events import OperationDispatched, OperationRejected
from opsched.services.dispatcher.dispatch import dispatch
from opsched.services.dispatcher.k8s import Kube
from opsched.services.dispatcher.metrics import PodMeasures
from opsched.services.dispatcher.preempt import Releaser
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, admitted, op
from tests.builders.clock import FakeClock


class Core:
    """CoreV1Api whose namespaces exist; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def create_namespaced_pod(self, namespace, body, **kwargs):
        self.calls.append(("create_pod", body["metadata"]["name"]))

    def create_namespace(self, body, **kwargs):
        self.namespaces.add(body["metadata"]["name"])
        self.calls.append(("create_namespace", body["metadata"]))


async def run(spec, **fields):
    core = Core()
    k = Kube.__new__(Kube)
    k.core, k.request_timeout_s, k.namespaces = core, 5.0, ()  # type: ignore[assignment]
    k.measures = PodMeasures()
    event = msgspec.structs.replace(admitted(spec.build() if hasattr(spec, "build") else spec, op_id="a", queue="gpu"), **fields)
    ctx = Context("dispatcher", FakeClock(T0), Settings(), oplog.get("dispatcher"))
    return await dispatch(event, ctx, k, Releaser(k, Settings(), oplog.get("test"))), core.calls


async def test_a_pod_its_queue_forbids_is_refused_naming_field_and_level_and_no_pod_is_created():
    result, calls = await run(op().volume("root", host_path="/"))
    assert isinstance(result, OperationRejected) and result.reason == "forbidden_pod_spec"
    assert "spec.volumes[0].hostPath" in result.message and "queue gpu's pod security level baseline" in result.message
    assert calls == []


async def test_the_admitted_level_is_the_one_enforced():
    result, _ = await run(op().gpus(1), pod_security="restricted")
    assert isinstance(result, OperationRejected) and "pod security level restricted" in result.message
    result, calls = await run(op().volume("root", host_path="/"), pod_security="privileged")
    assert isinstance(result, OperationDispatched) and ("create_pod", "op-a-0") in calls


async def test_a_secret_volume_runs_only_where_the_queue_allows_it():
    secret = op().volume("creds", secret={"secretName": "c"})
    refused, _ = await run(secret)
    assert isinstance(refused, OperationRejected) and "allowSecretVolumes" in refused.message
    allowed, _ = await run(secret, allow_secret_volumes=True)
    assert isinstance(allowed, OperationDispatched)


async def test_a_service_account_runs_only_where_the_queue_lists_it_and_its_token_where_allowed():
    trainer = op().environment(service_account_name="trainer")
    refused, calls = await run(trainer)
    assert isinstance(refused, OperationRejected) and calls == []
    assert "spec.serviceAccountName" in refused.message and "serviceAccounts (unset: none)" in refused.message
    refused, _ = await run(trainer, service_accounts=["trainer"])
    assert isinstance(refused, OperationRejected) and "allowServiceAccountToken" in refused.message
    allowed, _ = await run(trainer, service_accounts=["trainer"], allow_service_account_token=True)
    assert isinstance(allowed, OperationDispatched)


async def test_a_probe_of_another_host_is_refused_even_in_a_privileged_queue():
    spec = op().build()
    probed = msgspec.structs.replace(spec, container=msgspec.structs.replace(
        spec.container, liveness_probe={"httpGet": {"host": "169.254.169.254", "port": 80}}))
    result, calls = await run(probed, pod_security="privileged")
    assert isinstance(result, OperationRejected) and calls == []
    assert "spec.containers[0].livenessProbe.httpGet.host" in result.message


async def test_a_hardened_pod_runs_in_a_restricted_queue_and_the_dispatcher_creates_no_namespace():
    hardened = op().security_context(runAsNonRoot=True, allowPrivilegeEscalation=False,
                                     capabilities={"drop": ["ALL"]}, seccompProfile={"type": "RuntimeDefault"})
    result, calls = await run(hardened, pod_security="restricted")
    assert isinstance(result, OperationDispatched)
    assert not [m for kind, m in calls if kind == "create_namespace"]  # namespaces are the admin's (RBAC)
