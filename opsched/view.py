"""A client-side view of operations, folded from the events on the bus (for `ops` and `watch`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from opsched.proto import codec
from opsched.proto.events import (
    BudgetExceeded,
    CacheHit,
    CostEstimated,
    CostRecorded,
    DispatchDelayed,
    ErrorRaised,
    Event,
    FailureFinal,
    Money,
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
from opsched.proto.outputs import Endpoint, OpItem
from opsched.proto.pod_resources import accelerators_of
from opsched.proto.reasons import Ending, Reason, dependency_name, message
from opsched.proto.resources import gpus_label, is_device
from opsched.proto.summaries import OpSummary, accelerators_of_label
from opsched.rules.node_pools import awaited, waiting_for_node

TERMINAL_STATUSES = TERMINAL_LABELS


@dataclass
class OpRow:
    """What the fold knows of one op: typed facts (``item`` makes its ``OpItem``; the table formats that)."""

    op_id: str
    name: str = ""
    queue: str = ""
    status: str = "pending"
    accelerators: dict[str, float] = field(default_factory=dict)  # resource -> total over its pods
    node: str = ""
    estimate: Money | None = None
    cost: Money | None = None  # actual, every cost_recorded summed
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
    project: str = ""
    user: str = ""  # who submitted it (``requested_by``)
    tags: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    iteration: int | None = None
    created_at: datetime | None = None
    admitted_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    awaiting_nodes: str = ""  # admitted onto new nodes of a pool: why it is not running yet (until it runs)

    @property
    def gpus(self) -> int:
        """Whole accelerator devices over all its pods."""
        return int(sum(n for r, n in self.accelerators.items() if is_device(r)))

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
        if isinstance(event, SpendRolled) or (isinstance(event, BudgetExceeded) and event.scope == "pool"):
            return None  # a budget scope's spend, or a node pool's budget spent: no op's
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
        reason = ": ".join(p for p in (summary.reason, summary.message) if p)  # as its end's event showed it
        if summary.original_op_id and not reason:
            reason = f"{summary.relation} of {summary.original_op_id}"
        row = self.rows[summary.op_id] = OpRow(
            summary.op_id, name=summary.name, queue=summary.queue, status=summary.status,
            accelerators=dict(summary.accelerators) or accelerators_of_label(summary.gpus),
            node=summary.node, attempt=summary.attempt, reason=reason,
            estimate=Money(amount=summary.estimate, currency=summary.currency) if summary.estimate else None,
            cost=Money(amount=summary.cost, currency=summary.currency) if summary.cost else None,
            rank=max(s.rank for s in SHOWN.values()) + 1, outputs=dict(summary.outputs),
            project=summary.project, user=summary.requested_by, tags=list(summary.tags), params=dict(summary.params),
            batch=summary.batch, iteration=summary.iteration, created_at=summary.submitted_at,
            admitted_at=summary.admitted_at, started_at=summary.running_since, ended_at=summary.ended_at)
        self.summarized.add(summary.op_id)
        return row

    def items(self, now: datetime | None = None) -> list[OpItem]:
        """Every op as ``OpItem``, with its trial params (those that differ within its batch)."""
        return items(list(self.rows.values()), now)

    def fold_bytes(self, data: bytes) -> OpRow | None:
        try:
            return self.fold(codec.decode_event(data))
        except Exception:  # noqa: BLE001 - somebody's malformed message: not an op row
            return None


def _reason(row: OpRow) -> str:
    """Its reason, and the fields of its file opsched ignored (warned at submit)."""
    note = f"ignored: {', '.join(row.ignored)}" if row.ignored else ""
    return "; ".join(p for p in (row.reason, note) if p)


def _details(row: OpRow, event: Event) -> None:
    _facts(row, event)
    _times(row, event)
    _reason_now(row, event)


def _facts(row: OpRow, event: Event) -> None:
    """What ``event`` tells of the op itself: its name, queue, GPUs, estimate, agent and node."""
    if isinstance(event, OperationSubmitted):
        _submitted(row, event)
    elif isinstance(event, CostEstimated):
        row.estimate = event.estimate
    elif isinstance(event, CostRecorded):
        spent = (row.cost.amount if row.cost is not None else 0.0) + event.amount
        row.cost = Money(amount=round(spent, 6), currency=event.currency)
    elif isinstance(event, OperationAdmitted):
        row.agent, row.admitted_at = event.agent, event.at
        if event.estimate is not None:  # its estimate on the flavor it was admitted to (its currency: the estimate's)
            row.estimate = Money(amount=event.estimate, currency=row.estimate.currency if row.estimate else "USD")
    elif isinstance(event, (OperationRunning, OperationSucceeded, OperationFailed)) and event.node:
        row.node = f"{row.agent}/{event.node}" if row.agent else event.node
    if isinstance(event, OperationSucceeded):
        row.outputs = dict(event.outputs)
    if isinstance(event, OperationRunning) and event.endpoint is not None:
        e = event.endpoint
        row.endpoint = {"host": e.host, "ports": list(e.ports), "portForward": e.port_forward()}
    if isinstance(event, OperationRejected) and not row.name:  # rejected at submit: no ``submitted`` named it
        row.name, row.queue = event.name or "", event.queue or row.queue


def _submitted(row: OpRow, event: OperationSubmitted) -> None:
    """What its submit says: name, queue, GPUs, who, its sweep, tags, params."""
    spec = event.spec
    row.name, row.queue = spec.name, event.queue
    row.max_retries = spec.termination.max_retries
    if event.original_op_id:
        row.reason = f"{event.relation} of {event.original_op_id}"
    row.accelerators = accelerators_of(spec)
    row.ignored = list(spec.ignored)
    row.batch = spec.batch or ""
    row.project, row.user, row.tags = spec.project or "", event.requested_by or "", list(spec.tags)
    row.params, row.iteration, row.created_at = dict(spec.params), spec.iteration, event.submitted_at


def _times(row: OpRow, event: Event) -> None:
    """When it started running (its latest attempt) and when it ended (its first terminal event)."""
    if isinstance(event, OperationRunning):
        row.started_at, row.ended_at = event.at, None
    if isinstance(event, OperationResumed):
        row.ended_at = None
    elif SHOWN.get(type(event)) is not None and SHOWN[type(event)].label in TERMINAL_LABELS and not row.terminal:
        row.ended_at = event.at


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
        row.reason, row.awaiting_nodes = serving_text(row.endpoint), ""
    elif isinstance(event, OperationRunning) and row.awaiting_nodes:  # its nodes came
        row.reason, row.awaiting_nodes = "", ""
    elif isinstance(event, (OperationAdmitted, OperationDispatched)):  # (no longer waiting for the API)
        row.awaiting_nodes = _awaiting_nodes(event) if isinstance(event, OperationAdmitted) else row.awaiting_nodes
        row.reason = row.awaiting_nodes or f"pod {event.namespace}/{event.pod_name}"  # its new nodes, until running
    elif isinstance(event, DispatchDelayed) and row.rank <= Status.ADMITTED:
        row.reason = message(Reason.WAITING_FOR_DEPENDENCY, dependency=dependency_name(event.dependency),
                             since=event.at, detail=event.message)


def _awaiting_nodes(event: OperationAdmitted) -> str:
    """The new nodes of a pool an admitted op waits for (``waiting_for_node``), or ""."""
    if not any(event.provisioning):
        return ""
    return waiting_for_node(awaited(event.provisioning), event.at, event.provisioning_expected_s,
                            event.provisioning_timeout_s).message


def serving_text(endpoint: dict[str, Any]) -> str:
    """How a running service is reached: its Service's DNS name and ports, and the port-forward line."""
    ports = ",".join(map(str, endpoint["ports"]))
    return f"serving at {endpoint['host']}:{ports}; from here: {endpoint['portForward']}"


