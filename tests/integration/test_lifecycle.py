"""An operation's life on the real control plane: retries make new pods, approval and conditions
gate pod creation, stop deletes the pod, a sweep never runs more pods than its concurrency.

(A timeout killing the pod is covered in ``test_backbone.py``.)
"""
from __future__ import annotations

import asyncio
import textwrap
import threading
from typing import Any

import msgspec
import pytest
from kubernetes import watch

from opsched.client import Client
from opsched.localcluster.nodes import EXIT_CODES_ANNOTATION
from opsched.polyaxonfile import load_polyaxonfile_batch
from opsched.proto.events import (
    FailureFinal,
    OperationAdmitted,
    OperationApproved,
    OperationFailed,
    OperationOnHold,
    OperationRejected,
    OperationRunning,
    OperationSkipped,
    OperationStopped,
    OperationSubmitted,
    OperationSucceeded,
    RetryScheduled,
)
from tests.builders import op
from tests.kube import pod_gone
from tests.waiting import eventually

QUEUES = """
defaultQueue: default
retryBackoff: {baseSeconds: 0, factor: 2, maxSeconds: 0}
queues:
  - name: default
"""
OP_LABEL = "opsched.io/op-id"


@pytest.fixture
async def client(control_plane, k8s_namespace, sim_nodes, stack_factory, client, tmp_path) -> Client:
    # 8 GPUs: more than any test needs at once, so only the op's own rules hold it back.
    sim_nodes(("gpu-a", 4, "A100"), ("gpu-b", 4, "A100"))
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, queues_file=path)
    return client


def spec(name: str, script: str = "sleep 0.3", *, exit_codes: str | None = None, retries: int | None = None,
         **fields: Any):
    builder = op(name).gpus(1).runs(script)
    if retries is not None:
        builder = builder.max_retries(retries)
    built = builder.build()
    if exit_codes is not None:
        annotations = {**built.environment.annotations, EXIT_CODES_ANNOTATION: exit_codes}
        fields["environment"] = msgspec.structs.replace(built.environment, annotations=annotations)
    return msgspec.structs.replace(built, **fields)


async def pods_of(core_v1, namespace: str, op_id: str) -> dict[str, Any]:
    pods = await asyncio.to_thread(core_v1.list_namespaced_pod, namespace, label_selector=f"{OP_LABEL}={op_id}")
    return {p.metadata.name: p for p in pods.items}


def exit_code(pod) -> int:
    return pod.status.container_statuses[0].state.terminated.exit_code


async def settled(client: Client, events) -> None:
    """Submit a short op and wait for it to succeed: whatever admission would have done with the
    events before it (a retry, an admission) it has done by then."""
    probe = await client.submit(spec("probe", "sleep 0.1"))
    await events.expect(OperationSucceeded, probe, timeout=30)


# --- retries ----------------------------------------------------------------------------------

async def test_an_op_that_fails_twice_then_succeeds_is_retried_on_new_pods_and_ends_succeeded(
        client, events, core_v1, k8s_namespace):
    op_id = await client.submit(spec("flaky", exit_codes="1,1,0", retries=2))
    await events.expect(OperationSucceeded, op_id, timeout=40)
    assert [e.attempt for e in events.of(op_id, OperationAdmitted)] == [0, 1, 2]
    retries = events.of(op_id, RetryScheduled)
    assert [(r.attempt, r.retries_used) for r in retries] == [(0, 1), (1, 2)]
    assert [(f.attempt, f.exit_code) for f in events.of(op_id, OperationFailed)] == [(0, 1), (1, 1)]
    pods = await pods_of(core_v1, k8s_namespace, op_id)
    assert sorted(pods) == [f"op-{op_id}-{i}" for i in range(3)]
    assert [exit_code(pods[f"op-{op_id}-{i}"]) for i in range(3)] == [1, 1, 0]
    assert [pods[f"op-{op_id}-{i}"].status.phase for i in range(3)] == ["Failed", "Failed", "Succeeded"]


async def test_an_op_that_keeps_failing_ends_failed_after_max_retries_with_no_further_pod(
        client, events, core_v1, k8s_namespace):
    op_id = await client.submit(spec("broken", exit_codes="1,1,1", retries=1))
    last = await events.expect(OperationFailed, op_id, timeout=40, where=lambda e: e.attempt == 1)
    assert last.exit_code == 1
    final = await events.expect(FailureFinal, op_id)  # admission's decision: the op's end
    assert (final.attempt, final.retries_used, final.max_retries) == (1, 1, 1)
    await settled(client, events)
    assert [e.attempt for e in events.of(op_id, OperationAdmitted)] == [0, 1]
    assert [r.attempt for r in events.of(op_id, RetryScheduled)] == [0]
    assert [f.attempt for f in events.of(op_id, FailureFinal)] == [1]
    (row,) = [r for r in await client.ops() if r.op_id == op_id]
    assert (row.status, row.attempt) == ("failed", 1)
    assert not events.of(op_id, OperationSucceeded)
    assert (await client.why(op_id)).status == "failed"
    pods = await pods_of(core_v1, k8s_namespace, op_id)
    assert sorted(pods) == [f"op-{op_id}-0", f"op-{op_id}-1"]
    assert [exit_code(pods[f"op-{op_id}-{i}"]) for i in range(2)] == [1, 1]


