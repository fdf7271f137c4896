"""What views need of an op once it has left admission's memory: its summary, one key per op in a
compacted key-value bucket (``subjects.OPS_BUCKET``, history 1), written by admission when a finished
op's retention ttl has passed and before its events are purged from the op stream. ``opsched ops``,
``why`` and ``status`` of an old op answer from it."""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from opsched.proto.history import HistoryEntry
from opsched.proto.spec import Wire


class AttemptEnd(Wire, kw_only=True):
    attempt: int
    ended: str  # how it ended: "failed", "preempted", "evicted", "stopped", ...
    reason: str = ""


class OpSummary(Wire, tag_field="type", tag="op_summary", kw_only=True):
    op_id: str
    status: str  # a terminal status label (proto.lifecycle)
    name: str = ""
    queue: str = ""
    project: str = ""
    attempt: int = 0
    reason: str = ""
    message: str = ""
    gpus: str = "-"  # as `opsched ops` shows them (proto.resources.gpus_label)
    accelerators: dict[str, float] = {}  # resource -> total over its pods (proto.pod_resources.accelerators_of)
    node: str = ""
    submitted_at: datetime | None = None
    admitted_at: datetime | None = None
    running_since: datetime | None = None
    ended_at: datetime | None = None
    estimate: float = 0.0
    currency: str = "USD"
    cost: float = 0.0  # actual, every attempt's cost_recorded summed
    attempts: list[AttemptEnd] = []  # earlier attempts and how each ended
    requested_by: str = ""
    original_op_id: str = ""  # a restart or copy of this op
    relation: str = ""
    outputs: dict[str, Any] = {}  # what it succeeded with (``OperationSucceeded.outputs``)
    history: list[HistoryEntry] = []  # what happened to it (``proto.history``), as ``why`` answered it ...
    history_dropped: int = 0  # ... and how many entries were left out
    batch: str = ""  # the sweep it belonged to
    iteration: int | None = None  # its index in its sweep
    tags: list[str] = []
    params: dict[str, Any] = {}


_LABEL_PART = re.compile(r"^(\d+)(?:x(.+))?$")


def accelerators_of_label(label: str) -> dict[str, float]:
    """The devices of a ``gpus`` label (``2``, ``1xamd.com``), for a summary written before ``accelerators``
    was: ``N`` is nvidia.com/gpu, ``NxVENDOR`` is VENDOR/gpu; shared GPU memory (``8GiB-mem``) is not kept."""
    out: dict[str, float] = {}
    for part in label.split(","):
        m = _LABEL_PART.match(part.strip())
        if m:
            resource = f"{m.group(2)}/gpu" if m.group(2) else "nvidia.com/gpu"
            out[resource] = out.get(resource, 0.0) + float(m.group(1))
    return out
