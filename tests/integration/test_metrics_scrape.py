"""Prometheus scrapes every service, each in its own process as in production (``OPSCHED_HEALTH_PORT``), while
ops run on the real control plane: the series of each service move as the ops go (``services.runtime.metrics``,
admission's, the dispatcher's and cost's own)."""
from __future__ import annotations

import os

import pytest

from opsched.natsserver import free_port
from opsched.proto import subjects
from opsched.proto.events import ErrorRaised, OperationSucceeded
from tests.builders import op
from tests.integration.processes import SERVICES, Processes
from tests.service.test_metrics import scrape
from tests.waiting import eventually


@pytest.fixture
def ported(nats_server, control_plane, k8s_namespace, tmp_path):
    env = {**os.environ, "OPSCHED_KUBECONFIG": str(control_plane.kubeconfig),
           "OPSCHED_NAMESPACE": k8s_namespace, "OPSCHED_LOG_FORMAT": "json"}
    procs, ports = Processes(env, tmp_path, nats_server), {name: free_port() for name in SERVICES}
    for name in SERVICES:
        procs.start(name, OPSCHED_HEALTH_PORT=str(ports[name]))
    yield ports
    procs.terminate_all()


async def ready(port: int, service: str) -> dict | None:
    try:
        _, samples = await scrape(port)
    except OSError:  # not listening yet
        return None
    return samples if samples.get(("opsched_service_ready", (("service", service),))) == 1 else None


def of(samples: dict, metric: str, **labels: str) -> float:
    return samples.get((metric, tuple(sorted(labels.items()))), 0.0)


async def test_every_service_is_scraped_and_its_series_move_as_ops_run(ported, sim_nodes, bus, client, events):
    sim_nodes(("gpu-metrics", 2, "A100"))
    for name, port in ported.items():
        await eventually(lambda n=name, p=port: ready(p, n), f"{name}'s /metrics, ready", timeout=60)
    ids = [await client.submit(op(f"scraped-{i}").gpus(1).runs("sleep 0.2").build()) for i in range(2)]
    await bus.publish_raw(subjects.submit(None), b"{not json", {"Nats-Msg-Id": "scrape-garbage"})
    for op_id in ids:
        await events.expect(OperationSucceeded, op_id, timeout=60)
    await events.expect(ErrorRaised, "-", timeout=30)

    async def moved() -> dict | None:
        now = {name: (await scrape(port))[1] for name, port in ported.items()}
        adm, disp, cost = now["admission"], now["dispatcher"], now["cost"]
        done = (of(adm, "opsched_ops_ended_total", queue="default", status="succeeded", reason="Completed") == 2
                and of(disp, "opsched_pod_create_duration_seconds_count", result="created") == 2
                and of(cost, "opsched_spend_gpu_hours", scope="queue", name="default", window="day") > 0
                and of(now["notifier"], "opsched_messages_handled_total", service="notifier") >= 2)  # the two ends
        return now if done else None
    now = await eventually(moved, "the ops' series in every service's /metrics", timeout=30)
    adm = now["admission"]
    assert of(adm, "opsched_ops_submitted_total", queue="default") == 2
    assert of(adm, "opsched_admitted_until_ready_wait_time_seconds_count", queue="default") == 2
    assert of(adm, "opsched_admission_decisions_total", result="admitted") == 2
    assert of(adm, "opsched_error_events_total", service="admission", reason="malformed_message") == 1
    assert of(adm, "opsched_ops", queue="default", status="succeeded") == 2
    assert of(now["dispatcher"], "opsched_pod_create_errors_total", code="422") == 0
    assert of(now["dispatcher"], "opsched_pod_create_duration_seconds_count", result="created") == 2
    for name in SERVICES:
        assert of(now[name], "opsched_messages_handled_total", service=name) >= 2, name
        assert [k for k in now[name] if k[0] == "opsched_consumer_pending_messages"], name
