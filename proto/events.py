"""Events: past-tense facts about an operation. Each is tagged explicitly and defined once.

Evolve only by adding defaulted fields. ``at`` is the time of the fact, from the emitter's clock.
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec

from opsched.proto.limits import MAX_PODS_PER_OP, MAX_PRICE_POINTS, MAX_REPLICA_GROUPS
from opsched.proto.queues import DEFAULT_LEVEL, AllowableVolume, Connection, Level
from opsched.proto.reasons import Ending
from opsched.proto.spec import OpSpec, Wire
from opsched.proto.spec_checks import money


class Event(Wire, tag_field="type", kw_only=True):
    op_id: str
    at: datetime
    attempt: int = 0


class Money(Wire, kw_only=True):
    amount: float
    currency: str = "USD"

    def __post_init__(self) -> None:
        money("amount", self.amount)


class OperationSubmitted(Event, tag="submitted", kw_only=True):
    spec: OpSpec
    queue: str
    submitted_at: datetime
    priority: int = 0
    original_op_id: str | None = None  # set for a restart or a copy
    relation: str | None = None  # "restart" or "copy"
    requested_by: str | None = None  # who submitted it ({{ globals.owner_name }})
    request_id: str = ""  # the command's ``request_id`` (a restart or copy): its sender reads its verdict here


class PricePoint(Wire, kw_only=True):
    """The op priced in one pool of the catalogue (``pool`` "" = its default prices) for one GPU product ("*" = any
    other): what admission reads to price a flavor (``rules.pricing.point_for``)."""

    pool: str = ""
    match: dict[str, str] = {}  # the pool's match labels (none for the defaults)
    product: str = "*"
    hourly: float  # the op's price per hour there (all its pods)
    amount: float  # hourly x its expected duration, raised to the op's own cost like the estimate
    # the price per hour there of one pod of each of its shapes (``proto.pod_resources.shapes``: the main pod, then
    # each replica group's): what the cost service charges each pod of an attempt (its ledger; [] before it)
    shapes: Annotated[list[float], msgspec.Meta(max_length=MAX_REPLICA_GROUPS + 1)] = []

    def __post_init__(self) -> None:
        money("hourly", self.hourly)
        money("amount", self.amount)
        for i, price in enumerate(self.shapes):
            money(f"shapes[{i}]", price)


class CostEstimated(Event, tag="cost_estimated", kw_only=True):
    estimate: Money
    # "explicit", "timeout", "history" (median of past runs), "floor" (past runs whose median is below the
    # catalogue's ``historyFloorSeconds``: the floor) or "default": where duration_s came from
    basis: str
    duration_s: float
    breakdown: dict[str, float] = {}  # per resource, summed over all the op's pods
    prices_source: str = ""  # the catalogue that priced it: "file:<path>#<sha>" or "builtin"
    pool: str = ""  # the catalogue's node pool that priced it (matched by the op's nodeSelector)
    runs: int = 0  # basis "history" or "floor": how many past runs of the same component the median is of
    # the op priced in every pool and the defaults, for every product they name (``rules.pricing``): admission
    # prices the flavor it considers from these; the estimate above is the point of the op's own nodeSelector
    points: Annotated[list[PricePoint], msgspec.Meta(max_length=MAX_PRICE_POINTS)] = []
    # the rest of the price the op's attempts are charged at (the cost service's ledger folds it: its price at
    # submit travels on the bus; an estimate without ``pod_shapes`` is from before, the ledger prices its op then)
    hourly: float = 0.0  # an hour of all its pods at its own nodeSelector's point (charged when it has no points)
    gpus: Annotated[int, msgspec.Meta(ge=0)] = 0  # whole accelerators of all its pods (its GPU-hours)
    labels: dict[str, str] = {}  # its own nodeSelector: where a pod on a node of unknown labels is priced
    # each pod's shape (an index into each point's ``shapes``), pods in name order (``rules.pricing.pod_shapes``)
    pod_shapes: Annotated[list[Annotated[int, msgspec.Meta(ge=0)]], msgspec.Meta(max_length=MAX_PODS_PER_OP)] = []

    def __post_init__(self) -> None:
        money("durationS", self.duration_s)
        money("hourly", self.hourly)
        for resource, amount in self.breakdown.items():
            money(f"breakdown[{resource!r}]", amount)


class CacheHit(Event, tag="cache_hit", kw_only=True):
    fingerprint: str
    original_op_id: str
    outputs: dict[str, Any] = {}  # the original's (``OperationSucceeded.outputs``)


class CacheMissed(Event, tag="cache_missed", kw_only=True):
    fingerprint: str
    reason: str  # "not_found", "expired", "original_failed"; "disabled" only on streams from before issue 36
    # (an op with caching off gets no answer since: ``rules.caching``)


class OperationAdmitted(Event, tag="admitted", kw_only=True):
    spec: OpSpec
    queue: str
    namespace: str
    pod_name: str
    flavors: dict[str, str] = {}  # resource -> flavor assigned by admission
    node_selector: dict[str, str] = {}  # queue defaults + flavor labels, merged into the pod's
    tolerations: list[dict[str, Any]] = []
    borrowing: bool = False  # admitted on quota borrowed from its cohort
    effective_priority: float = 0.0  # its (aged) priority when admitted: what preemption compares
    pending_timeout_s: float | None = None  # its queue's pendingTimeout: Unschedulable longer is requeued
    pod_security: Level = DEFAULT_LEVEL  # its queue's podSecurity: what the dispatcher checks its pods against
    allow_secret_volumes: bool = False  # its queue's allowSecretVolumes
    service_accounts: list[str] = []  # its queue's serviceAccounts (the rest as well: ``rules.pod_security.CARRIED``)
    allow_service_account_token: bool = False
    priority_class_names: list[str] = []
    allow_volumes: list[AllowableVolume] = []
    image_pull_secrets: list[str] = []
    # per pod (main first, then replicas), the kubernetes.io/hostname of the node admission placed it on ("": none)
    # under placement binpack/spread: the pod prefers that node (weight 100), so kube-scheduler agrees
    preferred_hosts: list[str] = []
    agent: str = ""  # the agent whose dispatcher runs it ("": the default one): its subject is ops.admitted.<agent>.<id>
    # the declarations of the connections its pods name (names, kinds, repositories, the Secrets' names: never a
    # secret's value; ``rules.connections``) and the image of its git and file init steps ("": DEFAULT_INIT_IMAGE)
    connections: list[Connection] = []
    init_image: str = ""
    # its estimate on the flavors it was admitted to (``cost_estimated.points``: cost quota, budgets and the spend held
    # count this), and the catalogue pool that priced it ("": the defaults); None: an admission from before this
    estimate: float | None = None
    pool: str = ""
    # per pod (main first, then replicas, as preferred_hosts): the node pool whose NEW node admission counted for it,
    # each new node once ("": a node that exists, or a new one an earlier pod of the op is counted on). Non-empty: the
    # op waits for nodes (`why`/`ops`: waiting_for_node; as many new nodes as non-empty entries)
    provisioning: list[str] = []
    provisioning_timeout_s: float | None = None  # the pools' provisioningTimeoutSeconds (the largest across them)
    provisioning_expected_s: float | None = None  # the pools' provisioningSeconds (the largest): what `why` says

    def __post_init__(self) -> None:
        if self.estimate is not None:
            money("estimate", self.estimate)


class OperationDispatched(Event, tag="dispatched", kw_only=True):
    pod_name: str
    namespace: str


class ServiceEndpoint(Wire, kw_only=True):
    """How to reach a running service: its ClusterIP Service (``rules.serving``) and the ports it serves."""

    name: str
    namespace: str
    ports: list[int] = []

    @property
    def host(self) -> str:
        """Its DNS name inside the cluster."""
        return f"{self.name}.{self.namespace}.svc"

    def port_forward(self) -> str:
        """A ready-to-paste line that reaches it from this machine (each port on the same local port)."""
        ports = " ".join(f"{p}:{p}" for p in self.ports)
        return f"kubectl port-forward -n {self.namespace} svc/{self.name} {ports}"


class OperationRunning(Event, tag="running", kw_only=True):
    pod_name: str
    node: str | None = None
    endpoint: ServiceEndpoint | None = None  # a service's: every pod Ready, reached through its Service
    # the node of each pod of the attempt, pods in name order (the main pod first: its name prefixes the others'),
    # "" for one not known: the cost service charges each pod at the price of its node's pool; [] : the main pod's
    # ``node`` for all (an older dispatcher)
    nodes: Annotated[list[str], msgspec.Meta(max_length=MAX_PODS_PER_OP)] = []


class OperationSucceeded(Event, tag="succeeded", kw_only=True):
    pod_name: str | None = None
    node: str | None = None
    reason: str = Ending.COMPLETED
    # what the main container wrote to its termination message, a JSON object (a cache hit: the original's)
    outputs: dict[str, Any] = {}
    outputs_warning: str = ""  # why what it wrote was not taken as outputs (not JSON, too large): never a failure


class OperationFailed(Event, tag="failed", kw_only=True):
    pod_name: str | None = None
    node: str | None = None
    reason: str
    message: str = ""
    exit_code: int | None = None


class OperationRejected(Event, tag="rejected", kw_only=True):
    reason: str  # a short machine code: "invalid_spec", "unknown_queue", "forbidden_pod_spec", ...
    message: str
    name: str = ""  # a submit rejected before it was an op: the op's name and the queue it asked for ...
    queue: str = ""  # ... (views show them: no ``submitted`` names it)
    request_id: str = ""  # the reject command's ``request_id``: its sender reads its verdict here


class OperationStopped(Event, tag="stopped", kw_only=True):
    reason: str = Ending.STOPPED
    message: str = ""
    request_id: str = ""  # the stop command's ``request_id`` (admission stopping an op that held no pod)


class OperationTouched(Event, tag="touched", kw_only=True):
    """Someone used a running service (``opsched touch``): its idle time (``termination.culling``) starts again."""

    touched_by: str = ""
    request_id: str = ""  # the touch command's ``request_id``: its sender reads its verdict here


class StopRequested(Event, tag="stop_requested", kw_only=True):
    pod_name: str
    namespace: str
    reason: str = Ending.STOPPED
    agent: str = ""  # the agent running the attempt (its dispatcher's subject)
    request_id: str = ""  # the stop command's ``request_id``: its sender reads its verdict here


class PreemptRequested(Event, tag="preempt_requested", kw_only=True):
    """Admission asks the dispatcher to delete a victim's pods (with a grace period) for a preemptor."""

    pod_names: list[str]
    namespace: str
    preemptor: str
    agent: str = ""  # the agent running the victim (its dispatcher's subject)
    reason: str  # "within_queue" or "reclaim"
    message: str = ""


