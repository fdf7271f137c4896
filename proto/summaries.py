"""What views need of an op once it has left admission's memory: its summary, one key per op in a
compacted key-value bucket (``subjects.OPS_BUCKET``, history 1), written by admission when a finished
op's retention ttl has passed and before its events are purged from the op stream. ``opsched ops``,
``why`` and ``status`` of an old op answer from it."""
from __future__ import annotations

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
