"""Admission's Prometheus metrics (``services.runtime.metrics``), named after Kueue's where one matches.

Read from its state at a scrape (the cycle pays nothing for them):

- ``opsched_ops{queue,status}``: the ops it holds per queue and lifecycle status (pending, on_hold, queued,
  admitted, dispatched, running, retrying, and finished ones until retention removes them), as Kueue's
  ``pending_workloads`` and ``admitted_active_workloads`` per cluster queue; queues without ops show 0 for
  the live statuses;
- ``opsched_queue_quota_used``, ``..._nominal``, ``..._borrowed`` ``{queue,flavor,resource}``
  (Kueue's ``cluster_queue_resource_usage`` / ``nominal_quota`` / ``borrowing``), and
  ``opsched_queue_cost_used`` / ``opsched_queue_cost_quota`` ``{queue}``: what ``opsched queues`` shows;
- ``opsched_queue_stopped{queue,policy}``: 1 for each queue an admin held (``Hold``) or drained
  (``HoldAndDrain``), as Kueue's ClusterQueue ``stopPolicy``.

What it counts as it happens is ``services.admission.measures``."""
from __future__ import annotations

from collections import Counter
from typing import Any

from opsched.proto.lifecycle import Status
from opsched.services.admission import queries
from opsched.services.runtime.metrics import gauge

LIVE = (Status.PENDING, Status.ON_HOLD, Status.QUEUED, Status.ADMITTED, Status.DISPATCHED, Status.RUNNING,
        Status.RETRYING)
QUOTA = ("used", "nominal", "borrowed")


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
    out.append(gauge("opsched_queue_stopped", "1: an admin held (Hold) or drained (HoldAndDrain) the queue",
                     ["queue", "policy"], [([q.name, q.stop_policy], 1.0) for q in answer.queues
                                           if q.stop_policy != "None"]))
    out.append(gauge("opsched_queue_cost_quota", "The queue's cost quota (absent: none)", ["queue"],
                     [([q.name], q.cost_quota) for q in answer.queues if q.cost_quota is not None]))
    return out
