"""An op's end on the real control plane (nats-server, kube-apiserver + kube-scheduler, the five services) reaches a
local receiver as a signed webhook and a CloudEvent (issue 33 §2's "done")."""
from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone

import msgspec
import pytest
from cloudevents.v1.http import from_http

from opsched.proto.events import NotificationAttempted, OperationSucceeded
from opsched.proto.spec import Notification
from opsched.services.notifier import signature
from tests.builders import op
from tests.http_receiver import SECRET, Receiver, connections_file, serving

SERVICES = ("admission", "cost", "cache", "dispatcher", "notifier")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from serving()


async def test_a_real_ops_success_sends_a_signed_webhook_and_a_cloudevent(
        control_plane, k8s_namespace, sim_nodes, stack_factory, client, events, receiver, tmp_path):
    sim_nodes(("gpu-a", 1, "A100"))
    await stack_factory(SERVICES, kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace,
                        connections_file=connections_file(tmp_path, receiver.port))
    spec = msgspec.structs.replace(op("notified").gpus(1).runs("true").build(),
                                   notifications=[Notification(trigger="succeeded", connections=["ops-hook", "ce"])])
    op_id = await client.submit(spec)
    await events.expect(OperationSucceeded, op_id, timeout=30)
    for connection in ("ops-hook", "ce"):
        await events.expect(NotificationAttempted, op_id, timeout=20,
                            where=lambda e, c=connection: e.connection == c and e.delivered)
    [(headers, body)] = receiver.at("/hook")
    signature.verify(SECRET, body, headers["opsched-signature"], datetime.now(timezone.utc).timestamp())
    assert json.loads(body)["op"] == op_id
    [(ce_headers, ce_body)] = receiver.at("/ce")
    event = from_http(ce_headers, ce_body)
    assert event["type"] == "io.opsched.operation.succeeded" and event["subject"] == op_id
