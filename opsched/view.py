"""A client-side view of operations, folded from the events on the bus (for `ops` and `watch`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from proto import codec
from proto.events import (
    CacheHit,
    CostEstimated,
    ErrorRaised,
    Event,
    OperationAdmitted,
    OperationEvicted,
    OperationFailed,
    OperationOnHold,
    OperationPreempted,
    OperationRejected,
    OperationRunning,
    OperationSkipped,
    OperationStopped,
    OperationSubmitted,
    OperationSucceeded,
    OperationTimedOut,
    PreemptRequested,
    RetryScheduled,
)
from proto.failures import is_infrastructure, will_retry
from proto.lifecycle import ACTIVE_LABELS, TERMINAL_LABELS
from proto.resources import GPU_MEMORY, accelerators, gpu_memory_gib

RANK = {"submitted": 0, "cost_estimated": 0, "cache_missed": 0, "cache_hit": 0, "on_hold": 1, "approved": 1,
        "admitted": 2, "retrying": 6, "retry_scheduled": 6, "skipped": 10, "timed_out": 10,
        "dispatched": 3, "running": 4, "preempt_requested": 5, "stop_requested": 5, "preempted": 6,
        "evicted": 6, "succeeded": 10, "failed": 10, "rejected": 10, "stopped": 10}
STATUS = {"submitted": "pending", "cost_estimated": "pending", "cache_missed": "pending",
          "cache_hit": "pending", "stop_requested": "stopping", "preempt_requested": "preempting",
          "approved": "pending", "retry_scheduled": "retrying"}
TERMINAL_STATUSES = TERMINAL_LABELS


@dataclass
class OpRow:
    op_id: str
    name: str = "?"
    queue: str = "?"
    status: str = "pending"
    gpus: str = "-"
    node: str = "-"
    cost: str = "-"
    attempt: int = 0
    reason: str = ""
    rank: int = -1
    history: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    max_retries: int | None = None
    ignored: list[str] = field(default_factory=list)  # fields of its file with no effect in opsched

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_LABELS

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class OpsView:
    def __init__(self) -> None:
        self.rows: dict[str, OpRow] = {}
        self.errors: list[ErrorRaised] = []

    def fold(self, event: Event) -> OpRow | None:
        if isinstance(event, ErrorRaised):
            self.errors.append(event)
        row = self.rows.get(event.op_id)
        if row is None:
            if isinstance(event, ErrorRaised):
                return None
            row = self.rows[event.op_id] = OpRow(event.op_id)
        kind = codec.type_of(event)
        row.history.append(kind)
        if kind == "failed" and self._will_retry(row, event):
            kind = "retrying"
        _details(row, event)
        if kind == "resumed":  # a stopped/failed op continues: it is not over any more
            row.status, row.rank, row.attempt, row.reason = "pending", 1, event.attempt, "resumed"
            return row
        if event.attempt > row.attempt and not row.terminal:
            row.rank = 1  # a new attempt after a preemption or eviction: its statuses start again
        if RANK.get(kind, -1) > row.rank and not row.terminal:
            row.rank = RANK[kind]
            row.status = STATUS.get(kind, kind)
            row.attempt = event.attempt
        return row

    def _will_retry(self, row: OpRow, event: OperationFailed) -> bool:
        """A failed attempt that admission will retry is not the end (same rule as admission's)."""
        own = sum(1 for r in row.failures if not is_infrastructure(r))
        infra = len(row.failures) - own
        row.failures.append(event.reason)
        return row.active and will_retry(event.reason, row.max_retries, own, infra)

    def fold_bytes(self, data: bytes) -> OpRow | None:
        try:
            return self.fold(codec.decode_event(data))
        except Exception:  # noqa: BLE001 - somebody's malformed message: not an op row
            return None


def _reason(row: OpRow) -> str:
    """Its reason, and the fields of its file opsched ignored (warned at submit)."""
    note = f"ignored: {', '.join(row.ignored)}" if row.ignored else ""
    return "; ".join(p for p in (row.reason, note) if p)


def _gpus(event: OperationSubmitted) -> str:
    """Whole devices of all its pods (``2``, ``1xamd.com``), and shared GPU memory (``8GiB-mem``)."""
    containers = [(event.spec.container, 1)] + [(g.container, g.count) for g in event.spec.replicas]
    gpus: dict[str, int] = {}
    memory = 0
    for container, count in containers:
        for resource, n in accelerators(container.resources.limits).items():
            gpus[resource] = gpus.get(resource, 0) + n * count
        if GPU_MEMORY in container.resources.limits:
            memory += gpu_memory_gib(container.resources.limits[GPU_MEMORY]) * count
    parts = [f"{n}x{r.split('/')[0]}" if r != "nvidia.com/gpu" else str(n) for r, n in gpus.items()]
    return ",".join(parts + ([f"{memory}GiB-mem"] if memory else [])) or "-"


def _details(row: OpRow, event: Event) -> None:
    if isinstance(event, OperationSubmitted):
        row.name, row.queue = event.spec.name, event.queue
        row.max_retries = event.spec.termination.max_retries
        if event.original_op_id:
            row.reason = f"{event.relation} of {event.original_op_id}"
        row.gpus = _gpus(event)
        row.ignored = list(event.spec.ignored)
    elif isinstance(event, CostEstimated):
        row.cost = f"{event.estimate.amount:.2f} {event.estimate.currency}"
    elif isinstance(event, (OperationRunning, OperationSucceeded, OperationFailed)) and event.node:
        row.node = event.node
    if isinstance(event, (OperationFailed, OperationRejected)):
        row.reason = f"{event.reason}: {event.message}" if event.message else event.reason
    elif isinstance(event, OperationSucceeded) and event.reason != "Completed":
        row.reason = event.reason
    elif isinstance(event, OperationStopped):
        row.reason = event.message or event.reason
    elif isinstance(event, (OperationOnHold, OperationSkipped, OperationTimedOut)):
        row.reason = event.message or getattr(event, "reason", "")
    elif isinstance(event, RetryScheduled):
        row.reason = f"attempt {event.attempt} failed ({event.reason}); retry in {event.retry_after_s:g}s"
    elif isinstance(event, PreemptRequested):
        row.reason = f"preempted by {event.preemptor}: {event.message}"
    elif isinstance(event, (OperationPreempted, OperationEvicted)):
        row.reason = f"{codec.type_of(event)} ({event.reason}); back in queue"
    elif isinstance(event, CacheHit):
        row.reason = f"cache hit of {event.original_op_id}"
    elif isinstance(event, OperationAdmitted):
        row.reason = f"pod {event.namespace}/{event.pod_name}"


def table(rows: list[OpRow]) -> str:
    headers = ("ID", "NAME", "QUEUE", "STATUS", "ATTEMPT", "GPUS", "NODE", "EST. COST", "REASON")
    data = [(r.op_id, r.name, r.queue, r.status, r.attempt, r.gpus, r.node, r.cost, _reason(r)[:60]) for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *data)]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(line, widths)).rstrip() for line in [headers, *data]]
    return "\n".join(lines)
