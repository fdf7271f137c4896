"""Init steps, a sidecar and an admin-declared connection, end to end on the real control plane: admission resolves
the connection from the queue configuration, the dispatcher builds the pod, the API server takes it and
kube-scheduler places it counting its GPUs as Kubernetes does (its init container's 2 against its main container's
and sidecar's 1 + 1). Read back from the API server: the init containers in order, the context mounted in every
container, the Secret referenced by its name only, the templates of an init file and a label rendered."""
from __future__ import annotations

import asyncio
import textwrap

import pytest

from opsched.client import Client
from opsched.polyaxonfile import parse_polyaxonfile
from opsched.proto.events import OperationAdmitted, OperationSucceeded

pytestmark = pytest.mark.integration

FILE = """
version: 1.1
kind: component
name: init-sidecar
run:
  kind: job
  init:
    - connection: repo
    - file: {filename: run.sh, chmod: "+x", content: "echo {{ globals.uuid }}"}
    - container:
        name: warm-up
        image: busybox:1.36
        command: [sh, -c, "true"]
        resources: {limits: {nvidia.com/gpu: 2}}
  sidecars:
    - name: watcher
      image: busybox:1.36
      command: [sh, -c, "sleep 0.2"]
      resources: {limits: {nvidia.com/gpu: 1}}
  connections: [repo]
  environment: {labels: {run: "{{ globals.uuid }}"}}
  container:
    image: python:3.11-slim
    workingDir: "{{ globals.artifacts_path }}/repo"
    command: [sh, -c, "sleep 0.2"]
    resources: {limits: {nvidia.com/gpu: 1}}
"""

QUEUES = """
queues: [{name: default}]
connections:
  - {name: repo, kind: git, schema: {url: "https://git.example/ml/models.git"}, secret: {name: repo-token}}
"""


@pytest.fixture
async def client(control_plane, k8s_namespace, sim_nodes, stack_factory, client, tmp_path) -> Client:
    sim_nodes(("gpu-small", 1, "T4"), ("gpu-pair", 2, "A100"))
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=queues)
    return client


async def test_init_steps_a_sidecar_and_a_connection_run_as_kubernetes_runs_them(client, core_v1, k8s_namespace,
                                                                                 events):
    op_id = await client.submit(parse_polyaxonfile(textwrap.dedent(FILE)))
    admitted = await events.expect(OperationAdmitted, op_id, timeout=30)
    await events.expect(OperationSucceeded, op_id, timeout=60)
    assert [c.name for c in admitted.connections] == ["repo"] and admitted.init_image
    pod = await asyncio.to_thread(core_v1.read_namespaced_pod, f"op-{op_id}-0", k8s_namespace)
    spec = pod.spec
    assert spec.node_name == "gpu-pair"  # 2 GPUs: its init container's, not 1 + 1 + 2
    assert [c.name for c in spec.init_containers] == ["init-git-0", "init-file-1", "warm-up"]
    assert [c.name for c in spec.containers] == ["main", "watcher"]
    assert [s.name for s in pod.status.init_container_statuses] == ["init-git-0", "init-file-1", "warm-up"]
    for container in [*spec.init_containers, *spec.containers]:
        assert ("opsched-context", "/plx-context") in [(m.name, m.mount_path) for m in container.volume_mounts]
    volumes = {v.name: v for v in spec.volumes}
    assert volumes["opsched-context"].empty_dir is not None
    assert volumes["opsched-conn-repo"].secret.secret_name == "repo-token"  # by name: its value is never read
    main = spec.containers[0]
    assert main.working_dir == "/plx-context/artifacts/repo"
    assert [e.secret_ref.name for e in main.env_from] == ["repo-token"]
    env = {e.name: e.value for e in spec.init_containers[0].env}
    assert env["OPSCHED_GIT_URL"] == "https://git.example/ml/models.git"
    assert env["OPSCHED_GIT_DEST"] == "/plx-context/artifacts/repo"
    assert {e.name: e.value for e in spec.init_containers[1].env}["OPSCHED_FILE_CONTENT"] == f"echo {op_id}"
    assert pod.metadata.labels["run"] == op_id  # a template in a label's value, rendered when admitted
    [row] = [r for r in await client.ops() if r.op_id == op_id]
    assert row.gpus == 2
