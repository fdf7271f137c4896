"""Admission's Prometheus metrics (``services.runtime.metrics``), named after Kueue's where one matches.

Read from its state at a scrape (the cycle pays nothing for them):

- ``opsched_ops{queue,status}``: the ops it holds per queue and lifecycle status (pending, on_hold, queued,
  admitted, dispatched, running, retrying, and finished ones until retention removes them), as Kueue's
  ``pending_workloads`` and ``admitted_active_workloads`` per cluster queue; queues without ops show 0 for
  the live statuses;
- ``opsched_queue_quota_used``, ``..._nominal``, ``..._borrowed`` ``{queue,flavor,resource}``
  (Kueue's ``cluster_queue_resource_usage`` / ``nominal_quota`` / ``borrowing``), and
  ``opsched_queue_cost_used`` / ``opsched_queue_cost_quota`` ``{queue}``: what ``opsched queues`` shows.

Counted as they happen (``Measures``, by the leader that decides):

- ``opsched_admission_decisions_total{result}``: the cycles' decisions by event (admitted, preempted,
  rejected, ...);
- ``opsched_admission_cycle_duration_seconds``: one cycle's decide (Kueue's admission attempt duration);
- ``opsched_admission_wait_seconds{queue}``: submitted -> admitted, per admitted op."""
from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from prometheus_client import Counter as PromCounter
from prometheus_client import Histogram

from proto import codec
from proto.lifecycle import Status
from services.admission import queries
from services.runtime.metrics import gauge

LIVE = (Status.PENDING, Status.ON_HOLD, Status.QUEUED, Status.ADMITTED, Status.DISPATCHED, Status.RUNNING,
        Status.RETRYING)
CYCLE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
QUOTA = ("used", "nominal", "borrowed")


class Measures:
    """The counters and histograms one admission keeps (not in any global registry: one per instance)."""

    def __init__(self) -> None:
        self.decisions = PromCounter("opsched_admission_decisions", "Decisions of admission cycles, by event",
                                     ["result"], registry=None)
        self.cycle = Histogram("opsched_admission_cycle_duration_seconds", "One admission cycle's decide",
                               buckets=CYCLE_BUCKETS, registry=None)
        self.wait = Histogram("opsched_admission_wait_seconds", "Submitted to admitted, per admitted op",
                              ["queue"], buckets=WAIT_BUCKETS, registry=None)

    def decided(self, decisions: list, seconds: float, ops: dict, now: datetime) -> None:
        self.cycle.observe(seconds)
        for decision in decisions:
            kind = codec.type_of(decision)
            self.decisions.labels(kind).inc()
            op = ops.get(decision.op_id)
            if kind == "admitted" and op is not None:
                self.wait.labels(op.queue).observe(max(0.0, (now - op.submitted_at).total_seconds()))

    def families(self) -> list[Any]:
        return [*self.decisions.collect(), *self.cycle.collect(), *self.wait.collect()]


def families(state: Any, book: Any) -> list[Any]:
    return [_ops(state, book), *_quotas(queries.queues(state, book))]


def _ops(state: Any, book: Any) -> Any:
    counts: Counter[tuple[str, Status]] = Counter((op.queue, op.status) for op in state.ops.values())
    for queue in book.names:
        for status in LIVE:
            counts.setdefault((queue, status), 0)
    values = [([queue, status.name.lower()], float(n)) for (queue, status), n in sorted(counts.items())]
    return gauge("opsched_ops", "Ops admission holds, per queue and lifecycle status", ["queue", "status"], values)


def _quotas(answer: Any) -> list[Any]:
    labels = ["queue", "flavor", "resource"]
    out = [gauge(f"opsched_queue_quota_{field}", f"Quota {field} per queue, flavor and resource", labels,
                 [([q.name, u.flavor, u.resource], float(getattr(u, field))) for q in answer.queues for u in q.usage])
           for field in QUOTA]
    out.append(gauge("opsched_queue_cost_used", "Cost counted against the queue's cost quota", ["queue"],
                     [([q.name], q.cost_used) for q in answer.queues]))
    out.append(gauge("opsched_queue_cost_quota", "The queue's cost quota (absent: none)", ["queue"],
                     [([q.name], q.cost_quota) for q in answer.queues if q.cost_quota is not None]))
    return out
