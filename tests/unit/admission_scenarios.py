"""Admission scenarios: queue books, ops whose gates cleared, the fold and one cycle of decisions."""
from __future__ import annotations

from opsched.proto.events import OperationAdmitted
from opsched.proto.queues import Queue as QueueConfig
from opsched.proto.queues import QueuesConfig
from opsched.services.admission import cycle
from opsched.services.admission.model.queues import Book, compile_book
from opsched.services.admission.state.admission_state import AdmissionState
from tests.builders import T0, gates_cleared, op, submitted

NS = "opsched"


def queues(*specs: tuple[str, int] | tuple[str, int, int], default: str | None = None) -> Book:
    """``queues(("a", 1), ("b", 5, 10))``: name, concurrency[, priority]."""
    qs = [QueueConfig(name=s[0], concurrency=s[1], priority=s[2] if len(s) > 2 else 0) for s in specs]
    return compile_book(QueuesConfig(queues=qs, default_queue=default or qs[0].name))


def fold(*events, state: AdmissionState | None = None) -> AdmissionState:
    state = state or AdmissionState()
    for event in events:
        if isinstance(event, list):
            fold(*event, state=state)
        else:
            state.apply(event)
    return state


def ready(op_id: str, *, queue: str = "default", priority: int = 0, at=T0, by: str | None = None) -> list:
    """An op submitted at ``at`` (by requester ``by``) whose cost and cache gates have both cleared (a cache miss)."""
    return [submitted(op(op_id).priority(priority).build(), op_id=op_id, queue=queue, at=at, by=by),
            *gates_cleared(op_id)]


def admitted_ids(decisions) -> list[str]:
    return [d.op_id for d in decisions if isinstance(d, OperationAdmitted)]


def decide(state: AdmissionState, config: Book | None = None, now=T0) -> list:
    return cycle.decide(state, config or queues(("default", 10)), now, NS)


def snapshot(state: AdmissionState) -> dict:
    return {
        "ops": {k: {**vars(v), "history": vars(v.history).copy()} for k, v in state.ops.items()},
        "queues": {k: (v.pending.ids(), sorted(state.usage.active.get(k, ()))) for k, v in state.queues.queues.items()},
        "cache_hits": list(state.queues.cache_hits),
    }
