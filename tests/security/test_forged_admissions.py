"""Forged admissions (issue 28): whoever holds admission's NATS identity publishes ``admitted`` events the
scheduler never decided. The dispatcher checks each against the queue configuration it folds itself: a privileged
level its queue does not have, another queue's or a system namespace, an unknown queue, a pod not named for the
attempt, are refused with the op ``rejected`` (``forbidden_pod_spec``) and an ``error`` event; an op id that is no
name (``../../etc``) is refused with an ``error`` event about no op (``-``) and does not wedge the consumer. No pod
is created for any of them; the ops admission really admits run, and a pod without a GPU gets
``NVIDIA_VISIBLE_DEVICES=void``."""
from __future__ import annotations

import asyncio
import secrets

import msgspec
import pytest

from opsched.proto.events import ErrorRaised, OperationAdmitted, OperationDispatched, OperationRejected
from opsched.rules.naming import pod_name
from opsched.rules.podspec import LABEL_OP, SELECTOR
from tests.builders import admitted, identities, op
from tests.securebus import SecureNats

QUEUES = """
queues:
  - name: default
  - name: infra
    podSecurity: privileged
"""
VOID = ("NVIDIA_VISIBLE_DEVICES", "void")  # as the API server holds the pod
HOST_ROOT = op("host-root").gpus(1).volume("root", host_path="/", mount_path="/host").runs("sleep 60").build()


@pytest.fixture
async def world(control_plane, k8s_namespace, sim_nodes, stack_factory, nats_server: SecureNats, tmp_path):
    """The four services on the control plane (queues default and infra, privileged), and a connection that is
    admission by its NATS identity: the forger."""
    sim_nodes(("gpu-forged", 2, "A100"))
    (tmp_path / "queues.yaml").write_text(QUEUES)
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace,
                        queues_file=tmp_path / "queues.yaml")
    forger = await nats_server.connect(name="forged-admission", identity=identities.service("admission"))
    yield forger
    await forger.close()


def forged(k8s_namespace: str, **fields) -> OperationAdmitted:
    """An admitted event as admission would publish it for queue default, with ``fields`` changed."""
    op_id = f"forged-{secrets.token_hex(3)}"
    event = admitted(HOST_ROOT, op_id=op_id, queue="default", namespace=k8s_namespace, pod_name=pod_name(op_id, 0))
    return msgspec.structs.replace(event, **fields)


async def opsched_pods(core_v1, namespace: str) -> list[str]:
    listed = await asyncio.to_thread(core_v1.list_namespaced_pod, namespace, label_selector=SELECTOR)
    return [p.metadata.name for p in listed.items]


async def pods_of(core_v1, op_id: str) -> list[str]:
    """The op's pods in any namespace."""
    listed = await asyncio.to_thread(core_v1.list_pod_for_all_namespaces, label_selector=f"{LABEL_OP}={op_id}")
    return [f"{p.metadata.namespace}/{p.metadata.name}" for p in listed.items]


@pytest.mark.parametrize(("fields", "refused"), [
    pytest.param(dict(pod_security="privileged"), "pod security level 'privileged' is not queue default's ('baseline')",
                 id="a privileged level its queue does not have"),
    pytest.param(dict(namespace="default"), "namespace 'default' is not queue default's", id="another namespace"),
    pytest.param(dict(namespace="kube-system", pod_security="privileged"), "namespace 'kube-system' is not queue "
                 "default's", id="a system namespace at the privileged level"),
    pytest.param(dict(queue="ghost", pod_security="privileged"), "queue 'ghost' is not in the queue configuration "
                 "in force", id="an unknown queue"),
    pytest.param(dict(queue="infra"), "pod security level 'baseline' is not queue infra's ('privileged')",
                 id="a privileged queue's name with the level left out"),
])
async def test_a_forged_admitted_is_refused_with_an_event_and_creates_no_pod(
        world, k8s_namespace, events, core_v1, fields, refused):
    event = forged(k8s_namespace, **fields)
    await world.publish(event)

    rejected = await events.expect(OperationRejected, event.op_id, timeout=30)
    assert rejected.reason == "forbidden_pod_spec" and refused in rejected.message, rejected.message
    error = await events.expect(ErrorRaised, event.op_id, timeout=30)
    assert (error.service, error.reason) == ("dispatcher", "forbidden_pod_spec")
    assert await pods_of(core_v1, event.op_id) == []


async def test_an_op_id_that_is_no_name_is_refused_and_the_dispatcher_keeps_dispatching(
        world, k8s_namespace, events, core_v1, client):
    bad = forged(k8s_namespace, op_id="../../etc", pod_name="op-../../etc-0")
    await world.publish(bad, subject="ops.admitted.forged-etc", msg_id="forged-etc")  # a valid subject, a bad body

    error = await events.expect(ErrorRaised, "-", timeout=30, where=lambda e: e.service == "dispatcher")
    assert error.reason == "invalid_op_id" and "'../../etc' is not a valid name" in error.message
    assert error.subject == "ops.admitted.forged-etc"

    cpu_id = await client.submit(op("cpu-only").runs("sleep 30").build())  # what admission admits still runs
    gpu_id = await client.submit(op("with-gpu").gpus(1).runs("sleep 30").build())
    for op_id in (cpu_id, gpu_id):
        await events.expect(OperationDispatched, op_id, timeout=60)
    cpu, gpu = [await asyncio.to_thread(core_v1.read_namespaced_pod, pod_name(i, 0), k8s_namespace)
                for i in (cpu_id, gpu_id)]
    assert [VOID in [(e.name, e.value) for e in c.env or []] for c in cpu.spec.containers] == [True]
    assert [VOID in [(e.name, e.value) for e in c.env or []] for c in gpu.spec.containers] == [False]
    assert sorted(await opsched_pods(core_v1, k8s_namespace)) == sorted(pod_name(i, 0) for i in (cpu_id, gpu_id))
