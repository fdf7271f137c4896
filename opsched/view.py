"""A client-side view of operations, folded from the events on the bus (for `ops` and `watch`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opsched.proto import codec
from opsched.proto.events import (
    CacheHit,
    CostEstimated,
    DispatchDelayed,
    ErrorRaised,
    Event,
    FailureFinal,
    OperationAdmitted,
    OperationDispatched,
    OperationEvicted,
    OperationFailed,
    OperationOnHold,
    OperationPreempted,
    OperationRejected,
    OperationResumed,
    OperationRunning,
    OperationSkipped,
    OperationStopped,
    OperationSubmitted,
    OperationSucceeded,
    OperationTimedOut,
    PreemptRequested,
    RetryScheduled,
    SpendRolled,
)
from opsched.proto.lifecycle import ACTIVE_LABELS, NEXT_ATTEMPT_SHOWN, SHOWN, TERMINAL_LABELS, Status
from opsched.proto.pod_resources import gpus_of
from opsched.proto.reasons import Ending, Reason, dependency_name, message
from opsched.proto.summaries import OpSummary

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
    rank: float = -1  # of its status (proto.lifecycle.SHOWN)
    history: list[str] = field(default_factory=list)
    max_retries: int | None = None
    ignored: list[str] = field(default_factory=list)  # fields of its file with no effect in opsched
    batch: str = ""  # the sweep it belongs to
    agent: str = ""  # the agent its attempt was admitted to ("": the default one); its node reads <agent>/<node>
    outputs: dict[str, Any] = field(default_factory=dict)  # what it succeeded with (its ``succeeded``'s)
    # a running service's: {"host": NAME.NS.svc, "ports": [...], "portForward": "kubectl port-forward ..."}
    endpoint: dict[str, Any] = field(default_factory=dict)

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
        self.summarized: set[str] = set()  # ops shown from their summary: final, events add nothing

    def fold(self, event: Event) -> OpRow | None:
        if isinstance(event, SpendRolled):
            return None  # a budget scope's spend, no op's
        if isinstance(event, ErrorRaised):
            self.errors.append(event)
        row = self.rows.get(event.op_id)
        if event.op_id in self.summarized:
            return row
        if row is None:
            if isinstance(event, ErrorRaised):
                return None
            row = self.rows[event.op_id] = OpRow(event.op_id)
        row.history.append(codec.type_of(event))
        shown = SHOWN.get(type(event))  # a ``failed`` ends the op only by admission's ``failure_final``
        _details(row, event)
        if isinstance(event, OperationResumed):  # a stopped/failed op continues: it is not over any more
            row.status, row.rank = NEXT_ATTEMPT_SHOWN
            row.attempt, row.reason = event.attempt, Ending.RESUMED
            return row
        if event.attempt > row.attempt and not row.terminal:
            row.rank = NEXT_ATTEMPT_SHOWN.rank  # a new attempt after a preemption or eviction
        if shown is not None and shown.rank > row.rank and not row.terminal:
            row.status, row.rank = shown
            row.attempt = event.attempt
        return row

    def add_summary(self, summary: OpSummary) -> OpRow:
        """An op that ended and left admission's memory, as its summary (the ops bucket) tells it."""
        reason = summary.message if summary.message and not summary.reason else summary.reason
        if summary.original_op_id and not reason:
            reason = f"{summary.relation} of {summary.original_op_id}"
        row = self.rows[summary.op_id] = OpRow(
            summary.op_id, name=summary.name or "?", queue=summary.queue or "?", status=summary.status,
            gpus=summary.gpus, node=summary.node or "-", attempt=summary.attempt, reason=reason,
            cost=f"{summary.estimate:.2f} {summary.currency}" if summary.estimate else "-",
            rank=max(s.rank for s in SHOWN.values()) + 1, outputs=dict(summary.outputs))
        self.summarized.add(summary.op_id)
        return row

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
    return gpus_of(event.spec)


def _details(row: OpRow, event: Event) -> None:
    _facts(row, event)
    _reason_now(row, event)