class OperationPreempted(Event, tag="preempted", kw_only=True):
    """The victim's pods are gone; the op goes back to its queue (a preemption is not a retry)."""

    preemptor: str = ""
    reason: str = ""
    message: str = ""


class OperationEvicted(Event, tag="evicted", kw_only=True):
    """An attempt was released without being the op's fault (e.g. a gang not all Running in time);
    the op goes back to its queue, admitted again no sooner than ``retry_after_s`` from now."""

    reason: str
    message: str = ""
    retry_after_s: float = 0.0


class OperationOnHold(Event, tag="on_hold", kw_only=True):
    """Held for approval before it is queued (``isApproved: false`` or a queue's approval policy)."""

    reason: str  # "is_approved_false", "cost_above_threshold", "gpus_above_threshold"
    message: str = ""


class OperationApproved(Event, tag="approved", kw_only=True):
    approved_by: str = ""
    comment: str = ""
    request_id: str = ""  # the approve command's ``request_id``: its sender reads its verdict here


class OperationSkipped(Event, tag="skipped", kw_only=True):
    """Its ``conditions`` were false: it never runs."""

    reason: str = Ending.CONDITION_FALSE
    message: str = ""


class RetryScheduled(Event, tag="retry_scheduled", kw_only=True):
    """The attempt failed and ``termination.maxRetries`` allows another: the op goes back to its queue,
    admitted again no sooner than ``retry_after_s`` from now, as attempt ``attempt + 1``."""

    retry_after_s: float
    reason: str
    retries_used: int  # application failures so far (infrastructure failures do not count)


