"""Time limits the dispatcher enforces itself (with the injected clock):

- ``termination.timeout``: the pod carries ``activeDeadlineSeconds`` and the kubelet kills it; should a
  pod still run ``TIMEOUT_GRACE_S`` after its deadline (a kubelet that ignores it), the dispatcher
  releases its attempt and publishes ``timed_out`` itself.
- ``termination.ttl``: a finished pod is deleted ``ttl`` seconds after it ended (annotated first, so
  the deletion is never mistaken for a failure).
- the queue's ``pendingTimeout``: a pod that kube-scheduler has reported Unschedulable (condition
  PodScheduled False, reason Unschedulable) for that long is released with its whole attempt and the
  op is ``evicted`` (reason ``unschedulable``, the scheduler's own message): it goes back to its queue
  after a back-off and never holds quota forever.
- a pod admitted onto new nodes of a node pool (annotated ``opsched.io/pool``): it is released only once it has had
  no node for ``max(pendingTimeout, provisioningTimeoutSeconds)`` since its creation (kube-scheduler re-marks it
  Unschedulable at every retry while the autoscaler adds nodes), as ``evicted`` (reason ``node_not_provisioned``).
The decision is a pure function of a pod (as the watch decodes it, ``kobjects.Pod``) and the time. The pods
are the pod watchers' while they are synced, else a list (as the reconciler's).
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from opsched.proto.events import OperationEvicted, OperationTimedOut
from opsched.proto.reasons import Eviction
from opsched.rules.naming import pod_name
from opsched.rules.podspec import (
    ANNOTATION_EVICTED,
    ANNOTATION_PENDING_TIMEOUT,
    ANNOTATION_POOL,
    ANNOTATION_PROVISIONING_TIMEOUT,
    ANNOTATION_TTL,
    LABEL_ATTEMPT,
    LABEL_OP,
)
from opsched.services.dispatcher.gang import gang_backoff
from opsched.services.dispatcher.kobjects import ObjectMeta, Pod, PodCondition, PodStatus
from opsched.services.runtime.clock import Clock

TIMEOUT_GRACE_S = 30.0
CHECK_INTERVAL_S = 5.0
TTL_EXPIRED, TIMEOUT, UNSCHEDULABLE = "ttl_expired", "timeout", Eviction.UNSCHEDULABLE
NODE_NOT_PROVISIONED = Eviction.NODE_NOT_PROVISIONED
EVICTIONS = (UNSCHEDULABLE, NODE_NOT_PROVISIONED)


@dataclass(frozen=True)
class Expiry:
    kind: str  # TTL_EXPIRED or TIMEOUT
    namespace: str
    name: str
    op_id: str
    attempt: int
    node: str | None
    message: str = ""


def expiry_of(pod: Pod, now: datetime) -> Expiry | None:
    meta, status = pod.metadata, pod.status or PodStatus()
    annotations, labels = meta.annotations or {}, meta.labels or {}
    if meta.deletion_timestamp or ANNOTATION_EVICTED in annotations or LABEL_OP not in labels:
        return None
    node = pod.spec.node_name if pod.spec else None
    ident = (meta.namespace or "", meta.name, labels[LABEL_OP], int(labels.get(LABEL_ATTEMPT, "0")), node)
    phase = status.phase
    if phase in ("Succeeded", "Failed") and ANNOTATION_TTL in annotations:
        ended = _finished_at(status)
        if ended is not None and ended + timedelta(seconds=float(annotations[ANNOTATION_TTL])) <= now:
            return Expiry(TTL_EXPIRED, *ident)
    deadline = pod.spec.active_deadline_seconds if pod.spec else None
    if phase in ("Running", "Pending") and deadline and status.start_time is not None:
        if status.start_time + timedelta(seconds=float(deadline) + TIMEOUT_GRACE_S) <= now:
            return Expiry(TIMEOUT, *ident)
    if phase == "Pending" and not node and ANNOTATION_POOL in annotations:
        return _not_provisioned(meta, status, annotations, ident, now)
    if phase == "Pending" and not node and ANNOTATION_PENDING_TIMEOUT in annotations:
        return _unschedulable(meta, status, float(annotations[ANNOTATION_PENDING_TIMEOUT]), ident, now)
    return None


def _not_provisioned(meta: ObjectMeta, status: PodStatus, annotations: dict[str, str],
                     ident: tuple[str, str, str, int, str | None], now: datetime) -> Expiry | None:
    """A pod waiting for a new node of its pool: released when none has come for ``max(pendingTimeout,
    provisioningTimeoutSeconds)`` since the pod was created."""
    timeout = _seconds(annotations.get(ANNOTATION_PROVISIONING_TIMEOUT))
    limit = max(timeout, _seconds(annotations.get(ANNOTATION_PENDING_TIMEOUT)))
    if meta.creation_timestamp is None or meta.creation_timestamp + timedelta(seconds=limit) > now:
        return None
    condition = next((c for c in status.conditions or [] if c.type == "PodScheduled"), None)
    said = condition.message if condition is not None and condition.message else "not scheduled"
    message = (f"no node of pool {annotations[ANNOTATION_POOL]} came within {timeout:g}s "
               f"(provisioningTimeoutSeconds): {said}")
    return Expiry(NODE_NOT_PROVISIONED, *ident, message=message)


def _seconds(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value is not None else 0.0
    except ValueError:  # written by the dispatcher: a hand-edited pod's nonsense counts as none
        return 0.0


def _unschedulable(meta: ObjectMeta, status: PodStatus, limit: float,
                   ident: tuple[str, str, str, int, str | None], now: datetime) -> Expiry | None:
    condition: PodCondition | None = next((c for c in status.conditions or [] if c.type == "PodScheduled"), None)
    if condition is None or condition.status != "False" or condition.reason != "Unschedulable":
        return None
    since = condition.last_transition_time or meta.creation_timestamp
    if since is None or since + timedelta(seconds=limit) > now:
        return None
    message = f"unschedulable for {limit:g}s (pendingTimeout): {condition.message or 'no reason given'}"
    return Expiry(UNSCHEDULABLE, *ident, message=message)


def _finished_at(status: PodStatus) -> datetime | None:
    times = [cs.state.terminated.finished_at for cs in status.container_statuses or []
             if cs.state and cs.state.terminated and cs.state.terminated.finished_at]
    return max(times) if times else None


async def check_expiry(pods: Callable[[], Awaitable[list[Pod]]], releaser, publish, clock: Clock,
                       stop: asyncio.Event, log) -> None:
    """Every few seconds: delete finished pods past their ttl; time out pods past their deadline."""
    while not stop.is_set():
        try:
            for expiry in [e for pod in await pods() if (e := expiry_of(pod, clock.now()))]:
                await _act(expiry, releaser, publish, clock)
        except Exception as exc:  # noqa: BLE001 - API or bus trouble: the next check retries
            log.warning("expiry_check_failed", error=repr(exc))
        waits = [asyncio.ensure_future(clock.sleep(CHECK_INTERVAL_S)), asyncio.ensure_future(stop.wait())]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()


async def _act(expiry: Expiry, releaser, publish, clock: Clock) -> None:
    if expiry.kind == TTL_EXPIRED:
        await releaser.release(expiry.namespace, [expiry.name], {ANNOTATION_EVICTED: TTL_EXPIRED}, 0)
        return
    names = await releaser.attempt_pods(expiry.namespace, expiry.op_id, expiry.attempt, expiry.name)
    existing = await releaser.annotate(expiry.namespace, names, {ANNOTATION_EVICTED: expiry.kind})
    if expiry.kind in EVICTIONS:
        await publish(OperationEvicted(op_id=expiry.op_id, at=clock.now(), attempt=expiry.attempt, reason=expiry.kind,
                                       message=expiry.message,
                                       retry_after_s=gang_backoff(expiry.attempt, releaser.settings)))
    else:
        await publish(OperationTimedOut(op_id=expiry.op_id, at=clock.now(), attempt=expiry.attempt,
                                        pod_name=expiry.name, node=expiry.node,
                                        message="ran past termination.timeout; stopped by opsched"))
    await releaser.delete(expiry.namespace, existing, releaser.settings.stop_grace_s, pod_name(expiry.op_id, expiry.attempt))
