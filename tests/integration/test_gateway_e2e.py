"""The gateway end to end: an HTTP submit of a polyaxonfile and a CloudEvents submit each run an op to success on
the real control plane (real nats-server, kube-apiserver + kube-scheduler, the four services)."""
from __future__ import annotations

import asyncio
import warnings

import requests

from opsched.proto import cloudevents as ce
from opsched.proto.events import OperationSucceeded
from tests.builders.gateway import serving

YAML = """\
version: 1.1
kind: operation
name: over-http
component:
  run:
    kind: job
    container:
      image: busybox
      command: [sh, -c, "echo hi"]
"""


async def test_http_and_cloudevents_submits_run_to_success(control_plane, k8s_namespace, sim_nodes, stack_factory,
                                                            events, nats_server, tmp_path):
    sim_nodes(("gpu-a", 1, "A100"))
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace)
    async with serving(nats_server, tmp_path) as (gateway, store):
        _, token = store.create("ann")
        auth = {"Authorization": f"Bearer {token}"}
        r = await asyncio.to_thread(requests.post, gateway.url + "/v1/ops?id=over-http", data=YAML, timeout=30,
                                    headers={**auth, "Content-Type": "application/yaml"})
        assert r.status_code == 202, r.text
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from cloudevents.v1 import http
            headers, body = http.to_structured(http.CloudEvent(
                {"type": ce.SUBMIT_TYPE, "source": "tests/e2e", "id": "1", ce.OP_ID_EXTENSION: "over-ce"}, YAML))
        r = await asyncio.to_thread(requests.post, gateway.url + "/v1/events", data=body, timeout=30,
                                    headers={**auth, **headers})
        assert r.status_code == 202, r.text
        for op_id in ("over-http", "over-ce"):
            await events.expect(OperationSucceeded, op_id, timeout=30)
