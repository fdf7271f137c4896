"""What the pods of one attempt mean, and when a gang has waited too long (pure: no API, no clock).

An attempt is one pod, or a gang: the main pod plus its replicas (labels ``opsched.io/replica`` and
``opsched.io/gang-size``). The watcher keeps a ``PodView`` per pod it saw (a deleted pod stays,
``gone``, until the whole attempt is gone) and asks ``assess`` what the attempt means now:

- pods the dispatcher released on purpose (annotated preempted, stopped or evicted) are never a
  failure; a preempted attempt is ``preempted`` once every pod of it is gone;
- ``succeeded`` when the main pod Succeeded;
- ``failed`` when any pod Failed, or was deleted by someone else before the attempt ended;
- ``running`` when every pod of the gang runs (a replica that already Succeeded counts as started); a service's
  (its pods annotated with their ports: ``rules.serving``) when every one of its pods is Ready, with its endpoint.

A gang whose main pod waits for the others (an mpijob's launcher) is ``main_due`` once they all run.

Everything here is derived from what the API holds (labels, annotations, phases), so a restarted
dispatcher reaches the same conclusions after its re-list.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opsched.proto.events import (
    Event,
    OperationEvicted,
    OperationFailed,
    OperationPreempted,
    OperationRunning,
    OperationSucceeded,
    OperationTimedOut,
)
from opsched.proto.reasons import Eviction, Failure
from opsched.rules import serving
from opsched.rules.podspec import (
    ANNOTATION_EVICTED,
    ANNOTATION_POOL,
    ANNOTATION_PREEMPT_MESSAGE,
    ANNOTATION_PREEMPT_REASON,
    ANNOTATION_PREEMPTED_BY,
    ANNOTATION_PROVISIONING_TIMEOUT,
    ANNOTATION_STOPPED,
    MAIN_REPLICA,
)

AttemptKey = tuple[str, int]  # (op id, attempt): op ids are unique across namespaces
PREEMPTED, STOPPED, EVICTED = "preempted", "stopped", "evicted"
GANG_TIMEOUT = Eviction.GANG_TIMEOUT  # evicted: the gang was not all Running in time
GANG_FAILED = Eviction.GANG_FAILED  # evicted: another pod of the gang failed
GANG_FINISHED = Eviction.GANG_FINISHED  # evicted: the main pod succeeded; the workers still running are done
POD_REJECTED = Eviction.POD_REJECTED  # evicted: the API refused another pod of the gang
NODE_NOT_PROVISIONED = Eviction.NODE_NOT_PROVISIONED  # evicted: new nodes of its pool did not come in time
TERMINAL_TYPES = ("succeeded", "failed")
STARTED_PHASES = ("Running", "Succeeded")
DELETED_REASON = Failure.POD_DELETED
DELETED_MESSAGE = "the pod was deleted before it finished"


@dataclass(frozen=True)
class PodView:
    """What the dispatcher needs to know about one pod of an attempt."""

    name: str
    namespace: str
    op_id: str
    attempt: int
    replica: str = MAIN_REPLICA
    gang_size: int = 1
    phase: str | None = None
    node: str | None = None
    created: datetime | None = None
    deleting: bool = False  # has a deletionTimestamp
    gone: bool = False  # deleted from the API
    annotations: Mapping[str, str] = field(default_factory=dict)  # the dispatcher's (release, traceparent)
    failure: tuple[str, str, int | None] | None = None  # (reason, message, exit code) when Failed
    outputs: tuple[dict[str, Any], str] | None = None  # (outputs, warning) when Succeeded (``outputs``)
    ready: bool = False  # its condition Ready is True (every container passed its readiness probe)

    @property
    def key(self) -> AttemptKey:
        return (self.op_id, self.attempt)

    @property
    def is_main(self) -> bool:
        return self.replica == MAIN_REPLICA

    @property
    def started(self) -> bool:
        return self.phase in STARTED_PHASES

    @property
    def serves(self) -> bool:
        """A service's pod: running means Ready, and it has an endpoint."""
        return serving.ANNOTATION_PORTS in self.annotations