def _facts(row: OpRow, event: Event) -> None:
    """What ``event`` tells of the op itself: its name, queue, GPUs, estimate, agent and node."""
    if isinstance(event, OperationSubmitted):
        row.name, row.queue = event.spec.name, event.queue
        row.max_retries = event.spec.termination.max_retries
        if event.original_op_id:
            row.reason = f"{event.relation} of {event.original_op_id}"
        row.gpus = _gpus(event)
        row.ignored = list(event.spec.ignored)
        row.batch = event.spec.batch or ""
    elif isinstance(event, CostEstimated):
        row.cost = f"{event.estimate.amount:.2f} {event.estimate.currency}"
    elif isinstance(event, OperationAdmitted):
        row.agent = event.agent
    elif isinstance(event, (OperationRunning, OperationSucceeded, OperationFailed)) and event.node:
        row.node = f"{row.agent}/{event.node}" if row.agent else event.node
    if isinstance(event, OperationSucceeded):
        row.outputs = dict(event.outputs)
    if isinstance(event, OperationRunning) and event.endpoint is not None:
        e = event.endpoint
        row.endpoint = {"host": e.host, "ports": list(e.ports), "portForward": e.port_forward()}
    if isinstance(event, OperationRejected) and row.name == "?":  # rejected at submit: no ``submitted`` named it
        row.name, row.queue = event.name or "?", event.queue or row.queue


def _reason_now(row: OpRow, event: Event) -> None:  # noqa: C901 - one branch per event type: a flat table
    """Why the op is where ``event`` left it (the REASON column); an event that says nothing of it leaves it."""
    if isinstance(event, (OperationFailed, OperationRejected)):
        row.reason = f"{event.reason}: {event.message}" if event.message else event.reason
    elif isinstance(event, OperationSucceeded) and (event.reason != Ending.COMPLETED or event.outputs_warning):
        row.reason = "; ".join(p for p in (event.reason if event.reason != Ending.COMPLETED else "",
                                           event.outputs_warning) if p)
    elif isinstance(event, OperationStopped):
        row.reason = event.message or event.reason
    elif isinstance(event, (OperationOnHold, OperationSkipped, OperationTimedOut)):
        row.reason = event.message or getattr(event, "reason", "")
    elif isinstance(event, RetryScheduled):
        row.reason = f"attempt {event.attempt} failed ({event.reason}); retry in {event.retry_after_s:g}s"
    elif isinstance(event, FailureFinal):  # the failure's own words (its ``failed``), and why it is not retried
        row.reason = "; ".join(p for p in (row.reason or event.reason, event.message) if p)
    elif isinstance(event, PreemptRequested):  # no preemptor: an admin drained its queue (``queue_drained``)
        row.reason = f"preempted by {event.preemptor}: {event.message}" if event.preemptor else event.message
    elif isinstance(event, (OperationPreempted, OperationEvicted)):
        row.reason = f"{codec.type_of(event)} ({event.reason}); back in queue"
    elif isinstance(event, CacheHit):
        row.reason = f"cache hit of {event.original_op_id}"
    elif isinstance(event, OperationRunning) and event.endpoint is not None:
        row.reason = serving_text(row.endpoint)
    elif isinstance(event, (OperationAdmitted, OperationDispatched)):  # (no longer waiting for the API)
        row.reason = f"pod {event.namespace}/{event.pod_name}"
    elif isinstance(event, DispatchDelayed) and row.rank <= Status.ADMITTED:
        row.reason = message(Reason.WAITING_FOR_DEPENDENCY, dependency=dependency_name(event.dependency),
                             since=event.at, detail=event.message)


def serving_text(endpoint: dict[str, Any]) -> str:
    """How a running service is reached: its Service's DNS name and ports, and the port-forward line."""
    ports = ",".join(map(str, endpoint["ports"]))
    return f"serving at {endpoint['host']}:{ports}; from here: {endpoint['portForward']}"


def table(rows: list[OpRow]) -> str:
    """The ops, one a line; under them, each running service's endpoint in full (the REASON column is cut)."""
    headers = ("ID", "NAME", "QUEUE", "STATUS", "ATTEMPT", "GPUS", "NODE", "EST. COST", "REASON")
    data = [(r.op_id, r.name, r.queue, r.status, r.attempt, r.gpus, r.node, r.cost, _reason(r)[:60]) for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *data)]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(line, widths)).rstrip() for line in [headers, *data]]
    serving = [r for r in rows if r.endpoint and r.status == "running"]
    if serving:
        lines += ["", "services:"] + [f"  {r.op_id}  {serving_text(r.endpoint)}" for r in serving]
    return "\n".join(lines)
