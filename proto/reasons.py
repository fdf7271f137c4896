"""Why an operation waits: every reason code, defined once, with what it means, whether preemption can
lift it, and what it waits on (the generation parking watches: ``services.admission.parking``).

Codes are ``StrEnum`` members, so they equal their text on the wire (``PendingReason.code``) and in
``opsched why``; a producer in another language matches on the text.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum


class WaitsOn(Enum):
    SCOPE = "scope"  # usage of its cohort (or lone queue) changes: an op of it starts or ends
    CAPACITY = "capacity"  # free node capacity changes: an op ends anywhere, a node changes, room held is let go
    BUDGET = "budget"  # spend is recorded, or a budget window starts again
    BATCH = "batch"  # an op of its batch starts or ends
    TIME_OR_CONFIG = "time_or_config"  # only time (a back-off) or a new queue configuration lifts it


class Reason(StrEnum):
    QUEUE_CONCURRENCY = "queue_concurrency"
    COST_QUOTA = "cost_quota"
    QUOTA_EXHAUSTED = "quota_exhausted"
    QUOTA_LENT_OUT = "quota_lent_out"
    COHORT_LENDER_WAITING = "cohort_lender_waiting"
    BORROW_LATER = "borrow_later"
    NO_CAPACITY = "no_capacity"
    UNFITTABLE = "unfittable"
    BUDGET_EXHAUSTED = "budget_exhausted"
    BATCH_CONCURRENCY = "batch_concurrency"
    BACKOFF = "backoff"
    QUEUE_REMOVED = "queue_removed"
    NO_MATCHING_FLAVOR = "no_matching_flavor"
    WAITING_FOR_VICTIMS = "waiting_for_victims"
    NEXT_CYCLE = "next_cycle"
    QUEUE_POSITION = "queue_position"
    WAITING_COST_ESTIMATE = "waiting_cost_estimate"
    WAITING_CACHE = "waiting_cache"
    ON_HOLD = "on_hold"
    RETRYING = "retrying"
    BEING_PREEMPTED = "being_preempted"
    UNKNOWN_OP = "unknown_op"
    BAD_REQUEST = "bad_request"


@dataclass(frozen=True)
class Rule:
    means: str  # what the reason says, for people and docs
    preemption_lifts: bool = False  # taking running ops away could make room
    waits_on: WaitsOn | None = None  # None: parking does not know what lifts it (look again every cycle)


REASONS: dict[Reason, Rule] = {
    Reason.QUEUE_CONCURRENCY: Rule("its queue runs as many ops as its concurrency allows", True, WaitsOn.SCOPE),
    Reason.COST_QUOTA: Rule("the estimated cost of its queue's running ops is at the queue's costQuota", True,
                            WaitsOn.SCOPE),
    Reason.QUOTA_EXHAUSTED: Rule("its queue (and cohort) has no quota left for a resource it asks", True, WaitsOn.SCOPE),
    Reason.QUOTA_LENT_OUT: Rule("its queue's own quota is lent to borrowers of the cohort", True, WaitsOn.SCOPE),
    Reason.COHORT_LENDER_WAITING: Rule("a queue of its cohort waits for its own quota: no borrowing until it runs",
                                       True, WaitsOn.SCOPE),
    Reason.BORROW_LATER: Rule("it fits only by borrowing; ops within their quota go first", False, WaitsOn.SCOPE),
    Reason.NO_CAPACITY: Rule("no node its pods may use has room now", True, WaitsOn.CAPACITY),
    Reason.UNFITTABLE: Rule("no node its pods may use could ever hold it", False, WaitsOn.CAPACITY),
    Reason.BUDGET_EXHAUSTED: Rule("its queue's or project's budget for the window is spent", False, WaitsOn.BUDGET),
    Reason.BATCH_CONCURRENCY: Rule("its batch (sweep) runs as many ops as its concurrency allows", False,
                                   WaitsOn.BATCH),
    Reason.BACKOFF: Rule("it backs off after an eviction or a failure", False, WaitsOn.TIME_OR_CONFIG),
    Reason.QUEUE_REMOVED: Rule("its queue is no longer in the configuration", False, WaitsOn.TIME_OR_CONFIG),
    Reason.NO_MATCHING_FLAVOR: Rule("no flavor of its queue matches its node selector", False, WaitsOn.TIME_OR_CONFIG),
    Reason.WAITING_FOR_VICTIMS: Rule("it preempted ops; it waits for their pods to go"),
    Reason.NEXT_CYCLE: Rule("nothing holds it; the next cycle decides"),
    Reason.QUEUE_POSITION: Rule("ops before it in its queue go first"),
    Reason.WAITING_COST_ESTIMATE: Rule("the cost service has not estimated it yet"),
    Reason.WAITING_CACHE: Rule("the cache service has not answered yet"),
    Reason.ON_HOLD: Rule("it waits for `opsched approve`"),
    Reason.RETRYING: Rule("an attempt failed; its retry is being scheduled"),
    Reason.BEING_PREEMPTED: Rule("it is being preempted; its pods are terminating"),
    Reason.UNKNOWN_OP: Rule("no such operation"),
    Reason.BAD_REQUEST: Rule("the query could not be answered"),
}
PREEMPTION_LIFTS = frozenset(r for r, rule in REASONS.items() if rule.preemption_lifts)
