"""The workload of the benchmark: op specs, the events that make an op pending or running, and
queue books. Built from the wire contract directly (the benchmark does not import the tests)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from bench.common import GPU
from proto.cluster import NodeObserved
from proto.events import (
    CacheMissed, CostEstimated, Event, Money, OperationAdmitted, OperationRunning, OperationSubmitted,
    OperationSucceeded,
)
from proto.queues import Flavor, FlavorQuota, Queue, QueuesConfig, ResourceQuota
from proto.spec import Container, OpSpec, Resources

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
PRODUCT_LABEL = "nvidia.com/gpu.product"
FLAVOR = "a100"
NAMESPACE = "opsched"
FINGERPRINT = "f" * 32


def gpu_spec(gpus: int = 1, seconds: int = 600, queue: str | None = None) -> OpSpec:
    """A training op asking for ``gpus`` GPUs (as a limit) that runs ``seconds`` on a simulated node."""
    return OpSpec(name="bench-train", queue=queue, container=Container(
        image="python:3.11-slim", command=["sh", "-c", f"sleep {seconds}"],
        resources=Resources(limits={GPU: str(gpus)}, requests={"cpu": "100m", "memory": "64Mi"})))


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def op_id(prefix: str, i: int) -> str:
    return f"{prefix}{i:07d}"


def pending_events(oid: str, spec: OpSpec, queue: str, when: datetime) -> list[Event]:
    """Submitted, then both gates (a cost estimate and a cache miss): the op is ready to queue."""
    return [OperationSubmitted(op_id=oid, at=when, spec=spec, queue=queue, submitted_at=when, priority=0),
            CostEstimated(op_id=oid, at=when, estimate=Money(amount=1.0), basis="default", duration_s=3600.0),
            CacheMissed(op_id=oid, at=when, fingerprint=FINGERPRINT, reason="disabled")]


def admitted_event(oid: str, spec: OpSpec, queue: str, when: datetime) -> OperationAdmitted:
    return OperationAdmitted(op_id=oid, at=when, spec=spec, queue=queue, namespace=NAMESPACE,
                             pod_name=f"op-{oid}-0", flavors={GPU: FLAVOR},
                             node_selector={PRODUCT_LABEL: "A100"})


def running_event(oid: str, when: datetime, node: str | None) -> OperationRunning:
    return OperationRunning(op_id=oid, at=when, pod_name=f"op-{oid}-0", node=node)


def succeeded_event(oid: str, when: datetime) -> OperationSucceeded:
    return OperationSucceeded(op_id=oid, at=when, pod_name=f"op-{oid}-0")


def node_event(name: str, gpus: int) -> NodeObserved:
    return NodeObserved(node=name, at=T0, labels={PRODUCT_LABEL: "A100"},
                        allocatable={GPU: str(gpus), "cpu": "64", "memory": "512Gi", "pods": "110"})


def queue_names(count: int) -> list[str]:
    return [f"q-{i:04d}" for i in range(count)]


def gpu_queues_config(count: int, gpus_each: float | None) -> QueuesConfig:
    """``count`` queues with a GPU quota of ``gpus_each`` on one A100 flavor (None: a huge quota)."""
    nominal = gpus_each if gpus_each is not None else 10**9
    queues = [Queue(name=name, resources=[ResourceQuota(resource=GPU, flavors=[
        FlavorQuota(name=FLAVOR, nominal=nominal)])]) for name in queue_names(count)]
    return QueuesConfig(queues=queues, default_queue=queues[0].name,
                        flavors=[Flavor(name=FLAVOR, node_labels={PRODUCT_LABEL: "A100"})])


def write_unlimited_queues(path: Path) -> Path:
    """The pipeline scenarios' queues file: one queue with no concurrency limit and no quota."""
    path.write_text("defaultQueue: default\nqueues:\n  - name: default\n")
    return path
