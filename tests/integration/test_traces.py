"""Traces end to end, as in production: the four services each in its own process on the real control plane,
exporting with OTLP over HTTP (``OTEL_TRACES_EXPORTER=otlp``) to a receiver of the test's on loopback. An op
submitted with a caller's traceparent is one trace from the submit to its pod and what the pod watch reports:
the pod's ``opsched.io/traceparent`` annotation names the dispatcher's create span of that trace."""
from __future__ import annotations

import asyncio
import os

import pytest

from opsched.bus import tracing
from opsched.proto import subjects
from opsched.proto.events import OperationSucceeded
from opsched.rules.podspec import ANNOTATION_TRACEPARENT, LABEL_OP
from tests.builders import op
from tests.integration.test_kill_restart import SERVICES, Processes
from tests.otlp import OtlpReceiver, ReceivedSpan
from tests.waiting import eventually

CALLER_TRACE, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
# (service, consumer or "", span name): the hops of an op that runs and succeeds
HOPS = [("admission", subjects.ADMISSION_COMMANDS, "process submit"),
        ("cost", subjects.COST_ESTIMATOR, "process submitted"), ("cache", subjects.CACHE_LOOKUP, "process submitted"),
        ("admission", "", "decide admitted"), ("dispatcher", subjects.DISPATCHER_ADMITTED, "process admitted"),
        ("dispatcher", "", "create pod"), ("cost", subjects.COST_LEDGER, "process running"),
        ("cost", subjects.COST_LEDGER, "process succeeded"), ("cache", subjects.CACHE_LOOKUP, "process succeeded")]


@pytest.fixture
def receiver():
    with OtlpReceiver() as r:
        yield r


@pytest.fixture
def traced(nats_server, control_plane, k8s_namespace, tmp_path, receiver):
    env = {**os.environ, "OPSCHED_KUBECONFIG": str(control_plane.kubeconfig),
           "OPSCHED_NAMESPACE": k8s_namespace, "OPSCHED_LOG_FORMAT": "json", "OTEL_TRACES_EXPORTER": "otlp",
           "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    env.pop("OTEL_SERVICE_NAME", None)
    procs = Processes(env, tmp_path, nats_server)
    yield procs
    procs.terminate_all()


def hops(spans: list[ReceivedSpan]) -> dict[tuple[str, str, str], ReceivedSpan]:
    return {(s.service.removeprefix("opsched-"), str(s.attributes.get("messaging.consumer.group.name", "")), s.name): s
            for s in spans}


async def test_an_ops_path_from_its_submit_to_its_pod_is_one_trace_exported_over_otlp(
        traced, receiver, sim_nodes, client, events, core_v1, k8s_namespace):
    assert not tracing.ON  # the test's own client: it passes the caller's traceparent on as it is
    sim_nodes(("gpu-t", 1, "A100"))
    for name in SERVICES:
        traced.start(name)
    op_id = await client.submit(op("traced").gpus(1).runs("sleep 0.2").build(),
                                     traceparent=f"00-{CALLER_TRACE}-{CALLER_SPAN}-01")
    await events.expect(OperationSucceeded, op_id, timeout=90)

    pods = await asyncio.to_thread(core_v1.list_namespaced_pod, k8s_namespace, label_selector=f"{LABEL_OP}={op_id}")
    [pod] = pods.items
    _, trace_id, creator, _ = pod.metadata.annotations[ANNOTATION_TRACEPARENT].split("-")
    assert trace_id == CALLER_TRACE

    async def all_hops() -> dict | None:
        found = hops(receiver.of_trace(CALLER_TRACE))
        return found if all(hop in found for hop in HOPS) else None
    found = await eventually(all_hops, f"the spans of {HOPS} at the receiver", timeout=30)
    submit, cost, cache, decision, handled, create, running, succeeded, cached = (found[h] for h in HOPS)
    assert submit.parent_id == CALLER_SPAN and submit.kind == "CONSUMER"
    assert cost.parent_id == cache.parent_id == decision.parent_id == submit.span_id
    assert handled.parent_id == decision.span_id and create.parent_id == handled.span_id
    assert create.span_id == creator and create.kind == "CLIENT"  # the pod names its create span
    assert create.attributes["k8s.pod.name"] == pod.metadata.name
    assert running.parent_id == succeeded.parent_id == cached.parent_id == creator  # the watch carries it on
    assert {s.attributes.get("opsched.op_id") for s in found.values()} == {op_id}
    assert all(s.attributes["messaging.system"] == "nats" for s in found.values() if s.kind == "CONSUMER")