# --- approval and conditions ------------------------------------------------------------------

async def test_an_op_that_is_not_approved_gets_no_pod_until_it_is_approved_then_runs(
        client, client_as, events, core_v1, k8s_namespace):
    op_id = await client.submit(spec("held", is_approved=False))
    hold = await events.expect(OperationOnHold, op_id)
    assert hold.reason == "is_approved_false"
    await settled(client, events)  # a cycle ran after the hold: still no pod
    assert await pods_of(core_v1, k8s_namespace, op_id) == {}
    assert not events.of(op_id, OperationAdmitted)
    await (await client_as("alice")).approve(op_id, requested_by="someone-else")  # an approver, in its own name
    assert (await events.expect(OperationApproved, op_id)).approved_by == "alice"
    running = await events.expect(OperationRunning, op_id)
    await events.expect(OperationSucceeded, op_id, timeout=30)
    pods = await pods_of(core_v1, k8s_namespace, op_id)
    assert list(pods) == [running.pod_name] and exit_code(pods[running.pod_name]) == 0


async def test_a_rejected_op_never_gets_a_pod(client, events, core_v1, k8s_namespace):
    op_id = await client.submit(spec("refused", is_approved=False))
    await events.expect(OperationOnHold, op_id)
    await client.reject(op_id, comment="too expensive")
    rejected = await events.expect(OperationRejected, op_id)
    assert rejected.reason == "approval_rejected" and "too expensive" in rejected.message
    await settled(client, events)
    assert await pods_of(core_v1, k8s_namespace, op_id) == {}
    assert not events.of(op_id, OperationAdmitted)


async def test_an_op_whose_condition_is_false_is_skipped_and_gets_no_pod(client, events, core_v1, k8s_namespace):
    op_id = await client.submit(spec("cond", params={"lr": 0.001}, conditions="{{ lr > 0.01 }}"))
    skipped = await events.expect(OperationSkipped, op_id)
    assert "lr > 0.01" in skipped.message
    await settled(client, events)
    assert await pods_of(core_v1, k8s_namespace, op_id) == {}
    assert not events.of(op_id, OperationAdmitted)


# --- stop -------------------------------------------------------------------------------------

async def test_stopping_a_running_op_deletes_its_pod_and_ends_it_stopped_not_failed(
        client, events, core_v1, k8s_namespace):
    op_id = await client.submit(spec("long", "sleep 60"))
    running = await events.expect(OperationRunning, op_id)
    await client.stop(op_id)
    await events.expect(OperationStopped, op_id, timeout=20)
    assert await pod_gone(core_v1, k8s_namespace, running.pod_name)
    await settled(client, events)
    assert not events.of(op_id, OperationFailed) and not events.of(op_id, OperationSucceeded)
    assert not events.of(op_id, RetryScheduled)
    assert (await client.why(op_id)).status == "stopped"


# --- sweeps -----------------------------------------------------------------------------------

SWEEP = """
version: 1.1
kind: operation
name: sweep
matrix:
  kind: grid
  concurrency: 3
  params:
    trial: {kind: range, value: [0, 10, 1]}
component:
  inputs: [{name: trial, type: int}]
  run:
    kind: job
    container:
      image: python:3.11-slim
      command: ["sh", "-c", "sleep 1.5"]
      resources: {limits: {nvidia.com/gpu: 1}}
"""


class RunningPods:
    """Watches the namespace's pods (list, then watch from its resourceVersion) in a thread and
    records the most pods ever Running at once."""

    def __init__(self, core_v1, namespace: str) -> None:
        self.core_v1, self.namespace = core_v1, namespace
        self.running: set[str] = set()
        self.max_running = 0
        self.seen: set[str] = set()
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="running-pods", daemon=True)

    def _observe(self, kind: str, pod) -> None:
        name = pod.metadata.name
        self.seen.add(name)
        if kind != "DELETED" and pod.status.phase == "Running":
            self.running.add(name)
        else:
            self.running.discard(name)
        self.max_running = max(self.max_running, len(self.running))

    def _run(self) -> None:
        try:
            listed = self.core_v1.list_namespaced_pod(self.namespace)
            for pod in listed.items:
                self._observe("ADDED", pod)
            version = listed.metadata.resource_version
            self.ready.set()
            while not self.stopping.is_set():
                w = watch.Watch()
                for event in w.stream(self.core_v1.list_namespaced_pod, self.namespace,
                                      resource_version=version, timeout_seconds=1):
                    self._observe(event["type"], event["object"])
                    version = event["object"].metadata.resource_version
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc
            self.ready.set()

    async def start(self) -> RunningPods:
        self.thread.start()
        assert await asyncio.to_thread(self.ready.wait, 10), "the pod watch did not start"
        return self

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.to_thread(self.thread.join, 10)
        if self.error is not None:
            raise self.error


