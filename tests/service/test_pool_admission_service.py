"""Through the running admission service: an op onto a node pool with no node is admitted waiting for one (the
pool's new node counted as room), `why` says `waiting_for_node`; once a node of the pool is reported and the op
runs, nothing holds it any more."""
from __future__ import annotations

from datetime import datetime, timezone

from opsched.proto import subjects
from opsched.proto.cluster import NodeObserved
from opsched.proto.events import OperationAdmitted, OperationRunning
from tests.builders import op
from tests.waiting import eventually, waiting_on

QUEUES = """defaultQueue: gpu
queues:
  - name: gpu
    resources: [{resource: nvidia.com/gpu, flavors: [{name: a100, nominal: 16}]}]
flavors:
  - name: a100
    nodeLabels: {nvidia.com/gpu.product: A100}
    pool:
      name: a100
      allocatable: {nvidia.com/gpu: 8, cpu: 96, memory: 1000Gi}
      maxNodes: 2
      provisioningSeconds: 60
      provisioningTimeoutSeconds: 600
"""


def observed(name: str, labels: dict[str, str], allocatable: dict[str, str]) -> NodeObserved:
    return NodeObserved(node=name, at=datetime.now(timezone.utc), labels=labels, allocatable=allocatable,
                        taints=[], schedulable=True)


async def test_an_op_onto_an_empty_pool_waits_for_its_node_then_runs(stack_factory, client, bus, events, tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(queues_file=path, dispatcher_mode="null")
    cpu = observed("cpu-0", {"kubernetes.io/hostname": "cpu-0"}, {"cpu": "8", "memory": "32Gi"})
    await bus.publish(cpu, subject=subjects.node("cpu-0"), msg_id="node.cpu-0.1")

    x = await client.submit(op("train").queue("gpu").gpus(8).build())
    admitted = await events.expect(OperationAdmitted, x)
    assert admitted.provisioning == ["a100"] and admitted.provisioning_timeout_s == 600
    answer = await eventually(lambda: waiting_on(client, x, "waiting_for_node"), "why says it waits for a node")
    assert answer.reasons[0].message.startswith("waiting for 1 new node(s) of pool a100 (provisioning since ")

    gpu = observed("a100-0", {"nvidia.com/gpu.product": "A100", "kubernetes.io/hostname": "a100-0"},
                   {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1000Gi"})
    await bus.publish(gpu, subject=subjects.node("a100-0"), msg_id="node.a100-0.1")
    await bus.publish(OperationRunning(op_id=x, at=datetime.now(timezone.utc), attempt=admitted.attempt,
                                       pod_name=admitted.pod_name, node="a100-0"))
    await eventually(lambda: _status(client, x, "running"), "admission folds it running")
    assert (await client.why(x)).reasons == []


async def _status(client, op_id: str, status: str):
    answer = await client.why(op_id)
    return answer if answer.status == status else None
