"""Events of an operation's life, at ``at=`` (default ``T0``): submitted, gates, admitted, ..., stopped."""
from __future__ import annotations

from datetime import datetime

from opsched.proto.events import (
    CacheHit,
    CacheMissed,
    CostEstimated,
    FailureFinal,
    Money,
    OperationAdmitted,
    OperationDispatched,
    OperationFailed,
    OperationRejected,
    OperationRunning,
    OperationStopped,
    OperationSubmitted,
    OperationSucceeded,
    RetryScheduled,
    StopRequested,
)
from opsched.proto.spec import OpSpec
from tests.builders.clock import T0

NAMESPACE = "opsched"


def submitted(spec: OpSpec, *, op_id: str = "op-1", at: datetime = T0, queue: str | None = None,
              priority: int | None = None, submitted_at: datetime | None = None,
              by: str | None = None) -> OperationSubmitted:
    return OperationSubmitted(op_id=op_id, at=at, spec=spec, queue=queue or spec.queue or "default",
                              submitted_at=submitted_at or at,
                              priority=spec.priority if priority is None else priority, requested_by=by)


def cost_estimated(op_id: str = "op-1", *, at: datetime = T0, amount: float = 1.0,
                   basis: str = "default") -> CostEstimated:
    return CostEstimated(op_id=op_id, at=at, estimate=Money(amount=amount), basis=basis, duration_s=3600.0)


def cache_missed(op_id: str = "op-1", *, at: datetime = T0, reason: str = "not_found") -> CacheMissed:
    return CacheMissed(op_id=op_id, at=at, fingerprint="f" * 32, reason=reason)


def cache_hit(op_id: str = "op-1", *, original: str = "op-0", at: datetime = T0) -> CacheHit:
    return CacheHit(op_id=op_id, at=at, fingerprint="f" * 32, original_op_id=original)


def gates_cleared(op_id: str = "op-1", *, at: datetime = T0, caching: bool = False) -> list:
    """The answers that clear an op's gates: the cost estimate, and for an op that uses the cache (``caching``,
    ``rules.caching``) the cache's miss; an op with caching off (the builders' default) has its cache gate
    answered at its ``submitted``."""
    return [cost_estimated(op_id, at=at), *([cache_missed(op_id, at=at)] if caching else [])]


def admitted(spec: OpSpec | OperationSubmitted, *, op_id: str | None = None, at: datetime = T0,
             attempt: int = 0, queue: str | None = None, namespace: str = NAMESPACE,
             pod_name: str | None = None) -> OperationAdmitted:
    if isinstance(spec, OperationSubmitted):
        op_id, queue, spec = op_id or spec.op_id, queue or spec.queue, spec.spec
    op_id = op_id or "op-1"
    return OperationAdmitted(op_id=op_id, at=at, attempt=attempt, spec=spec,
                             queue=queue or spec.queue or "default", namespace=namespace,
                             pod_name=pod_name or f"op-{op_id}-{attempt}")


def dispatched(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0,
               namespace: str = NAMESPACE) -> OperationDispatched:
    return OperationDispatched(op_id=op_id, at=at, attempt=attempt, pod_name=f"op-{op_id}-{attempt}",
                               namespace=namespace)


def running(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0,
            node: str | None = "gpu-node-1") -> OperationRunning:
    return OperationRunning(op_id=op_id, at=at, attempt=attempt, pod_name=f"op-{op_id}-{attempt}", node=node)


def succeeded(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0, node: str | None = None,
              reason: str = "Completed") -> OperationSucceeded:
    return OperationSucceeded(op_id=op_id, at=at, attempt=attempt, node=node, reason=reason)


def failed(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0, reason: str = "Error",
           message: str = "", node: str | None = None, exit_code: int | None = 1) -> OperationFailed:
    return OperationFailed(op_id=op_id, at=at, attempt=attempt, reason=reason, message=message,
                           node=node, exit_code=exit_code)


def retry_scheduled(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0, reason: str = "Error",
                    retry_after_s: float = 10.0, retries_used: int = 1) -> RetryScheduled:
    """Admission's decision on attempt ``attempt``'s failure: retried."""
    return RetryScheduled(op_id=op_id, at=at, attempt=attempt, reason=reason, retry_after_s=retry_after_s,
                          retries_used=retries_used)


def failure_final(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0, reason: str = "Error",
                  message: str = "no retry left: 0 of maxRetries 0 used", retries_used: int = 0,
                  max_retries: int | None = None) -> FailureFinal:
    """Admission's decision on attempt ``attempt``'s failure: final, the op failed."""
    return FailureFinal(op_id=op_id, at=at, attempt=attempt, reason=reason, message=message,
                        retries_used=retries_used, max_retries=max_retries)


def rejected(op_id: str = "op-1", *, at: datetime = T0, reason: str = "unknown_queue",
             message: str = "unknown queue") -> OperationRejected:
    return OperationRejected(op_id=op_id, at=at, reason=reason, message=message)


def stopped(op_id: str = "op-1", *, at: datetime = T0, message: str = "") -> OperationStopped:
    return OperationStopped(op_id=op_id, at=at, message=message)


def stop_requested(op_id: str = "op-1", *, at: datetime = T0, attempt: int = 0,
                   namespace: str = NAMESPACE) -> StopRequested:
    return StopRequested(op_id=op_id, at=at, attempt=attempt, pod_name=f"op-{op_id}-{attempt}",
                         namespace=namespace)