def item(row: OpRow, now: datetime | None = None, trial_params: dict[str, Any] | None = None) -> OpItem:
    """``row`` as `opsched ops -o json` prints it; ``now`` for the duration of an op still running."""
    end = row.ended_at or (now or datetime.now(timezone.utc) if row.status == "running" else None)
    duration = (end - row.started_at).total_seconds() if row.started_at is not None and end is not None else None
    e = row.endpoint
    return OpItem(
        op_id=row.op_id, name=row.name, queue=row.queue, project=row.project, user=row.user, status=row.status,
        attempt=row.attempt, reason=_reason(row), batch=row.batch, iteration=row.iteration, params=dict(row.params),
        trial_params=dict(trial_params or {}), tags=list(row.tags), gpus=row.gpus,
        accelerators=dict(row.accelerators), node=row.node, agent=row.agent, estimate=row.estimate, cost=row.cost,
        created_at=row.created_at, admitted_at=row.admitted_at, started_at=row.started_at, ended_at=row.ended_at,
        duration_s=max(0.0, duration) if duration is not None else None, outputs=dict(row.outputs),
        endpoint=Endpoint(host=e["host"], ports=list(e["ports"]), port_forward=e["portForward"]) if e else None,
        ignored=list(row.ignored), max_retries=row.max_retries, history=list(row.history))


