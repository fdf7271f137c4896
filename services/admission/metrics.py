"""Admission's Prometheus metrics (``services.runtime.metrics``), named as Kueue names its own where one matches
(``kueue_`` -> ``opsched_``, the label ``cluster_queue`` -> ``queue``; docs/observability.md lists both names).

Read from its state at a scrape (the cycle pays nothing for them):

- ``opsched_pending_workloads{queue,status}`` (Kueue's): ``active`` the ops waiting in line (pending, queued),
  ``inadmissible`` those held until something changes (on hold: an approval, a condition, an upstream op);
- ``opsched_admitted_active_workloads{queue}`` (Kueue's): admitted ops whose attempt is not over (admitted,
  dispatched, running);
- ``opsched_ops{queue,status}``: every lifecycle status opsched has (retrying, and finished ones until retention
  removes them, too); queues without ops show 0 for the live statuses;
- ``opsched_queue_resource_usage``, ``opsched_queue_nominal_quota``, ``opsched_queue_borrowing_limit`` (Kueue's
  ``cluster_queue_*``) and ``opsched_queue_resource_borrowed`` ``{cohort,queue,flavor,resource}``, and
  ``opsched_queue_cost_used`` / ``opsched_queue_cost_quota`` ``{queue}``: what ``opsched queues`` shows;
- ``opsched_queue_status{queue,status}`` (Kueue's ``cluster_queue_status``): 1 for ``active``, or for ``pending``
  when an admin held or drained it; ``opsched_queue_stopped{queue,policy}``: which (``Hold``, ``HoldAndDrain``).

What it counts as it happens is ``services.admission.measures``."""
from __future__ import annotations

from collections import Counter
from typing import Any

from opsched.proto.lifecycle import Status
from opsched.services.admission import queries
from opsched.services.runtime.metrics import gauge

LIVE = (Status.PENDING, Status.ON_HOLD, Status.QUEUED, Status.ADMITTED, Status.DISPATCHED, Status.RUNNING,
        Status.RETRYING)
PENDING = {Status.PENDING: "active", Status.QUEUED: "active", Status.ON_HOLD: "inadmissible"}
ADMITTED_ACTIVE = (Status.ADMITTED, Status.DISPATCHED, Status.RUNNING)
QUOTA_LABELS = ["cohort", "queue", "flavor", "resource"]


def families(state: Any, book: Any) -> list[Any]:
    counts: Counter[tuple[str, Status]] = Counter((op.queue, op.status) for op in state.ops.values())
    return [*_workloads(counts, book.names), *_quotas(queries.queues(state, book))]


def _workloads(counts: Counter[tuple[str, Status]], queues: Any) -> list[Any]:
    pending: Counter[tuple[str, str]] = Counter({(q, s): 0 for q in queues for s in ("active", "inadmissible")})
    active: Counter[str] = Counter(dict.fromkeys(queues, 0))
    every = Counter(counts)
    for queue in queues:
        for status in LIVE:
            every.setdefault((queue, status), 0)
    for (queue, status), n in counts.items():
        if status in PENDING:
            pending[queue, PENDING[status]] += n
        elif status in ADMITTED_ACTIVE:
            active[queue] += n
    return [
        gauge("opsched_pending_workloads", "Ops not admitted yet, per queue: active (in line) or inadmissible (held)",
              ["queue", "status"], [([q, s], float(n)) for (q, s), n in sorted(pending.items())]),
        gauge("opsched_admitted_active_workloads", "Admitted ops whose attempt is not over, per queue", ["queue"],
              [([q], float(n)) for q, n in sorted(active.items())]),
        gauge("opsched_ops", "Ops admission holds, per queue and lifecycle status", ["queue", "status"],
              [([q, s.name.lower()], float(n)) for (q, s), n in sorted(every.items())]),
    ]


def _quotas(answer: Any) -> list[Any]:
    def per_flavor(name: str, text: str, value: Any) -> Any:
        return gauge(name, text, QUOTA_LABELS, [([q.cohort or "", q.name, u.flavor, u.resource], float(v))
                                                for q in answer.queues for u in q.usage
                                                if (v := value(u)) is not None])
    return [
        per_flavor("opsched_queue_resource_usage", "What the queue's admitted ops use, per flavor and resource",
                   lambda u: u.used),
        per_flavor("opsched_queue_nominal_quota", "The queue's nominal quota, per flavor and resource",
                   lambda u: u.nominal),
        per_flavor("opsched_queue_borrowing_limit", "How much the queue may borrow from its cohort (absent: no "
                   "limit)", lambda u: u.borrowing_limit),
        per_flavor("opsched_queue_resource_borrowed", "What the queue uses beyond its nominal quota, borrowed from "
                   "its cohort", lambda u: u.borrowed),
        gauge("opsched_queue_cost_used", "Cost counted against the queue's cost quota", ["queue"],
              [([q.name], q.cost_used) for q in answer.queues]),
        gauge("opsched_queue_cost_quota", "The queue's cost quota (absent: none)", ["queue"],
              [([q.name], q.cost_quota) for q in answer.queues if q.cost_quota is not None]),
        gauge("opsched_queue_status", "1 for the queue's status: active, or pending while an admin holds or drains "
              "it", ["queue", "status"], [([q.name, s], float((q.stop_policy == "None") == (s == "active")))
                                          for q in answer.queues for s in ("active", "pending")]),
        gauge("opsched_queue_stopped", "1: an admin held (Hold) or drained (HoldAndDrain) the queue",
              ["queue", "policy"], [([q.name, q.stop_policy], 1.0) for q in answer.queues if q.stop_policy != "None"]),
    ]
