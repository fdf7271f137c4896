"""The dispatcher's own time limits: ttl after the end, and a timeout the kubelet did not enforce."""
from __future__ import annotations

from datetime import datetime

import msgspec
import pytest

from opsched.services.dispatcher import expiry
from opsched.services.dispatcher.expiry import TIMEOUT, TTL_EXPIRED, UNSCHEDULABLE, Expiry
from opsched.services.dispatcher.kobjects import PODS
from tests.builders import case, case_name, t


def expiry_of(pod: dict, now: datetime) -> Expiry | None:
    """The decision about ``pod`` as the API server answers it (JSON), decoded as the watch decodes it."""
    return expiry.expiry_of(PODS.object.decode(msgspec.json.encode(pod)), now)


def pod(phase: str, *, ttl: str | None = None, deadline: int | None = None, started: str = "2026-01-01T12:00:00Z",
        finished: str | None = "2026-01-01T12:01:00Z", evicted: bool = False, deleting: bool = False) -> dict:
    annotations = {"opsched.io/ttl-seconds": ttl} if ttl else {}
    if evicted:
        annotations["opsched.io/evicted"] = "stop"
    state = {"terminated": {"finishedAt": finished}} if finished else {"running": {}}
    meta = {"name": "op-a-0", "namespace": "ns", "annotations": annotations,
            "labels": {"opsched.io/op-id": "a", "opsched.io/attempt": "0"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T12:02:00Z"
    return {"metadata": meta, "spec": {"nodeName": "n1", **({"activeDeadlineSeconds": deadline} if deadline else {})},
            "status": {"phase": phase, "startTime": started, "containerStatuses": [{"state": state}]}}


@pytest.mark.parametrize("c", [
    case("a finished pod is deleted once its ttl has passed since it ended",
         pod=pod("Succeeded", ttl="30"), now=t(90), kind=TTL_EXPIRED),
    case("a finished pod is kept while its ttl runs", pod=pod("Failed", ttl="30"), now=t(89), kind=None),
    case("a finished pod without a ttl is kept", pod=pod("Succeeded"), now=t(10_000), kind=None),
    case("a pod running past its deadline plus grace is timed out by the dispatcher",
         pod=pod("Running", deadline=60, finished=None), now=t(91), kind=TIMEOUT),
    case("a pod running within its deadline plus grace is left to the kubelet",
         pod=pod("Running", deadline=60, finished=None), now=t(89), kind=None),
    case("a pod already released by the dispatcher is left alone",
         pod=pod("Running", deadline=1, finished=None, evicted=True), now=t(999), kind=None),
    case("a pod being deleted is left alone", pod=pod("Succeeded", ttl="1", deleting=True), now=t(999), kind=None),
], ids=case_name)
def test_what_the_dispatcher_does_with_a_pod_over_time(c):
    expiry = expiry_of(c.pod, c.now)
    assert (expiry.kind if expiry else None) == c.kind
    if expiry:
        assert (expiry.namespace, expiry.name, expiry.op_id, expiry.attempt, expiry.node) == ("ns", "op-a-0", "a", 0, "n1")


def test_the_ttl_annotation_comes_from_termination_ttl():
    import msgspec

    from opsched.rules.podspec import build_pod
    from tests.builders import admitted, op

    spec = op("x").build()
    spec = msgspec.structs.replace(spec, termination=msgspec.structs.replace(spec.termination, ttl=45))
    assert build_pod(admitted(spec, op_id="x"))["metadata"]["annotations"]["opsched.io/ttl-seconds"] == "45"


def pending(*, timeout: str | None = "60", reason: str = "Unschedulable", status: str = "False",
            since: str | None = "2026-01-01T12:00:00Z", node: str | None = None) -> dict:
    annotations = {"opsched.io/pending-timeout-seconds": timeout} if timeout else {}
    condition = {"type": "PodScheduled", "status": status, "reason": reason,
                 "message": "0/3 nodes are available: 3 node(s) didn't match pod affinity rules.",
                 **({"lastTransitionTime": since} if since else {})}
    return {"metadata": {"name": "op-a-0", "namespace": "ns", "annotations": annotations,
                         "creationTimestamp": "2026-01-01T11:59:00Z",
                         "labels": {"opsched.io/op-id": "a", "opsched.io/attempt": "0"}},
            "spec": {**({"nodeName": node} if node else {})},
            "status": {"phase": "Pending", "conditions": [condition]}}


@pytest.mark.parametrize("c", [
    case("a pod Unschedulable past its queue's pendingTimeout is evicted with the scheduler's message",
         pod=pending(), now=t(60), kind=UNSCHEDULABLE),
    case("a pod Unschedulable within its pendingTimeout waits", pod=pending(), now=t(59), kind=None),
    case("without a transition time the wait counts from the pod's creation",
         pod=pending(since=None), now=t(0), kind=UNSCHEDULABLE),
    case("a pod the scheduler has not judged yet waits", pod=pending(status="True", reason=""), now=t(999), kind=None),
    case("a bound pod pulling its image is not unschedulable", pod=pending(node="n1"), now=t(999), kind=None),
    case("a pod without a pendingTimeout (admitted before it existed) is left alone", pod=pending(timeout=None),
         now=t(999), kind=None),
], ids=case_name)
def test_an_unschedulable_pod_is_evicted_after_its_queue_s_pending_timeout(c):
    expiry = expiry_of(c.pod, c.now)
    assert (expiry.kind if expiry else None) == c.kind
    if expiry:
        assert "didn't match pod affinity rules" in expiry.message and "pendingTimeout" in expiry.message


def test_the_pending_timeout_annotation_comes_from_the_admitted_event():
    import msgspec

    from opsched.rules.podspec import build_pod
    from tests.builders import admitted, op

    event = msgspec.structs.replace(admitted(op("x").build(), op_id="x"), pending_timeout_s=90.0)
    assert build_pod(event)["metadata"]["annotations"]["opsched.io/pending-timeout-seconds"] == "90"


# ---- a pod waiting for a new node of its pool --------------------------------------------------------

def awaiting(*, timeout: str = "600", pending_timeout: str | None = "60", node: str | None = None) -> dict:
    """A pod admitted onto a new node of pool a100, created at t(-60) and Unschedulable since t(0)."""
    out = pending(timeout=pending_timeout, node=node)
    out["metadata"]["annotations"].update({"opsched.io/pool": "a100",
                                           "opsched.io/provisioning-timeout-seconds": timeout})
    return out


@pytest.mark.parametrize("c", [
    case("a pod waiting for its pool's node is not evicted at the pendingTimeout", pod=awaiting(), now=t(60),
         kind=None),
    case("... nor before the provisioning timeout since its creation", pod=awaiting(), now=t(539), kind=None),
    case("... and is evicted once it has passed", pod=awaiting(), now=t(540), kind=expiry.NODE_NOT_PROVISIONED),
    case("a pendingTimeout longer than the provisioning timeout wins",
         pod=awaiting(timeout="60", pending_timeout="300"), now=t(239), kind=None),
    case("a pod bound to its new node is left alone", pod=awaiting(node="a100-0"), now=t(9999), kind=None),
], ids=case_name)
def test_a_pod_waiting_for_a_new_node_is_released_at_its_provisioning_timeout(c):
    found = expiry_of(c.pod, c.now)
    assert (found.kind if found else None) == c.kind
    if found:
        assert found.message == ("no node of pool a100 came within 600s (provisioningTimeoutSeconds): 0/3 nodes are "
                                 "available: 3 node(s) didn't match pod affinity rules.")


def test_the_pool_annotations_come_from_the_admitted_event_and_cannot_be_set_by_a_spec():
    import msgspec

    from opsched.rules.podspec import build_pod
    from opsched.rules.reserved_keys import RESERVED_ANNOTATIONS
    from tests.builders import admitted, op

    event = msgspec.structs.replace(admitted(op("x").build(), op_id="x"), provisioning=["a100"],
                                    provisioning_timeout_s=600.0)
    annotations = build_pod(event)["metadata"]["annotations"]
    assert annotations["opsched.io/pool"] == "a100"
    assert annotations["opsched.io/provisioning-timeout-seconds"] == "600"
    assert "opsched.io/pool" not in build_pod(admitted(op("y").build(), op_id="y"))["metadata"]["annotations"]
    assert {"opsched.io/pool", "opsched.io/provisioning-timeout-seconds"} <= set(RESERVED_ANNOTATIONS)
