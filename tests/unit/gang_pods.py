"""The pods of op ``g``'s attempts, as the dispatcher sees them (``PodView``) and as the API returns
them (``kobjects.Pod``), with the settings and annotations the gang tests use."""
from __future__ import annotations

import dataclasses
from datetime import datetime

from opsched.rules.podspec import (
    ANNOTATION_EVICTED,
    ANNOTATION_PREEMPT_REASON,
    ANNOTATION_PREEMPTED_BY,
    ANNOTATION_STOPPED,
    LABEL_ATTEMPT,
    LABEL_GANG_SIZE,
    LABEL_OP,
    LABEL_REPLICA,
    MANAGED_BY,
    MANAGER,
)
from opsched.services.dispatcher.gang import GANG_TIMEOUT, PodView
from opsched.services.dispatcher.kobjects import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
)
from opsched.services.runtime.settings import Settings
from tests.builders import T0, t

SETTINGS = Settings(gang_timeout_s=120, gang_backoff_base_s=10, gang_backoff_max_s=300)
PREEMPTED_BY = {ANNOTATION_PREEMPTED_BY: "urgent", ANNOTATION_PREEMPT_REASON: "within_queue"}
STOPPED_ANN = {ANNOTATION_STOPPED: "true"}
TIMEOUT_ANN = {ANNOTATION_EVICTED: GANG_TIMEOUT}


def pod(replica: str = "main", phase: str | None = "Running", *, size: int = 3, attempt: int = 0,
        created: datetime = T0, **fields) -> PodView:
    """One pod of attempt ``attempt`` of op ``g`` (a gang of ``size``)."""
    name = "op-g-0" if replica == "main" else f"op-g-0-{replica}"
    failure = ("Error", "boom", 1) if phase == "Failed" else None
    return PodView(name=name, namespace="ns", op_id="g", attempt=attempt, replica=replica, gang_size=size,
                   phase=phase, node="n1", created=created, failure=failure, **fields)


def gang(*phases: str | None, size: int | None = None, **fields) -> list[PodView]:
    """The main pod with the first phase, ``worker-<i>`` with the others."""
    size = size or len(phases)
    return [pod("main" if i == 0 else f"worker-{i - 1}", p, size=size, **fields) for i, p in enumerate(phases)]


def gone(view: PodView, **fields) -> PodView:
    return dataclasses.replace(view, gone=True, **fields)


def v1pod(name: str = "op-g-0", phase: str = "Running", *, replica: str | None = "main", size: str | None = "2",
          annotations: dict | None = None, deleting: bool = False, exit_code: int | None = None) -> Pod:
    labels = {MANAGED_BY: MANAGER, LABEL_OP: "g", LABEL_ATTEMPT: "1"}
    labels.update({k: v for k, v in ((LABEL_REPLICA, replica), (LABEL_GANG_SIZE, size)) if v is not None})
    statuses = None
    if exit_code is not None:
        term = ContainerState(terminated=ContainerStateTerminated(exit_code=exit_code))
        statuses = [ContainerStatus(name="main", state=term)]
    return Pod(
        metadata=ObjectMeta(name=name, namespace="ns", labels=labels, annotations=annotations,
                            creation_timestamp=T0, deletion_timestamp=t(1) if deleting else None),
        spec=PodSpec(node_name="n1"),
        status=PodStatus(phase=phase, container_statuses=statuses))
