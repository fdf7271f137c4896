"""Params reach the container on the real control plane: every trial of examples/sweep.yaml gets a pod
whose command carries its own (lr, batch_size), and a restart with new params gets a pod with them."""
from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from opsched.client import Client
from opsched.polyaxonfile import load_polyaxonfile_batch
from opsched.proto.events import OperationSucceeded

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OP_LABEL = "opsched.io/op-id"


@pytest.fixture
async def client(control_plane, k8s_namespace, sim_nodes, stack_factory, client) -> Client:
    sim_nodes(("gpu-a", 2, "A100"))
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace)
    return client


async def command_of(core_v1, namespace: str, op_id: str) -> str:
    pods = await asyncio.to_thread(core_v1.list_namespaced_pod, namespace, label_selector=f"{OP_LABEL}={op_id}")
    [pod] = pods.items
    return " ".join(pod.spec.containers[0].command)


async def test_every_sweep_trial_and_a_restart_run_their_own_params(client, core_v1, k8s_namespace, events):
    specs = load_polyaxonfile_batch(EXAMPLES / "sweep.yaml", salt="it")
    ids = [await client.submit(spec) for spec in specs]
    for op_id in ids:
        await events.expect(OperationSucceeded, op_id, timeout=60)
    commands = [await command_of(core_v1, k8s_namespace, op_id) for op_id in ids]
    pairs = [re.search(r"lr=(\S+) bs=(\S+);", c).groups() for c in commands]
    assert sorted(pairs) == sorted((lr, bs) for lr in ("0.1", "0.01", "0.001") for bs in ("32", "64"))
    assert not any("{{" in c for c in commands)

    again = await client.restart(ids[0], params={"lr": 0.5})
    await events.expect(OperationSucceeded, again, timeout=60)
    assert "lr=0.5 bs=32;" in await command_of(core_v1, k8s_namespace, again)