@dataclass(frozen=True)
class Release:
    """Why the dispatcher deleted an attempt's pods on purpose (read back from their annotations)."""

    kind: str  # PREEMPTED, STOPPED or EVICTED
    reason: str = ""
    preemptor: str = ""
    message: str = ""


def release_of(views: Iterable[PodView]) -> Release | None:
    """The release annotated on any pod of the attempt; a preemption wins over a stop, a stop over an eviction."""
    views = list(views)
    for v in views:
        if ANNOTATION_PREEMPTED_BY in v.annotations:
            a = v.annotations
            return Release(PREEMPTED, a.get(ANNOTATION_PREEMPT_REASON, ""), a[ANNOTATION_PREEMPTED_BY],
                           a.get(ANNOTATION_PREEMPT_MESSAGE, ""))
    if any(v.annotations.get(ANNOTATION_STOPPED) == "true" for v in views):
        return Release(STOPPED)
    for v in views:
        if ANNOTATION_EVICTED in v.annotations:
            return Release(EVICTED, v.annotations[ANNOTATION_EVICTED])
    return None


def main_of(views: Iterable[PodView]) -> PodView | None:
    return next((v for v in views if v.is_main), None)


def ordered(views: Iterable[PodView]) -> list[PodView]:
    """The main pod first, then the replicas by name: the order in which a failure is blamed."""
    return sorted(views, key=lambda v: (not v.is_main, v.name))


# ---- what an attempt means ------------------------------------------------------------------------

def assess(views: Iterable[PodView], reported: str | None, now: datetime) -> Event | None:
    """The event the attempt's pods mean now, or None (pending, being released, or already ended).

    ``views``: every pod of one attempt seen so far (deleted ones ``gone``); ``reported``: the type
    of the last event published for the attempt (None after a restart)."""
    views = ordered(views)
    if not views:
        return None
    release = release_of(views)
    if release is not None:
        return preempted(views, release, now) if release.kind == PREEMPTED and all_gone(views) else None
    if reported in TERMINAL_TYPES:
        return None
    return _succeeded(views, now) or _failed(views, now) or _deleted(views, now) or _running(views, now)


def all_gone(views: Iterable[PodView]) -> bool:
    return all(v.gone for v in views)


def preempted(views: list[PodView], release: Release, now: datetime) -> OperationPreempted:
    v = views[0]
    return OperationPreempted(op_id=v.op_id, at=now, attempt=v.attempt, preemptor=release.preemptor,
                              reason=release.reason, message=release.message)


def _base(v: PodView, now: datetime) -> dict[str, Any]:
    return dict(op_id=v.op_id, at=now, attempt=v.attempt, pod_name=v.name, node=v.node)


DEADLINE_REASON = Failure.DEADLINE_EXCEEDED


def _present(v: PodView) -> bool:
    """In the API and not being deleted (a pod being deleted is reported by whoever deleted it)."""
    return not v.gone and not v.deleting


def _succeeded(views: list[PodView], now: datetime) -> Event | None:
    main = main_of(views)
    if main is not None and _present(main) and main.phase == "Succeeded":
        outputs, warning = main.outputs or ({}, "")
        return OperationSucceeded(**_base(main, now), outputs=outputs, outputs_warning=warning)
    return None


def _failed(views: list[PodView], now: datetime) -> Event | None:
    for v in views:
        if _present(v) and v.phase == "Failed":
            reason, message, code = v.failure or (Failure.FAILED, "pod failed", None)
            if reason == DEADLINE_REASON:  # termination.timeout (activeDeadlineSeconds): not retried
                return OperationTimedOut(**_base(v, now), message=message)
            return OperationFailed(**_base(v, now), reason=reason, message=message, exit_code=code)
    return None


def _deleted(views: list[PodView], now: datetime) -> Event | None:
    """A pod deleted by someone else before the attempt ended (a replica that had succeeded had ended)."""
    for v in views:
        if v.gone and (v.is_main or v.phase != "Succeeded"):
            return OperationFailed(**_base(v, now), reason=DELETED_REASON, message=DELETED_MESSAGE)
    return None


