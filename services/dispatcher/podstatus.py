"""Translate a pod's status into the lifecycle event it means (pure; no API calls)."""
from __future__ import annotations

from datetime import datetime

from kubernetes.client import V1Pod

from proto.events import Event, OperationFailed, OperationRunning, OperationSucceeded
from services.dispatcher.podspec import LABEL_ATTEMPT, LABEL_OP


def op_of(pod: V1Pod) -> tuple[str, int] | None:
    labels = pod.metadata.labels or {}
    if LABEL_OP not in labels:
        return None
    try:
        return labels[LABEL_OP], int(labels.get(LABEL_ATTEMPT, "0"))
    except ValueError:
        return labels[LABEL_OP], 0


def event_for(pod: V1Pod, now: datetime) -> Event | None:
    """The event a pod's current phase means, or None (pending, or being deleted by someone)."""
    ident = op_of(pod)
    if ident is None or pod.metadata.deletion_timestamp is not None:
        return None
    op_id, attempt = ident
    phase = pod.status.phase if pod.status else None
    base = dict(op_id=op_id, at=now, attempt=attempt, pod_name=pod.metadata.name, node=pod.spec.node_name)
    if phase == "Running":
        return OperationRunning(**base)
    if phase == "Succeeded":
        return OperationSucceeded(**base)
    if phase == "Failed":
        reason, message, code = failure_of(pod)
        return OperationFailed(**base, reason=reason, message=message, exit_code=code)
    return None


def failure_of(pod: V1Pod) -> tuple[str, str, int | None]:
    """(reason, message, exit code) of a failed pod: the pod's own reason wins (e.g. DeadlineExceeded)."""
    status = pod.status
    for cs in status.container_statuses or []:
        term = cs.state.terminated if cs.state else None
        if term is not None and term.exit_code not in (None, 0):
            reason = status.reason or term.reason or "Error"
            message = status.message or term.message or f"container {cs.name} exited with code {term.exit_code}"
            return reason, message, term.exit_code
    return status.reason or "Failed", status.message or "pod failed", None
