"""A 409 on a pod's create: success only when the pod already there is of the same op and attempt (its
opsched labels); another op's or attempt's pod is never adopted: the attempt fails (``PodConflict``, naming
the pod and its owner, final), the gang's own pods are released and the other's is left alone."""
from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from opsched.bus import logging as oplog
from opsched.bus.errors import DependencyUnavailable
from opsched.proto.events import OperationDispatched, OperationFailed
from opsched.rules.failures import will_retry
from opsched.rules.podspec import LABEL_ATTEMPT, LABEL_OP
from opsched.services.dispatcher.dispatch import dispatch
from opsched.services.dispatcher.k8s import Kube
from opsched.services.dispatcher.metrics import PodMeasures
from opsched.services.dispatcher.preempt import Releaser
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, admitted, case, case_name, op
from tests.builders.clock import FakeClock


class Core:
    """CoreV1Api with pods that exist already (name -> labels, None: gone by the time it is read)."""

    def __init__(self, existing: dict[str, dict[str, str] | None]) -> None:
        self.existing, self.calls = existing, []

    def create_namespaced_pod(self, namespace, body, **kwargs):
        self.calls.append(("create", body["metadata"]["name"]))
        if body["metadata"]["name"] in self.existing:
            raise ApiException(status=409, reason="Conflict")

    def read_namespaced_pod(self, name, namespace, **kwargs):
        self.calls.append(("read", name))
        labels = self.existing.get(name)
        if labels is None:
            raise ApiException(status=404, reason="Not Found")
        return type("Answer", (), {"data": json.dumps({"metadata": {"name": name, "labels": labels}}).encode()})()

    def patch_namespaced_pod(self, name, namespace, body, **kwargs):
        self.calls.append(("annotate", name))

    def delete_namespaced_pod(self, name, namespace, **kwargs):
        self.calls.append(("delete", name))

    def create_namespaced_service(self, namespace, body, **kwargs):
        self.calls.append(("create_service", body["metadata"]["name"]))

    def delete_namespaced_service(self, name, namespace, **kwargs):
        self.calls.append(("delete_service", name))

    def delete_namespaced_config_map(self, name, namespace, **kwargs):
        self.calls.append(("delete_config_map", name))
        raise ApiException(status=404, reason="Not Found")


def kube(core: Core) -> Kube:
    k = Kube.__new__(Kube)
    k.core, k.request_timeout_s = core, 5.0  # type: ignore[assignment]
    k.measures = PodMeasures()
    return k


async def dispatched(core: Core, spec=None, attempt: int = 1):
    k = kube(core)
    event = admitted((spec or op("train")).build(), op_id="a", attempt=attempt)
    ctx = Context("dispatcher", FakeClock(T0), Settings(), oplog.get("dispatcher"))
    return await dispatch(event, ctx, k, Releaser(k, Settings(), oplog.get("test")))


def owned(op_id: str, attempt: int) -> dict[str, str]:
    return {LABEL_OP: op_id, LABEL_ATTEMPT: str(attempt), "app.kubernetes.io/managed-by": "opsched"}


async def test_a_pod_already_there_of_the_same_op_and_attempt_is_this_attempts_own():
    core = Core({"op-a-1": owned("a", 1)})
    assert isinstance(await dispatched(core), OperationDispatched)
    assert core.calls == [("create", "op-a-1"), ("read", "op-a-1")]


@pytest.mark.parametrize("c", [
    case("another op's pod", labels=owned("b", 1), owner="op b attempt 1"),
    case("another attempt's pod of the same op", labels=owned("a", 0), owner="op a attempt 0"),
    case("a pod no opsched op made", labels={"app": "x"}, owner="no opsched op (no opsched.io/op-id label)"),
], ids=case_name)
async def test_a_pod_already_there_of_another_op_or_attempt_is_not_adopted(c):
    core = Core({"op-a-1": c.labels})
    failed = await dispatched(core)
    assert isinstance(failed, OperationFailed)
    assert (failed.op_id, failed.attempt, failed.reason) == ("a", 1, "PodConflict")
    assert failed.message == (f"pod op-a-1 already exists in namespace {admitted(op('x').build()).namespace} "
                              f"and belongs to {c.owner}, not to this attempt; it is not adopted")
    assert not [call for call in core.calls if call[0] in ("annotate", "delete")]  # the other's pod is left alone
    assert not will_retry(failed.reason, max_retries=3, retries_used=0)


async def test_a_gang_meeting_another_ops_pod_releases_its_own_pods_and_leaves_the_other():
    core = Core({"op-a-1-w-0": owned("b", 1)})
    failed = await dispatched(core, op("train").replicas("w", 2))
    assert isinstance(failed, OperationFailed) and failed.reason == "PodConflict"
    released = {name for kind, name in core.calls if kind == "delete"}
    assert released == {"op-a-1", "op-a-1-w-1"}
    assert core.calls[0] == ("create_service", "op-a-1") and ("delete_service", "op-a-1") in core.calls


async def test_a_pod_deleted_between_the_409_and_the_read_is_created_again_once():
    core = Core({"op-a-1": None})  # 409 on create, 404 on read: every time
    with pytest.raises(DependencyUnavailable):
        await dispatched(core)
    assert core.calls == [("create", "op-a-1"), ("read", "op-a-1")] * 2
