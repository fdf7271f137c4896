"""Preemption, eviction and aging.

    fold(preempt_requested("lo", preemptor="hi"), preempted("lo", at=t(30)), state=state)
    fold(evicted("g", at=t(100), retry_after_s=30), state=state)
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from opsched.proto.events import OperationEvicted, OperationPreempted, PreemptRequested
from tests.builders.clock import T0
from tests.builders.events import NAMESPACE


def preempt_requested(op_id: str = "op-1", *, preemptor: str = "op-2", at: datetime = T0, attempt: int = 0,
                      namespace: str = NAMESPACE, reason: str = "within_queue",
                      pod_names: list[str] | None = None, message: str = "") -> PreemptRequested:
    return PreemptRequested(op_id=op_id, at=at, attempt=attempt, pod_names=pod_names or [f"op-{op_id}-{attempt}"],
                            namespace=namespace, preemptor=preemptor, reason=reason, message=message)


def preempted(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0, preemptor: str = "",
              reason: str = "within_queue") -> OperationPreempted:
    return OperationPreempted(op_id=op_id, at=at, attempt=attempt, preemptor=preemptor, reason=reason)


def evicted(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0, reason: str = "pods_not_ready",
            retry_after_s: float = 0.0) -> OperationEvicted:
    return OperationEvicted(op_id=op_id, at=at, attempt=attempt, reason=reason, retry_after_s=retry_after_s)


def configure_aging(state: Any, b: Any, now: datetime = T0):
    """Give ``state`` the aging settings and orderings of book ``b`` (as the service does on a config change)."""
    state.queues.configure_queues(b.config.queues, now)
    return state
