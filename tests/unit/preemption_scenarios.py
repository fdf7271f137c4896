"""Preemption scenarios: GPU ops queued, started and decided on by the admission cycle, and what to
read from its decisions (who is admitted, who is asked to give way, why an op waits)."""
from __future__ import annotations

from datetime import datetime

from opsched.proto.events import OperationAdmitted, PreemptRequested
from opsched.proto.queues import Preemption
from opsched.services.admission import cycle
from opsched.services.admission.state.admission_state import AdmissionState
from tests.builders import book, fold, op, queue, queued, running, t

NS = "opsched"


def decide(state: AdmissionState, b, now: datetime) -> list:
    return cycle.decide(state, b, now, NS)


def gpu_op(op_id: str, gpus: int, *, queue: str = "q", at: float = 0, priority: int = 0,
           preemptible: bool = True, workers: int = 0) -> list:
    """A queued op asking for ``gpus`` GPUs (per pod), submitted ``at`` seconds after T0."""
    spec = op(op_id).gpus(gpus).priority(priority).preemptible(preemptible)
    if workers:
        spec = spec.replicas("worker", workers)
    return queued(spec.queue(queue).build(), op_id=op_id, queue=queue, at=t(at))


def start(state: AdmissionState, b, at: float, *ids: str, nodes: dict[str, str] | None = None) -> None:
    """A cycle at ``t(at)`` admits exactly ``ids`` (in that order); each starts running a second later."""
    assert admitted_ids(decide(state, b, t(at))) == list(ids)
    for op_id in ids:
        fold(running(op_id, at=t(at + 1), attempt=state.ops[op_id].attempt, node=(nodes or {}).get(op_id)),
             state=state)


def admitted_ids(decisions) -> list[str]:
    return [d.op_id for d in decisions if isinstance(d, OperationAdmitted)]


def preemptions(decisions) -> list[PreemptRequested]:
    return [d for d in decisions if isinstance(d, PreemptRequested)]


def victims(decisions) -> list[str]:
    return sorted(d.op_id for d in preemptions(decisions))


def codes(state: AdmissionState, op_id: str) -> list[str]:
    return [r.code for r in state.ops[op_id].blocked]


Q2 = book(queue("q", gpus={"h100": 2}))
Q1 = book(queue("q", gpus={"h100": 1}))


def q1(**preemption) -> object:
    return book(queue("q", gpus={"h100": 1}, preemption=Preemption(**preemption)))
