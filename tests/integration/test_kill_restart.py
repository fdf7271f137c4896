"""Each service in its own process, as in production: killing and restarting any one of them
does not lose the operation; SIGTERM drains and exits cleanly."""
from __future__ import annotations

import os

import pytest

from opsched.proto.events import OperationAdmitted, OperationSucceeded
from tests.builders import op
from tests.integration.processes import SERVICES, Processes


@pytest.fixture
def processes(nats_server, control_plane, k8s_namespace, tmp_path):
    env = {**os.environ, "OPSCHED_KUBECONFIG": str(control_plane.kubeconfig),
           "OPSCHED_NAMESPACE": k8s_namespace, "OPSCHED_LOG_FORMAT": "json"}
    procs = Processes(env, tmp_path, nats_server)
    yield procs
    procs.terminate_all()


async def test_an_op_submitted_while_any_one_service_is_killed_succeeds_once_it_restarts(
        processes, sim_nodes, client, events):
    """Each service in turn (one set of processes: the suite's CPU budget): killed, an op submitted, started again."""
    sim_nodes(("gpu-only", 1, "A100"))
    for name in SERVICES:
        processes.start(name)
    warmup = await client.submit(op("warmup").gpus(1).runs("sleep 0.2").build())
    await events.expect(OperationSucceeded, warmup, timeout=60)

    for victim in SERVICES:
        processes.kill(victim)
        op_id = await client.submit(op(f"survivor-{victim}").gpus(1).runs("sleep 0.5").build())
        if victim == "dispatcher":
            await events.expect(OperationAdmitted, op_id)
        processes.start(victim)
        done = await events.expect(OperationSucceeded, op_id, timeout=60)
        assert done.node == "gpu-only", victim

    codes = processes.terminate_all()
    assert codes == {name: 0 for name in SERVICES}, "SIGTERM should drain and exit 0"
