"""What a polyaxonfile says of its pod is accepted by the real API server and read back from it exactly."""
from __future__ import annotations

import asyncio
import textwrap

import pytest

from opsched.client import Client
from opsched.polyaxonfile import parse_polyaxonfile
from opsched.proto.events import OperationSucceeded

pytestmark = pytest.mark.integration

FILE = """
version: 1.1
kind: component
name: fields
description: every pod field
run:
  kind: job
  container:
    image: python:3.11-slim
    command: [sh, -c, "sleep 0.2"]
    imagePullPolicy: IfNotPresent
    lifecycle: {preStop: {exec: {command: [sh, -c, "echo checkpoint"]}}}
    ports: [{containerPort: 6006, name: tb}]
    livenessProbe: {tcpSocket: {port: 6006}, periodSeconds: 30}
    terminationMessagePolicy: FallbackToLogsOnError
    resources: {limits: {nvidia.com/gpu: 1}}
    env: [{name: API_TOKEN, value: "tok-{{ globals.owner_name }}"}]
  environment:
    imagePullSecrets: [regcred]
    securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000, runAsNonRoot: true}
    dnsPolicy: None
    dnsConfig: {nameservers: [10.0.0.10], searches: [svc.local]}
    hostAliases: [{ip: 10.0.0.1, hostnames: [db.local]}]
    restartPolicy: OnFailure
"""


QUEUES = """
queues:
  - name: default
    imagePullSecrets: [regcred]  # the pull secret FILE names: refused unless its queue lists it
"""


@pytest.fixture
async def client(control_plane, k8s_namespace, sim_nodes, stack_factory, client, tmp_path) -> Client:
    sim_nodes(("gpu-a", 1, "A100"))
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=queues)
    return client


async def test_the_api_server_takes_every_pod_field_and_returns_it(client, core_v1, k8s_namespace, events):
    op_id = await client.submit(parse_polyaxonfile(textwrap.dedent(FILE)))
    await events.expect(OperationSucceeded, op_id, timeout=60)
    pod = await asyncio.to_thread(core_v1.read_namespaced_pod, f"op-{op_id}-0", k8s_namespace)
    spec, container = pod.spec, pod.spec.containers[0]
    assert [s.name for s in spec.image_pull_secrets] == ["regcred"]
    assert (spec.security_context.run_as_user, spec.security_context.fs_group) == (1000, 2000)
    assert (spec.dns_policy, spec.dns_config.nameservers, spec.restart_policy) == ("None", ["10.0.0.10"], "OnFailure")
    assert spec.host_aliases[0].hostnames == ["db.local"] and spec.automount_service_account_token is False
    assert container.lifecycle.pre_stop._exec.command == ["sh", "-c", "echo checkpoint"]
    assert (container.image_pull_policy, container.ports[0].container_port) == ("IfNotPresent", 6006)
    assert container.liveness_probe.tcp_socket.port == 6006
    assert container.termination_message_policy == "FallbackToLogsOnError"
    assert pod.metadata.annotations["opsched.io/description"] == "every pod field"
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} not in [e.to_dict() for e in container.env or []]
    env = {e.name: e.value for e in container.env or []}  # sealed in the op stream, as written in the pod
    assert env["API_TOKEN"] == "tok-admin"