def trial_params(rows: list[OpRow]) -> dict[str, dict[str, Any]]:
    """Op id -> the params that differ among the ops of its batch (a sweep's trials), for ops of a batch of 2+."""
    batches: dict[str, list[OpRow]] = {}
    for r in rows:
        if r.batch:
            batches.setdefault(r.batch, []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for members in batches.values():
        if len(members) < 2:
            continue
        keys = {k for r in members for k in r.params}
        varying = sorted(k for k in keys if len({repr(r.params.get(k)) for r in members}) > 1)
        for r in members:
            out[r.op_id] = {k: r.params[k] for k in varying if k in r.params}
    return out


def items(rows: list[OpRow], now: datetime | None = None, among: list[OpRow] | None = None) -> list[OpItem]:
    """``rows`` as ``OpItem``s; their trial params are what differs within their batch among ``among`` (default:
    ``rows``; a listing filtered down to one trial still shows what sets it apart in its sweep)."""
    trials = trial_params(among if among is not None else rows)
    return [item(r, now, trials.get(r.op_id)) for r in rows]


def gpus_text(accelerators: dict[str, float]) -> str:
    """``2``, ``1xamd.com``, ``8GiB-mem`` or ``-`` (``proto.resources.gpus_label``)."""
    return gpus_label([(accelerators, 1)])


def money_text(money: Money | None) -> str:
    return f"{money.amount:.2f} {money.currency}" if money is not None else "-"


MIN_REASON = 30  # the REASON column is cut to the terminal's width, never below this


def span_text(seconds: float) -> str:
    """``42s``, ``3m12s``, ``2h5m``, ``4d``."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60}m"
    return f"{s // 86400}d"


def clock_text(at: datetime | None, now: datetime) -> str:
    """Local ``HH:MM`` today, ``MM-DD HH:MM`` another day, ``-`` for none."""
    if at is None:
        return "-"
    local, today = at.astimezone(), now.astimezone()
    return f"{local:%H:%M}" if local.date() == today.date() else f"{local:%m-%d %H:%M}"


def params_text(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def table(rows: list[OpRow], *, wide: bool = False, width: int | None = None, now: datetime | None = None,
          among: list[OpRow] | None = None) -> str:
    """The ops, one a line; under them, each running service's endpoint in full. REASON is cut so the line fits
    ``width`` (the terminal's), never below ``MIN_REASON``; ``wide``: never cut, with PROJECT, USER and BATCH.
    A PARAMS column (the trial params, within ``among``: ``items``) shows when a listed op is a trial of a sweep."""
    import shutil

    now = now or datetime.now(timezone.utc)
    listed = items(rows, now, among)
    trials = any(i.trial_params for i in listed)
    headers = ["ID", "NAME", "QUEUE", "STATUS", "ATTEMPT", "GPUS", "NODE", "EST. COST", "AGE", "STARTED", "DURATION"]
    headers += ["PROJECT", "USER", "BATCH"] if wide else []
    headers += ["PARAMS"] if trials else []
    data = []
    for i in listed:
        line = [i.op_id, i.name or "?", i.queue or "?", i.status, str(i.attempt), gpus_text(i.accelerators),
                i.node or "-", money_text(i.estimate),
                span_text((now - i.created_at).total_seconds()) if i.created_at else "-",
                clock_text(i.started_at, now), span_text(i.duration_s) if i.duration_s is not None else "-"]
        line += [i.project or "-", i.user or "-", i.batch or "-"] if wide else []
        line += [params_text(i.trial_params) or "-"] if trials else []
        data.append(line)
    widths = [max(len(x) for x in col) for col in zip(headers, *data)]
    room = None if wide else max(MIN_REASON, (width or shutil.get_terminal_size().columns)
                                 - sum(w + 2 for w in widths))
    reasons = [i.reason if room is None or len(i.reason) <= room else i.reason[:room - 1] + "…" for i in listed]
    lines = ["  ".join(v.ljust(w) for v, w in zip(line, widths)) + "  " + reason
             for line, reason in zip([headers, *data], ["REASON", *reasons])]
    lines = [line.rstrip() for line in lines]
    serving = [r for r in rows if r.endpoint and r.status == "running"]
    if serving:
        lines += ["", "services:"] + [f"  {r.op_id}  {serving_text(r.endpoint)}" for r in serving]
    return "\n".join(lines)
