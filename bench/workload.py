"""The events of the benchmark's workload: op specs, the events that make an op pending or running,
and the queues file. Built from the wire contract directly (the benchmark does not import the tests).
What ops there are, in which queues, comes from the YAML generator config (``bench/generator.py``)."""
from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgspec

from bench.common import GPU
from bench.generator import PRODUCT_LABEL, Submission
from opsched.proto.cluster import NodeObserved
from opsched.proto.events import (
    CostEstimated,
    Event,
    Money,
    OperationAdmitted,
    OperationRunning,
    OperationSubmitted,
    OperationSucceeded,
)
from opsched.proto.queues import QueuesConfig
from opsched.proto.spec import Container, OpSpec, Resources

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
NAMESPACE = "opsched"


def gpu_spec(gpus: int = 1, seconds: float = 600, queue: str | None = None, priority: int = 0) -> OpSpec:
    """A training op asking for ``gpus`` GPUs (as a limit) that runs ``seconds`` on a simulated node."""
    return OpSpec(name="bench-train", queue=queue, priority=priority, container=Container(
        image="python:3.11-slim", command=["sh", "-c", f"sleep {_decimal(seconds)}"],
        resources=Resources(limits={GPU: str(gpus)}, requests={"cpu": "100m", "memory": "64Mi"})))


def _decimal(seconds: float) -> str:
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


@functools.lru_cache(maxsize=4096)
def _spec(gpus: int, seconds: float, queue: str | None, priority: int) -> OpSpec:
    return gpu_spec(gpus, seconds, queue, priority)


def spec_of(sub: Submission, routed: bool = False) -> OpSpec:
    """The (shared, cached) spec of a generated op; ``routed``: it names its queue and priority (for
    a submit through the SDK), else the queue and priority travel in ``submitted`` as admission sets them."""
    if routed:
        return _spec(sub.gpus, sub.runtime_s, sub.queue, sub.priority)
    return _spec(sub.gpus, sub.runtime_s, None, 0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def op_id(prefix: str, i: int) -> str:
    return f"{prefix}{i:07d}"


PENDING_EVENTS = 2  # per op: ``pending_events``


def pending_events(oid: str, sub: Submission, when: datetime) -> list[Event]:
    """Submitted, then its cost estimate: the op is ready to queue (its caching is off, as the workload's ops are
    independent: its cache gate is answered at its ``submitted``, ``rules.caching``; a stream written before issue
    36 also had a ``cache_missed`` ``disabled``)."""
    spec = spec_of(sub)
    return [OperationSubmitted(op_id=oid, at=when, spec=spec, queue=sub.queue, submitted_at=when,
                               priority=sub.priority),
            CostEstimated(op_id=oid, at=when, estimate=Money(amount=1.0), basis="default", duration_s=sub.runtime_s)]


def admitted_event(oid: str, sub: Submission, when: datetime, flavor: str, product: str) -> OperationAdmitted:
    return OperationAdmitted(op_id=oid, at=when, spec=spec_of(sub), queue=sub.queue, namespace=NAMESPACE,
                             pod_name=f"op-{oid}-0", flavors={GPU: flavor}, node_selector={PRODUCT_LABEL: product})


def running_event(oid: str, when: datetime, node: str | None) -> OperationRunning:
    return OperationRunning(op_id=oid, at=when, pod_name=f"op-{oid}-0", node=node)


def succeeded_event(oid: str, when: datetime) -> OperationSucceeded:
    return OperationSucceeded(op_id=oid, at=when, pod_name=f"op-{oid}-0")


def node_event(name: str, gpus: int, product: str = "A100") -> NodeObserved:
    return NodeObserved(node=name, at=T0, labels={PRODUCT_LABEL: product},
                        allocatable={GPU: str(gpus), "cpu": "64", "memory": "512Gi", "pods": "110"})


def write_queues(path: Path, config: QueuesConfig) -> Path:
    """A queues file (``OPSCHED_QUEUES_FILE``) holding ``config``."""
    path.write_bytes(msgspec.yaml.encode(config))
    return path