class FailureFinal(Event, tag="failure_final", kw_only=True):
    """Admission's decision on a failed attempt (``failed`` of attempt ``attempt``) that is not retried: the op
    has failed, and this is its end. Every ``failed`` admission folds gets exactly one decision, this or
    ``retry_scheduled`` (unless a stop ends the op first); nobody else decides it (the cache and the views wait
    for it). ``reason``: the failure's (as its ``failed`` carried it); ``message``: why no retry follows."""

    reason: str
    message: str = ""
    retries_used: int = 0  # the op's own failures that were retried (infrastructure failures do not count)
    max_retries: int | None = None  # its ``termination.maxRetries`` as admission applied it


class OperationTimedOut(Event, tag="timed_out", kw_only=True):
    """Ran longer than ``termination.timeout``: killed, not retried."""

    pod_name: str | None = None
    node: str | None = None
    message: str = ""


class OperationResumed(Event, tag="resumed", kw_only=True):
    """A stopped, failed or timed-out op continues in place as attempt ``attempt`` (its history kept)."""

    params: dict[str, Any] = {}
    resumed_by: str = ""
    request_id: str = ""  # the resume command's ``request_id``: its sender reads its verdict here


class PodCharge(Wire, kw_only=True):
    """The pods of an attempt charged at one pool's price for one GPU product (``pool`` "" = the defaults)."""

    pool: str = ""
    product: str = "*"
    pods: int = 1
    hourly: float  # what an hour of those pods together costs there

    def __post_init__(self) -> None:
        money("hourly", self.hourly)