async def test_a_sweep_of_ten_never_runs_more_than_its_concurrency_of_three_and_all_succeed(
        client, events, core_v1, k8s_namespace, tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(SWEEP))
    specs = load_polyaxonfile_batch(path, salt=k8s_namespace)
    assert len(specs) == 10 and {s.batch_concurrency for s in specs} == {3}
    watcher = await RunningPods(core_v1, k8s_namespace).start()
    try:
        ids = [await client.submit(s) for s in specs]
        for op_id in ids:
            await events.expect(OperationSucceeded, op_id, timeout=60)
    finally:
        await watcher.stop()
    assert watcher.seen >= {f"op-{op_id}-0" for op_id in ids}
    assert watcher.max_running == 3, watcher.max_running  # 8 free GPUs: only the batch limits it
    assert sorted(events.of(i, OperationSubmitted)[0].spec.params["trial"] for i in ids) == list(range(10))
    assert {events.of(i, OperationSubmitted)[0].spec.batch for i in ids} == {specs[0].batch}


async def test_restart_copy_and_resume_run_new_pods_linked_to_the_original(client, events, core_v1, k8s_namespace):
    from opsched.proto.events import (
        OperationFailed,
        OperationResumed,
        OperationSubmitted,
        OperationSucceeded,
    )

    original = await client.submit(spec("orig", exit_codes="1,0"))
    failed = await events.expect(OperationFailed, original, timeout=30)
    assert failed.exit_code == 1
    restarted = await client.restart(original, {"lr": 0.5})
    copied = await client.restart(original, copy=True)
    await client.resume(original)
    assert (await events.expect(OperationSubmitted, restarted)).original_op_id == original
    assert (await events.expect(OperationSubmitted, copied)).relation == "copy"
    assert (await events.expect(OperationResumed, original)).attempt == 1
    resumed = await events.expect(OperationSucceeded, original, timeout=30)  # attempt 1 exits 0
    assert resumed.attempt == 1
    assert set(await pods_of(core_v1, k8s_namespace, original)) == {f"op-{original}-0", f"op-{original}-1"}
    for new in (restarted, copied):
        await events.expect(OperationFailed, new, timeout=30)  # same spec: attempt 0 exits 1 again
        assert set(await pods_of(core_v1, k8s_namespace, new)) == {f"op-{new}-0"}
    copy_pod = (await pods_of(core_v1, k8s_namespace, copied))[f"op-{copied}-0"]
    assert {"name": "OPSCHED_COPY_FROM", "value": original} in [
        {"name": e.name, "value": e.value} for e in copy_pod.spec.containers[0].env]


# --- services -----------------------------------------------------------------------------------

SERVICE = """
version: 1.1
kind: component
name: notebook
run:
  kind: service
  ports: [8888]
  replicas: 2
  container:
    image: jupyter/base-notebook:2024-01-15
    readinessProbe: {tcpSocket: {port: 8888}, initialDelaySeconds: 1}
"""


def _ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


async def test_a_service_of_two_replicas_runs_once_ready_shows_its_endpoint_and_stop_ends_it_stopped(
        client, events, core_v1, k8s_namespace):
    from opsched.polyaxonfile import parse_polyaxonfile
    from opsched.view import table

    op_id = await client.submit(parse_polyaxonfile(textwrap.dedent(SERVICE)))
    names = [f"op-{op_id}-0", f"op-{op_id}-0-replica-1"]

    async def running_not_ready() -> bool:
        pods = await pods_of(core_v1, k8s_namespace, op_id)
        return len(pods) == 2 and all(p.status.phase == "Running" and not _ready(p) for p in pods.values())
    # the simulated kubelet holds them not Ready for 1 s
    await eventually(running_not_ready, "both pods Running, not yet Ready", timeout=20, interval=0.05)
    assert not events.of(op_id, OperationRunning)  # Running is not enough: a service runs once it is Ready
    running = await events.expect(OperationRunning, op_id, timeout=20)
    assert all(_ready(p) for p in (await pods_of(core_v1, k8s_namespace, op_id)).values())
    assert running.endpoint is not None and (running.endpoint.host, running.endpoint.ports) == (
        f"op-{op_id}-0.{k8s_namespace}.svc", [8888])
    svc = await asyncio.to_thread(core_v1.read_namespaced_service, f"op-{op_id}-0", k8s_namespace)
    assert svc.spec.type == "ClusterIP" and [p.port for p in svc.spec.ports] == [8888]
    shown = table(await client.ops())
    assert f"kubectl port-forward -n {k8s_namespace} svc/op-{op_id}-0 8888:8888" in shown
    await client.stop(op_id)
    await events.expect(OperationStopped, op_id, timeout=20)
    assert all([await pod_gone(core_v1, k8s_namespace, name) for name in names])
    services = await asyncio.to_thread(core_v1.list_namespaced_service, k8s_namespace)
    assert f"op-{op_id}-0" not in {s.metadata.name for s in services.items}  # deleted with its pods
    assert (await client.why(op_id)).status == "stopped" and not events.of(op_id, OperationFailed)
