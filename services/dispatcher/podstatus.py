"""Translate a pod into what the dispatcher knows about it (pure; no API calls)."""
from __future__ import annotations

from opsched.proto.reasons import Failure
from opsched.rules.podspec import (
    LABEL_ATTEMPT,
    LABEL_GANG_SIZE,
    LABEL_OP,
    LABEL_REPLICA,
    MAIN_REPLICA,
    WATCHED_ANNOTATIONS,
)
from opsched.services.dispatcher.gang import PodView
from opsched.services.dispatcher.kobjects import Pod
from opsched.services.dispatcher.outputs import outputs_of


def op_of(pod: Pod) -> tuple[str, int] | None:
    labels = pod.metadata.labels or {}
    if LABEL_OP not in labels:
        return None
    try:
        return labels[LABEL_OP], int(labels.get(LABEL_ATTEMPT, "0"))
    except ValueError:
        return labels[LABEL_OP], 0


def view_of(pod: Pod, *, gone: bool = False) -> PodView | None:
    """The pod as one member of its attempt; None for a pod no op owns. Pods created before gangs
    existed (no replica or gang-size label) are the main pod of a gang of one."""
    ident = op_of(pod)
    if ident is None:
        return None
    meta, labels = pod.metadata, pod.metadata.labels or {}
    phase = pod.status.phase if pod.status else None
    annotations = {k: v for k, v in (meta.annotations or {}).items() if k in WATCHED_ANNOTATIONS}
    return PodView(
        name=meta.name, namespace=meta.namespace or "", op_id=ident[0], attempt=ident[1],
        replica=labels.get(LABEL_REPLICA, MAIN_REPLICA), gang_size=_size(labels.get(LABEL_GANG_SIZE)),
        phase=phase, node=pod.spec.node_name if pod.spec else None, created=meta.creation_timestamp,
        deleting=meta.deletion_timestamp is not None, gone=gone, annotations=annotations,
        failure=failure_of(pod) if phase == "Failed" else None,
        outputs=outputs_of(pod) if phase == "Succeeded" else None, ready=ready(pod))


def ready(pod: Pod) -> bool:
    """Its condition Ready is True (the kubelet's word that every container passed its readiness probe)."""
    conditions = pod.status.conditions if pod.status else None
    return any(c.type == "Ready" and c.status == "True" for c in conditions or [])


def _size(value: str | None) -> int:
    try:
        return max(1, int(value)) if value is not None else 1
    except ValueError:
        return 1


def failure_of(pod: Pod) -> tuple[str, str, int | None]:
    """(reason, message, exit code) of a failed pod: the pod's own reason wins (e.g. DeadlineExceeded)."""
    status = pod.status
    assert status is not None  # a Failed pod has a status
    for cs in status.container_statuses or []:
        term = cs.state.terminated if cs.state else None
        if term is not None and term.exit_code not in (None, 0):
            reason = status.reason or term.reason or Failure.ERROR
            message = status.message or term.message or f"container {cs.name} exited with code {term.exit_code}"
            return reason, message, term.exit_code
    return status.reason or Failure.FAILED, status.message or "pod failed", None
