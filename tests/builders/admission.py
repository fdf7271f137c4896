"""Admission state: ops queued with both gates cleared, and events folded into an ``AdmissionState``.

    state = fold(*queued(op("x").gpus(2).build(), op_id="x"))
    observe(state, node("gpu-a", gpus=2, product="A100"))
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from opsched.proto.cluster import ClusterEvent
from opsched.proto.spec import OpSpec
from opsched.rules.caching import caching_enabled
from tests.builders.clock import T0
from tests.builders.events import cache_missed, cost_estimated, submitted


def queued(spec: OpSpec, *, op_id: str = "op-1", at: datetime = T0, amount: float = 1.0,
           queue: str | None = None) -> list:
    """An op submitted at ``at`` whose gates both cleared (cost ``amount``; a cache miss when it uses the cache,
    ``rules.caching``: else its cache gate is answered at its ``submitted``)."""
    return [submitted(spec, op_id=op_id, at=at, queue=queue), cost_estimated(op_id, at=at, amount=amount),
            *([cache_missed(op_id, at=at)] if caching_enabled(spec) else [])]


def fold(*events: Any, state: Any = None):
    """Fold events (lists are flattened; cluster facts are observed) into an AdmissionState."""
    from opsched.services.admission.state.admission_state import AdmissionState

    state = state if state is not None else AdmissionState()
    for event in events:
        if isinstance(event, (list, tuple)):
            fold(*event, state=state)
        elif isinstance(event, ClusterEvent):  # nodes, agents' heartbeats
            state.observe(event)
        else:
            state.apply(event)
    return state
