"""Request/reply queries answered by admission from its live state (not stored on a stream), and the logs request
the dispatcher answers with a bounded stream of chunks (``LogsRequest``, ``LogsChunk``)."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated

from msgspec import Meta, field

from opsched.proto.history import HistoryEntry
from opsched.proto.spec import Wire


class PendingReason(Wire, kw_only=True):
    code: str  # "waiting_cost_estimate", "queue_concurrency", "quota_exhausted", "no_capacity", ...
    message: str


class WhyRequest(Wire, tag_field="type", tag="why_request", kw_only=True):
    op_id: str


class WhyAnswer(Wire, tag_field="type", tag="why_answer", kw_only=True):
    op_id: str
    found: bool
    status: str = ""
    queue: str = ""
    position: int | None = None  # 1 = next in its queue
    queued_total: int = 0
    reasons: list[PendingReason] = []  # most binding first
    ignored: list[str] = []  # fields of its file that have no effect in opsched (warned at submit)
    end_reason: str = ""  # an op that ended: the reason code it ended with ("unknown_queue", "Completed", ...) ...
    end_message: str = ""  # ... and its message
    name: str = ""  # the op's name (its file's ``name``)
    history: list[HistoryEntry] = []  # what happened to it, oldest first (``proto.history``) ...
    history_dropped: int = 0  # ... and how many entries were left out (after the first, before the latest)


class FlavorUsage(Wire, kw_only=True):
    resource: str
    flavor: str
    used: float
    nominal: float
    borrowed: float = 0.0
    lent: float = 0.0
    borrowing_limit: float | None = None


class CohortUsage(Wire, kw_only=True):
    """A cohort's quota of one (resource, flavor): ``subtree`` its own ``nominal`` plus what its children let it use;
    ``used`` what its children use beyond the part each keeps; ``borrowed`` what it takes from its parent beyond its
    subtree quota (``policies.quota``)."""

    resource: str
    flavor: str
    used: float
    subtree: float
    nominal: float = 0.0
    borrowed: float = 0.0
    borrowing_limit: float | None = None


class CohortStatus(Wire, kw_only=True):
    """A cohort declared in the queue file (``cohorts:``), parents listed before their children."""

    name: str
    parent: str | None = None
    usage: list[CohortUsage] = []


class QueueStatus(Wire, kw_only=True):
    name: str
    cohort: str | None = None
    cohort_path: list[str] = []  # nested cohorts: its cohort, then each parent up to the root
    running: int = 0
    concurrency: int | None = None
    services: int = 0  # of ``running``: its service ops
    max_services: int | None = None  # its ``services.maxServices``
    pending: int = 0
    cost_used: float = 0.0
    cost_quota: float | None = None
    usage: list[FlavorUsage] = []
    # held or drained by an admin (``proto.queue_stops``): "None" (active), "Hold" or "HoldAndDrain"; by whom,
    # since when, why; ``draining``: the ops a drained queue still runs (asked to go, their pods terminating)
    stop_policy: str = "None"
    stopped_by: str = ""
    stopped_at: datetime | None = None
    stop_comment: str = ""
    draining: int = 0


class Fragmentation(Wire, kw_only=True):
    """Accelerators free but stranded: on the nodes of one flavor, free on nodes that have less free than the
    largest waiting pod asks (no such pod can use them until more frees up there)."""

    resource: str
    flavor: str  # "": the nodes of no flavor (every node, in a configuration without flavors)
    agent: str = ""  # whose cluster ("": the default agent's)
    nodes: int = 0  # schedulable nodes of the flavor that have the resource
    free: float = 0.0
    stranded: float = 0.0
    largest_waiting: float = 0.0  # the most of the resource one waiting pod asks (0: none waits)


class QueuesRequest(Wire, tag_field="type", tag="queues_request", kw_only=True):
    pass


class PoolStatus(Wire, kw_only=True):
    """A flavor's node pool in one agent's cluster (``opsched queues``): its nodes, those an autoscaler is removing,
    its bounds, and the new nodes admitted ops wait for."""

    pool: str
    flavor: str
    agent: str = ""
    nodes: int = 0  # that exist (leaving ones included)
    leaving: int = 0
    min_nodes: int = 0
    max_nodes: int = 0
    awaited: int = 0  # new nodes admitted ops wait for
    oldest_since: datetime | None = None  # the oldest of those ops' admission
    budget_blocked_until: datetime | None = None  # its budget is spent: no new node until then


class QueuesAnswer(Wire, tag_field="type", tag="queues_answer", kw_only=True):
    queues: list[QueueStatus] = []
    default_queue: str = ""
    source: str = ""
    fragmentation: list[Fragmentation] = []  # per flavor and accelerator, once the nodes are known
    cohorts: list[CohortStatus] = []  # the declared cohorts (none: flat cohorts only)
    # queues held or drained that the configuration no longer has: the hold comes back with the queue (resume clears)
    stopped_unconfigured: list[str] = []
    pools: list[PoolStatus] = []  # the flavors' node pools


class CostRequest(Wire, tag_field="type", tag="cost_request", kw_only=True):
    pass


class SpendLine(Wire, kw_only=True):
    """Actual spend of one queue or project in the current UTC day, week and month."""

    scope: str  # "queue" or "project"
    name: str
    day: float = 0.0
    week: float = 0.0
    month: float = 0.0
    gpu_hours_day: float = 0.0
    gpu_hours_week: float = 0.0
    gpu_hours_month: float = 0.0


class BudgetLine(Wire, kw_only=True):
    scope: str
    name: str
    window: str
    money: float | None = None
    gpu_hours: float | None = None
    spent_money: float = 0.0
    spent_gpu_hours: float = 0.0
    remaining_money: float | None = None
    remaining_gpu_hours: float | None = None
    resets_at: datetime | None = None


class PoolSpend(Wire, kw_only=True):
    """What a node pool's nodes cost in one window (charged nodes, and the open ones so far), split by use."""

    money: float = 0.0
    busy: float = 0.0  # accelerators held by op pods
    stranded: float = 0.0  # free accelerators on a node some op pod ran on
    idle: float = 0.0  # nodes that ran no op pod
    node_hours: float = 0.0