class CostRecorded(Event, tag="cost_recorded", kw_only=True):
    """What one finished attempt actually cost: its run time (running -> end) x the op's hourly price.
    ``at`` is when the attempt ended (the budget window it is charged to)."""

    amount: float
    currency: str = "USD"
    seconds: float
    queue: str
    project: str = ""
    gpu_hours: float = 0.0  # accelerators x hours run (for GPU-hour budgets)
    started_at: datetime | None = None
    pool: str = ""  # the catalogue's node pool whose price was charged ("" = the default prices): the main pod's
    # each pool (and product) its pods were charged at, by the node each ran on: a gang across pools is charged per pod
    pods: Annotated[list[PodCharge], msgspec.Meta(max_length=MAX_PRICE_POINTS)] = []

    def __post_init__(self) -> None:
        money("amount", self.amount)
        money("seconds", self.seconds)
        money("gpuHours", self.gpu_hours)


class BudgetExceeded(Event, tag="budget_exceeded", kw_only=True):
    """A recorded cost brought a budget window's spend to or past one of its limits (money or
    GPU-hours). Announced once per budget, limit and window; ``op_id`` is the op whose cost did it."""

    scope: str  # "queue", "project" or "pool" (a pool's nodes: op_id is the pool's token)
    name: str
    window: str  # "day", "week" or "month"
    limit: float
    spent: float
    unit: str  # the currency of a money limit, or "gpu_hours"
    window_start: datetime
    resets_at: datetime

    def __post_init__(self) -> None:
        money("limit", self.limit)
        money("spent", self.spent)


class WindowSpend(Wire, kw_only=True):
    window: str  # "day", "week" or "month"
    start: datetime
    money: float
    gpu_hours: float = 0.0

    def __post_init__(self) -> None:
        money("money", self.money)
        money("gpuHours", self.gpu_hours)


class SpendRolled(Event, tag="spend_rolled", kw_only=True):
    """The spend of one budget scope (``scope``/``name``) per window, every ``cost_recorded`` of the op stream
    up to ``through_seq`` counted (``proto.spend_totals``): published by admission's retention before the
    charges it covers leave the stream with their ops, so a replay counts the same. ``op_id`` is the scope's
    token (``spend_totals.token_of``); the last one per scope is kept."""

    scope: str  # "queue", "project" or "pool"
    name: str
    through_seq: int
    windows: list[WindowSpend] = []


class NodeCostRecorded(Event, tag="node_cost_recorded", kw_only=True):
    """What one node cost from its creation to its removal, split by what ran on it. ``op_id`` is the node's token
    (``rules.node_pools.token_of(agent, node, created)``); ``at`` is its removal (the budget window it is charged
    to). ``busy + stranded + idle == amount``."""

    node: str
    agent: str = ""
    pool: str  # the queue configuration's node pool ("": a node of no pool, still charged)
    price_pool: str = ""  # the price catalogue's pool that priced it ("" = the default prices)
    created: datetime
    seconds: float
    amount: float  # node-hours x the node's hourly price
    currency: str = "USD"
    gpu_hours: float = 0.0  # the node's accelerators x hours
    busy: float = 0.0  # of amount: accelerators held by op pods (pro rata accelerator-seconds)
    stranded: float = 0.0  # of amount: free accelerators on the node while some op pod ran on it
    idle: float = 0.0  # of amount: the node ran no op pod at all

    def __post_init__(self) -> None:
        money("amount", self.amount)
        money("seconds", self.seconds)
        money("gpuHours", self.gpu_hours)
        money("busy", self.busy)
        money("stranded", self.stranded)
        money("idle", self.idle)


