"""A 409 on a pod's create is success only for the same op and attempt (issue 14): on the real API server, a
pod of the attempt's deterministic name that belongs to another op is never adopted. The attempt fails
``PodConflict`` (final), naming the pod and its owner, and the other op's pod is left alone."""
from __future__ import annotations

import asyncio
import secrets

import pytest
from kubernetes import client

from opsched.proto.events import OperationFailed
from opsched.rules.failures import will_retry
from opsched.rules.naming import pod_name
from opsched.rules.podspec import LABEL_ATTEMPT, LABEL_OP
from opsched.services.dispatcher.service import Dispatcher
from opsched.services.runtime.service import Context
from tests.builders import admitted, op, queues_configured

pytestmark = pytest.mark.integration


@pytest.fixture
async def dispatcher(nats_server, control_plane, k8s_namespace, bus):
    settings = nats_server.settings(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, stop_grace_s=0)
    await bus.publish(queues_configured("queues:\n  - name: default\n"))  # admission's: what it checks against
    own = await nats_server.connect(name="opsched-dispatcher")
    await own.ensure_streams()
    made = Dispatcher(settings)
    made.bus = own
    await made.start(own)
    yield made
    await own.close()


def foreign_pod(name: str, owner: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={LABEL_OP: owner, LABEL_ATTEMPT: "0"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="busybox", command=["sleep", "60"])]))


async def test_a_pod_of_the_attempts_name_owned_by_another_op_is_not_adopted(dispatcher, k8s_namespace, core_v1):
    op_id = f"conflict-{secrets.token_hex(3)}"
    name = pod_name(op_id, 0)
    await asyncio.to_thread(core_v1.create_namespaced_pod, k8s_namespace, foreign_pod(name, "someone-else"))
    event = admitted(op("conflict").runs("sleep 60").build(), op_id=op_id, namespace=k8s_namespace, pod_name=name)

    result = await dispatcher.on_admitted(event, Context(dispatcher.name, dispatcher.clock, dispatcher.settings,
                                                         dispatcher.log))

    failed = [e for e in (result if isinstance(result, list) else [result]) if isinstance(e, OperationFailed)]
    assert failed and failed[0].reason == "PodConflict", result
    assert name in failed[0].message and "someone-else" in failed[0].message
    assert not will_retry("PodConflict", 3, 0, 0)  # final: retrying would meet the same pod
    still = await asyncio.to_thread(core_v1.read_namespaced_pod, name, k8s_namespace)
    assert still.metadata.labels[LABEL_OP] == "someone-else"  # the other op's pod is left alone