class PoolSpendLine(Wire, kw_only=True):
    pool: str  # the queue configuration's pool ("": nodes of no pool)
    agent: str = ""
    nodes: int = 0  # its nodes open now
    day: PoolSpend = field(default_factory=PoolSpend)
    week: PoolSpend = field(default_factory=PoolSpend)
    month: PoolSpend = field(default_factory=PoolSpend)


class CostAnswer(Wire, tag_field="type", tag="cost_answer", kw_only=True):
    at: datetime
    currency: str = "USD"
    burn_rate_per_hour: float = 0.0  # spend of the last hour (finished and running attempts)
    spend: list[SpendLine] = []
    budgets: list[BudgetLine] = []
    pools: list[PoolSpendLine] = []  # what the nodes of each pool cost (``node_cost_recorded`` + open nodes)


class SchedulesRequest(Wire, tag_field="type", tag="schedules_request", kw_only=True):
    ids: list[str] = []  # these schedules ([]: every one)


class ScheduleRun(Wire, kw_only=True):
    """One run a schedule fired: its op, the slot it was for, and where that op is now."""

    run: int
    run_op_id: str
    scheduled_for: datetime
    fired_at: datetime
    status: str = ""  # the op's status label ("": admission knows no more of it)


class ScheduleStatus(Wire, kw_only=True):
    schedule_id: str
    state: str  # "active", "waiting" (dependsOnPast holds it), "finished", "deleted" or "disabled"
    name: str = ""  # its operation's
    kind: str = ""  # "cron", "interval" or "datetime"
    cron: str | None = None
    frequency_s: int | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int | None = None
    depends_on_past: bool = False
    reason: str = ""  # why it finished or was disabled
    message: str = ""
    runs: int = 0  # runs fired
    created_at: datetime | None = None
    next_run_at: datetime | None = None  # its next slot (null: none, or it waits for an op)
    last_run_at: datetime | None = None  # when its last run fired
    last_runs: list[ScheduleRun] = []  # its last runs fired (at most 5), oldest first
    waiting_for: str = ""  # the op dependsOnPast waits on (state waiting)


class SchedulesAnswer(Wire, tag_field="type", tag="schedules_answer", kw_only=True):
    schedules: list[ScheduleStatus] = []


# The bounds of a logs answer: each chunk at most LOGS_CHUNK_LINES lines and about LOGS_CHUNK_BYTES bytes (a longer
# line is cut there), an answer at most LOGS_ANSWER_CHUNKS chunks, its last one marked ``end``; a follow answers for
# LOGS_FOLLOW_S at most. An answer cut short by either says ``more``: the client asks again after its ``last_at``.
LOGS_CHUNK_LINES = 200
LOGS_CHUNK_BYTES = 32 * 1024
LOGS_ANSWER_CHUNKS = 64
LOGS_FOLLOW_S = 60.0  # under nats-server's 2-minute bound on a request's answers
LOGS_MAX_TAIL = 100_000


class LogsRequest(Wire, tag_field="type", tag="logs_request", kw_only=True):
    """What a container of an op printed (`opsched logs`): answered on the reply subject by ``LogsChunk``s."""

    op_id: Annotated[str, Meta(max_length=253)]
    follow: bool = False  # keep answering as lines are printed, until the container ends
    replica: Annotated[str, Meta(max_length=253)] = ""  # "" (or "main"): the main pod; else a pod of the attempt by its ``<role>-<index>``
    attempt: Annotated[int, Meta(ge=0)] | None = None  # None: the op's latest attempt
    container: Annotated[str, Meta(max_length=253)] = ""  # "": the pod's main container (its first)
    tail: Annotated[int, Meta(ge=0, le=LOGS_MAX_TAIL)] | None = None  # the last N lines only
    after: Annotated[str, Meta(max_length=64)] = ""  # RFC 3339 time: only the lines printed after it (a ``more`` answer's ``last_at``)
    timestamps: bool = False  # each line prefixed by its time (RFC 3339) and a space


class LogsChunk(Wire, tag_field="type", tag="logs_chunk", kw_only=True):
    """One message of a logs answer; ``seq`` counts from 0; the last has ``end``."""

    op_id: str
    seq: int = 0
    lines: list[str] = []
    pod: str = ""  # whose lines: the pod, its container and attempt
    container: str = ""
    attempt: int = 0
    last_at: str = ""  # the time of the last line answered so far (RFC 3339)
    end: bool = False  # the answer's last chunk
    more: bool = False  # (with ``end``) cut short by the bounds above: ask again with ``after=last_at``
    reason: str = ""  # a refusal (``proto.reasons.LogsRefusal``; with ``end``) ...
    message: str = ""  # ... and what it says