NO_OP_ID = "-"  # an error event's op id when the input named no operation (never a valid op id)


class ErrorRaised(Event, tag="error", kw_only=True):
    """Bad input seen by a service. ``op_id`` is "-" (never a valid op id) when the input named no operation."""

    service: str
    subject: str
    reason: str
    message: str
    payload: str = ""  # the start of the offending payload, for humans
    # the refused message's Nats-Msg-Id: a command's sender matches the refusal to its own command with it
    # (``opsched.verdicts``), not to another user's about the same op
    command_msg_id: str = ""


class DispatchDelayed(Event, tag="dispatch_delayed", kw_only=True):
    """The dispatcher cannot reach a dependency (``kubernetes``: the API server) to dispatch this attempt; it
    keeps trying, for as long as the outage lasts. Once per attempt; ``dispatched`` (or an end) follows."""

    dependency: str = "kubernetes"
    message: str = ""  # how the last try failed


class HandlerFailed(Event, tag="handler_failed", kw_only=True):
    """A service's handler kept failing on a message about this op (a bug, not bad input, not an outage):
    the message was dead-lettered after its last delivery. Admission ends the op, or retries the attempt,
    so that no op waits forever or holds quota for a message nobody will handle."""

    service: str = ""
    subject: str = ""
    failed_type: str = ""  # the type of the message that failed ("admitted", "submitted", ...)
    error: str = ""


class NotificationDue(Event, tag="notification_due", kw_only=True):
    """The notifier's match stage: ``trigger`` (the type of the op event at ``trigger_seq``) is to be delivered to
    the admin's connection ``connection`` (a name: its url and secret never go on the bus). ``delivery_id`` is
    deterministic (the trigger event's id + the connection): a redelivered trigger is one delivery, and the
    receiver de-duplicates by it. ``data`` is the trigger event as the CLI's json shows it."""

    delivery_id: str
    connection: str
    trigger: str
    queue: str = ""
    trigger_seq: int = 0
    data: dict[str, Any] = {}


class NotificationAttempted(Event, tag="notification_attempted", kw_only=True):
    """One attempt (``delivery_attempt``, from 1) to deliver ``delivery_id``: the receiver's HTTP ``status`` (None: no
    answer, ``error`` says why); delivered on a 2xx, else tried again in ``retry_in_s`` (None: given up)."""

    delivery_id: str
    connection: str
    trigger: str
    delivery_attempt: int = 1
    status: int | None = None
    error: str = ""
    delivered: bool = False
    retry_in_s: float | None = None


class NotificationFailed(Event, tag="notification_failed", kw_only=True):
    """``delivery_id`` is given up: past the notifier's bounded time of retries (a copy is dead-lettered on
    ``dlq.notifier``), or its connection is not one the admin declared."""

    delivery_id: str
    connection: str
    trigger: str
    attempts: int = 0
    error: str = ""


EVENTS: tuple[type[Event], ...] = (
    OperationSubmitted, CostEstimated, CacheHit, CacheMissed, OperationAdmitted,
    OperationDispatched, OperationRunning, OperationSucceeded, OperationFailed,
    OperationRejected, OperationStopped, StopRequested, PreemptRequested, OperationPreempted,
    OperationEvicted, OperationOnHold, OperationApproved, OperationSkipped, RetryScheduled, FailureFinal,
    OperationTimedOut, OperationResumed, CostRecorded, BudgetExceeded, ErrorRaised, DispatchDelayed, HandlerFailed,
    SpendRolled, OperationTouched, NotificationDue, NotificationAttempted, NotificationFailed, NodeCostRecorded,
)


def event_type(cls: type[msgspec.Struct]) -> str:
    return cls.__struct_config__.tag  # type: ignore[return-value]
