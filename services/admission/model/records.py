"""What admission knows of one operation (what decisions read, and apart its history), of the room a preempted
op left, and of a parked queue."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opsched.proto.events import OperationSubmitted, PricePoint
from opsched.proto.lifecycle import Status
from opsched.proto.pod_resources import pod_requests
from opsched.proto.queries import PendingReason
from opsched.proto.resources import is_device
from opsched.proto.spec import SERVICE_KIND, OpSpec
from opsched.rules.op_history import Timeline
from opsched.services.admission.model.ordering import sort_key


def requests_of(spec: OpSpec) -> tuple[list[dict[str, float]], dict[str, float]]:
    """What each pod of ``spec`` requests (as Kubernetes counts it: ``proto.pod_resources``), and all of them
    together."""
    pods = [request for request, count in pod_requests(spec) for _ in range(count)]
    total: dict[str, float] = {}
    for pod in pods:
        for resource, amount in pod.items():
            total[resource] = total.get(resource, 0.0) + amount
    return pods, total


@dataclass
class OpHistory:
    """What happened to an op and the books kept about it, apart from what decisions read: its lineage, its past
    attempts, its timeline and cost, the commands answered, where its dispatch waits, and what retention and tracing keep. (The
    cycle looks at one of them: ``kinds``, to publish again an end it assumed that the stream has not shown.)"""

    cache_hit_of: str | None = None  # the op whose result it reused (a cache hit)
    preemptions: int = 0  # how often it was preempted
    stop_requested: int = -1  # the attempt whose pods a stop command asked the dispatcher to delete
    # the leader's answers to commands not folded back yet: "<verb>.<attempt>" -> the request id answered (a second
    # request gets "nothing to do", not an answer JetStream drops as a duplicate of the first's)
    answered: dict[str, str] = field(default_factory=dict)
    attempts: list[tuple[int, str, str]] = field(default_factory=list)  # (attempt, how it ended, reason)
    timeline: Timeline = field(default_factory=Timeline)  # what happened to it, from the stream (``rules.op_history``)
    waiting_for: str | None = None  # its dispatch waits for this dependency (``dispatch_delayed``) ...
    waiting_since: datetime | None = None  # ... since then
    waiting_detail: str = ""  # ... which failed this way
    currency: str = "USD"  # of its estimate
    cost: float = 0.0  # actual, its attempts' cost_recorded summed
    original_op_id: str = ""  # it is a restart or copy of this op ...
    relation: str = ""  # ... "restart" or "copy"
    outputs: dict[str, Any] = field(default_factory=dict)  # what it succeeded with (``OperationSucceeded.outputs``)
    # retention (``retention``): when it ended, the kinds of its events on the stream and the last one's sequence
    ended_at: datetime | None = None
    kinds: set[str] = field(default_factory=set)
    last_seq: int = 0
    trace: dict[str, str] | None = None  # its ``submitted``'s trace context while it runs, tracing on (``traces``)


@dataclass
class OpRecord:
    """What admission decides with about one op: who and what it is, its status, what it requests and holds, and
    what orders, blocks or protects it. Its history and bookkeeping are apart (``history``)."""

    op_id: str
    queue: str
    priority: int
    submitted_at: datetime
    spec: OpSpec
    status: Status = Status.PENDING
    attempt: int = 0
    cost_known: bool = False
    caching: bool = True  # it uses the cache (``rules.caching``): its cache gate waits for the cache's answer ...
    cache_known: bool = False  # ... which came (else answered at its ``submitted``: no answer will come)
    cache_outputs: dict[str, Any] = field(default_factory=dict)  # the original's, for a cache hit
    pod_name: str | None = None
    namespace: str | None = None
    node: str | None = None
    reason: str = ""
    request: dict[str, float] = field(default_factory=dict)  # all pods together (for quota)
    pods: list[dict[str, float]] = field(default_factory=list)  # each pod's request (for placement)
    estimate: float = 0.0  # the cost service's (its own nodeSelector's price), then what its attempt was admitted at
    estimate_pool: str = ""  # the catalogue pool of ``estimate`` ("": the defaults)
    duration_s: float = 0.0  # expected run time, from its cost estimate (for GPU-hour budgets)
    price_points: list[PricePoint] = field(default_factory=list)  # its price in every pool (``policies.flavor_cost``)
    flavors: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)  # added by admission
    tolerations: list = field(default_factory=list)  # added by admission
    borrowing: bool = False
    blocked: list[PendingReason] = field(default_factory=list)  # from the last cycle that looked
    admitted_at: datetime | None = None
    admitted_priority: float = 0.0  # effective (aged) priority when admitted: what preemption compares
    running_since: datetime | None = None
    provisioning: dict[str, int] = field(default_factory=dict)  # admitted onto new nodes: pool -> nodes awaited
    provisioning_since: datetime | None = None  # admitted onto them at (until running)
    provisioning_timeout_s: float | None = None  # released by the dispatcher if they have not come by then
    provisioning_expected_s: float | None = None  # they usually come within this
    preempted_at: datetime | None = None  # the last time it was preempted (cooldown)
    preempted_by: str | None = None  # a preemption of this attempt was requested by this op
    not_before: datetime | None = None  # back-off after an eviction
    queued_at: datetime | None = None  # when it (re-)entered its queue: order and aging start here
    approved: bool = False  # an approve command arrived
    reason_message: str = ""
    retries_used: int = 0  # own (application) failures so far
    infra_failures: int = 0
    final_decided: int = -1  # the attempt whose ``failure_final`` is published (or assumed): decided once
    holds_quota: bool = False  # admitted and not ended: counted in its queue's usage (the fold keeps it)
    assumed_nodes: list[str] | None = None  # where the cycle that admitted it placed its pods
    agent: str = ""  # the agent its attempt was admitted to ("": the default agent)
    routed: bool = False  # some attempt went to a named agent: its requests are on ops.<kind>.<agent>.<id>
    requested_by: str | None = None  # who submitted it ({{ globals.owner_name }})
    fair_rank: int = 0  # its rank among requesters while it waits in its queue (``model.ordering``)
    handler_failure: str = ""  # a service gave up on a message it waited on (``handler_failed``): it ends
    end_reason: str = ""  # ... with this reason ("": ``handler_failed``; ``fold_failed``: an event of it was not folded)

    history: OpHistory = field(default_factory=OpHistory)

    @classmethod
    def submitted(cls, e: OperationSubmitted) -> "OpRecord":
        """A new op's record, with what each of its pods and all of them together request."""
        pods, total = requests_of(e.spec)
        return cls(e.op_id, e.queue, e.priority, e.submitted_at, e.spec, request=total, pods=pods,
                   requested_by=e.requested_by,
                   history=OpHistory(original_op_id=e.original_op_id or "", relation=e.relation or ""))

    @property
    def failure_undecided(self) -> bool:
        """It failed and its ``failure_final`` is still to publish (the stream's followers wait for it)."""
        return self.status == Status.FAILED and self.final_decided < self.attempt

    @property
    def since(self) -> datetime:
        return self.queued_at or self.submitted_at

    @property
    def service(self) -> bool:
        """A service op (``run_kind`` service): counted against its queue's ``services.maxServices``."""
        return self.spec.run_kind == SERVICE_KIND

    @property
    def preemptible(self) -> bool:
        """May preemption take it, and may it borrow? Only ``preemptible: false`` says no: unset is preemptible (a
        service's queue default is written into its spec when it is accepted: ``policies.service_ops``)."""
        return self.spec.preemptible is not False

    @functools.cached_property  # its request does not change (a cycle asks for it for every pending op)
    def gpus(self) -> float:
        """Accelerators of all its pods."""
        return sum(amount for resource, amount in self.request.items() if is_device(resource))

    @property
    def gpu_hours(self) -> float:
        """What its attempt is expected to use of GPU-hour budgets."""
        return self.gpus * self.duration_s / 3600.0

    @property
    def scopes(self) -> list[tuple[str, str]]:
        """The budget scopes it counts against: its queue, and its project if it names one."""
        return [("queue", self.queue)] + ([("project", self.spec.project)] if self.spec.project else [])

    @property
    def key(self) -> tuple:
        """Its place in its queue's order by its base priority (``model.ordering``; a ``fifo`` queue's
        pending order leaves the rank out, this key does not: it only orders borrowers and preemptors)."""
        return sort_key(self.priority, self.fair_rank, self.since, self.op_id)


@dataclass(frozen=True)
class Ghost:
    """What a preempted victim held, kept for its preemptor until the preemptor is admitted."""

    queue: str
    flavors: dict[str, str]
    request: dict[str, float]
    pods: list[dict[str, float]]
    node: str | None
    estimate: float
    service: bool = False  # a service op: it held one of its queue's maxServices


@dataclass(frozen=True)
class Park:
    """A parked queue (see ``services.admission.parking``): what it waits on, and until when at most."""

    deps: dict[str, int]  # generation key -> its value when the queue was parked
    until: datetime | None = None
