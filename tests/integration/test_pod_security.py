"""Pod security on the real API server: the dispatcher refuses an op its queue's level forbids (the message
names the field and the level) and creates no pod; an allowed op runs, and a queue at ``privileged`` runs what
``baseline`` refuses."""
from __future__ import annotations

import asyncio

import pytest

from opsched.proto.events import OperationRejected, OperationSucceeded
from tests.builders import op

pytestmark = pytest.mark.integration

QUEUES = """
queues:
  - name: default
  - name: infra
    podSecurity: privileged
"""


async def test_a_forbidden_pod_is_refused_by_the_dispatcher_and_an_allowed_one_runs(
        control_plane, k8s_namespace, sim_nodes, stack_factory, client, events, core_v1, tmp_path):
    sim_nodes(("gpu-psa", 1, "A100"))
    (tmp_path / "queues.yaml").write_text(QUEUES)
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace,
                        queues_file=tmp_path / "queues.yaml")
    host_root = op("host-root").gpus(1).volume("root", host_path="/", mount_path="/host")

    refused_id = await client.submit(host_root.build())  # the SDK sends it: the dispatcher is the one to refuse
    rejected = await events.expect(OperationRejected, refused_id, timeout=60)
    assert rejected.reason == "forbidden_pod_spec"
    assert "spec.volumes[0].hostPath" in rejected.message
    assert "queue default's pod security level baseline" in rejected.message
    pods = await asyncio.to_thread(core_v1.list_namespaced_pod, k8s_namespace,
                                   label_selector=f"opsched.io/op-id={refused_id}")
    assert pods.items == []

    allowed_id = await client.submit(op("plain").gpus(1).build())
    await events.expect(OperationSucceeded, allowed_id, timeout=60)
    privileged_id = await client.submit(host_root.queue("infra").build())
    await events.expect(OperationSucceeded, privileged_id, timeout=60)
    pod = await asyncio.to_thread(core_v1.read_namespaced_pod, f"op-{privileged_id}-0", k8s_namespace)
    assert pod.spec.volumes[0].host_path.path == "/"