def _running(views: list[PodView], now: datetime) -> Event | None:
    main = main_of(views)
    if main is None or not _present(main) or main.phase != "Running":
        return None
    if any(v.deleting for v in views) or sum(v.started for v in views) < main.gang_size:
        return None
    endpoint = None
    if main.serves:  # a service runs once it serves: every pod Ready
        if sum(v.ready and v.phase == "Running" for v in views) < main.gang_size:
            return None
        ports = serving.ports_of(main.annotations[serving.ANNOTATION_PORTS])
        endpoint = serving.endpoint(main.name, main.namespace, ports)
    nodes = [v.node or "" for v in sorted(views, key=lambda v: v.name)]  # name order: the main pod first
    return OperationRunning(op_id=main.op_id, at=now, attempt=main.attempt, pod_name=main.name, node=main.node,
                            endpoint=endpoint, nodes=nodes)


# ---- the gang timeout -------------------------------------------------------------------------------

def gang_backoff(attempt: int, settings: Any) -> float:
    """Seconds before an evicted gang may be admitted again: doubles with each attempt, capped."""
    return float(min(settings.gang_backoff_max_s, settings.gang_backoff_base_s * 2 ** attempt))


def timed_out(views: Iterable[PodView], now: datetime, settings: Any) -> OperationEvicted | None:
    """An eviction when a gang's pods are not all started ``settings.gang_timeout_s`` after its main
    pod was created (a main pod that waits for the others: after the first of them). An attempt being released, deleted or failed is left to that path; a gang
    annotated ``evicted: gang_timeout`` but not yet deleted (a crash in between) is evicted again."""
    views = list(views)
    main = main_of(views)
    first = main if main is not None else min((v for v in views if v.created is not None),
                                              key=lambda v: v.created or now, default=None)
    if first is None or first.gang_size <= 1 or first.created is None:
        return None
    release = release_of(views)
    if release is not None and (release.kind, release.reason) not in ((EVICTED, GANG_TIMEOUT),
                                                                      (EVICTED, NODE_NOT_PROVISIONED)):
        return None
    if any(v.gone or v.deleting or v.phase == "Failed" for v in views):
        return None
    started = sum(v.started for v in views)
    pool, provisioning = _provisioning(views)
    limit = max(settings.gang_timeout_s, provisioning)
    waited = (now - first.created).total_seconds()
    if started >= first.gang_size or waited < limit:
        return None
    if pool and any(not v.node for v in views):  # its new nodes have not all come: the pool's, not the gang's fault
        return OperationEvicted(
            op_id=first.op_id, at=now, attempt=first.attempt, reason=NODE_NOT_PROVISIONED,
            message=f"no node of pool {pool} came within {provisioning:g}s (provisioningTimeoutSeconds): "
                    f"{sum(bool(v.node) for v in views)}/{first.gang_size} pods on a node",
            retry_after_s=gang_backoff(first.attempt, settings))
    return OperationEvicted(
        op_id=first.op_id, at=now, attempt=first.attempt, reason=GANG_TIMEOUT,
        message=f"{started}/{first.gang_size} pods running after {limit:g}s",
        retry_after_s=gang_backoff(first.attempt, settings))


def _provisioning(views: list[PodView]) -> tuple[str, float]:
    """The pools a gang admitted onto new nodes waits for (``ANNOTATION_POOL``, "": none) and how long it may."""
    for v in views:
        pool = v.annotations.get(ANNOTATION_POOL)
        if pool:
            try:
                return pool, max(0.0, float(v.annotations.get(ANNOTATION_PROVISIONING_TIMEOUT, "0")))
            except ValueError:
                return pool, 0.0
    return "", 0.0


def main_due(views: Iterable[PodView]) -> bool:
    """Whether a gang whose main pod waits (an mpijob's launcher) should have it now: never seen, and every other
    pod of the gang Running (none released, deleted or failed)."""
    views = list(views)
    if not views or main_of(views) is not None or release_of(views) is not None:
        return False
    if any(v.gone or v.deleting for v in views):
        return False
    return sum(v.phase == "Running" for v in views) == views[0].gang_size - 1
