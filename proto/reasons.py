"""Every reason code on the wire, defined once: why an op waits (``Reason``), and why it ends, is refused,
failed, evicted, preempted, held, missed by the cache or dead-lettered (the families below ``Reason``).

Why an operation waits: every waiting reason code, with what it means, its message template,
whether preemption can lift it, and what it waits on (the generation parking watches:
``services.admission.parking``). A message is only ever built from its template: ``message(reason, **fields)``,
or ``pending(reason, **fields)`` for the ``PendingReason`` that ``why`` answers.

Codes are ``StrEnum`` members, so they equal their text on the wire (``PendingReason.code``) and in
``opsched why``; a producer in another language matches on the text. Wire fields stay ``str`` (a reason
another producer, or Kubernetes, spells is kept as it came); producers here only ever pass a member
(``tests/contract/test_reasons.py``). Kubernetes-derived failure reasons keep Kubernetes' casing.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from string import Formatter

from opsched.proto.queries import PendingReason


class WaitsOn(Enum):
    SCOPE = "scope"  # usage of its cohort (or lone queue) changes: an op of it starts or ends
    CAPACITY = "capacity"  # free node capacity changes: an op ends anywhere, a node changes, room held is let go
    BUDGET = "budget"  # spend is recorded, or a budget window starts again
    BATCH = "batch"  # an op of its batch starts or ends
    TIME_OR_CONFIG = "time_or_config"  # only time (a back-off) or a new queue configuration lifts it


class Reason(StrEnum):
    QUEUE_CONCURRENCY = "queue_concurrency"
    MAX_SERVICES = "max_services"
    COST_QUOTA = "cost_quota"
    QUOTA_EXHAUSTED = "quota_exhausted"
    QUOTA_LENT_OUT = "quota_lent_out"
    COHORT_LENDER_WAITING = "cohort_lender_waiting"
    BORROW_LATER = "borrow_later"
    NONPREEMPTIBLE_OVER_NOMINAL = "nonpreemptible_over_nominal"
    NO_CAPACITY = "no_capacity"
    AGENT_SILENT = "agent_silent"
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
    WAITING_FOR_DEPENDENCY = "waiting_for_dependency"
    HANDLER_FAILED = "handler_failed"
    UNKNOWN_OP = "unknown_op"
    BAD_REQUEST = "bad_request"
    RESOURCE_NOT_COVERED = "resource_not_covered"
    USER_PENDING_CAP = "user_pending_cap"
    QUEUE_HELD = "queue_held"
    WAITING_FOR_NODE = "waiting_for_node"
    POOL_AT_MAX = "pool_at_max"
    POOL_BUDGET = "pool_budget"


@dataclass(frozen=True)
class Rule:
    means: str  # what the reason says, for people and docs
    template: str  # its message, str.format with named fields only: ``message(reason, **fields)`` fills it
    preemption_lifts: bool = False  # taking running ops away could make room
    waits_on: WaitsOn | None = None  # None: parking does not know what lifts it (look again every cycle)
    fields: frozenset[str] = field(init=False, repr=False, compare=False)  # the template's field names
    render: Callable[..., str] = field(init=False, repr=False, compare=False)  # the template, compiled

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", fields_of(self.template))
        object.__setattr__(self, "render", compiled(self.template, self.fields))


def fields_of(template: str) -> frozenset[str]:
    """The names of ``template``'s fields; a positional (``{}``, ``{0}``) or dotted one is a programming error."""
    names = {name for _, name, _, _ in Formatter().parse(template) if name is not None}
    bad = sorted(n for n in names if not n.isidentifier())
    if bad:
        raise ValueError(f"template {template!r}: fields must be named, not {bad}")
    return frozenset(names)


def compiled(template: str, fields: frozenset[str]) -> Callable[..., str]:
    """``template`` as a function of exactly its fields (keyword-only): the same text ``template.format``
    gives, at the cost of an f-string (messages are built on admission's hot path, one per blocked op).
    Only this module's own constant templates are compiled, their fields checked to be identifiers."""
    params = ", ".join(sorted(fields))
    source = f"lambda *, {params}: f{template!r}" if fields else f"lambda: {template!r}"
    return eval(compile(source, "<reason template>", "eval"), {})  # noqa: S307 - a constant of this module


REASONS: dict[Reason, Rule] = {
    Reason.QUEUE_CONCURRENCY: Rule(
        "its queue runs as many ops as its concurrency allows",
        "queue {queue} concurrency reached ({running}/{limit})", True, WaitsOn.SCOPE),
    Reason.MAX_SERVICES: Rule(
        "its queue runs as many service ops as its services.maxServices allows",
        "queue {queue} already runs {running} service(s) (services.maxServices {limit}); a service starts when "
        "one of them is stopped", True, WaitsOn.SCOPE),
    Reason.COST_QUOTA: Rule(
        "the estimated cost of its queue's running ops is at the queue's costQuota",
        # flavor: " on flavor a100" (the assignment it was priced on: ``policies.flavor_cost``) or ""
        "queue {queue} cost quota: {used:.2f} in use + {estimate:.2f} estimated{flavor} > {quota:.2f}", True,
        WaitsOn.SCOPE),
    Reason.QUOTA_EXHAUSTED: Rule(
        "its queue (and cohort) has no quota left for a resource it asks",
        # borrowing: "; no cohort to borrow from", "; borrowing limit N reached", "; borrowing limit N of cohort C
        # reached" or ""; cohort: "", " and the cohort cannot lend enough" or, nested, " and the cohorts C → D
        # cannot lend enough" (policies.quota._why_not)
        "quota of {resource} flavor {flavor} exhausted ({used:g}/{nominal:g} used, needs {amount:g}{borrowing})"
        "{cohort}",
        True, WaitsOn.SCOPE),
    Reason.QUOTA_LENT_OUT: Rule(
        "its queue's own quota is lent to borrowers of the cohort",
        "quota of {resource} flavor {flavor}: {amount:g} of its own nominal {nominal:g} is lent to its cohort "
        "({free:g} free now); waiting for the borrowers to finish", True, WaitsOn.SCOPE),
    Reason.COHORT_LENDER_WAITING: Rule(
        "a queue of its cohort waits for its own quota: no borrowing until it runs",
        "queue {lender} of cohort {cohort} waits for its own quota; no borrowing until its ops run",
        True, WaitsOn.SCOPE),
    Reason.BORROW_LATER: Rule(
        "it fits only by borrowing; ops within their quota go first",
        "fits only by borrowing; ops within quota go first", False, WaitsOn.SCOPE),
    Reason.NONPREEMPTIBLE_OVER_NOMINAL: Rule(
        "it is not preemptible, so it may use only its queue's nominal quota, never quota borrowed from its cohort "
        "(which could then never be reclaimed)",
        # never: "" or what to do when it asks more than the nominal itself (then it can never be admitted here)
        "not preemptible: it may use only queue {queue}'s nominal quota of {resource} flavor {flavor}, never "
        "borrow from cohort {cohort} ({used:g} in use + {amount:g} asked > {nominal:g} nominal){never}",
        True, WaitsOn.SCOPE),
    Reason.NO_CAPACITY: Rule(
        "no node its pods may use has room now",
        "no free capacity now for {what}", True, WaitsOn.CAPACITY),
    Reason.WAITING_FOR_NODE: Rule(
        "it is admitted onto nodes its pool's autoscaler is adding; if they do not come in time it is released and "
        "retried",
        "waiting for {count} new node(s) of pool {pool} (provisioning since {since:%H:%M:%S}, usually "
        "{expected:g}s; released and retried at {deadline:%H:%M:%S} if they have not come)"),
    Reason.POOL_AT_MAX: Rule(
        "the node pool its flavor grows has all the nodes it may have, and none has room",
        # leaving: "" or ", 1 leaving"
        "pool {pool} is at maxNodes ({nodes}/{max}{leaving}) and none of its nodes has room for {what}",
        True, WaitsOn.CAPACITY),
    Reason.POOL_BUDGET: Rule(
        "the node pool's budget is spent: it adds no new nodes until the window resets",
        "pool {pool} {period} budget exhausted: no new nodes until {resets_at}; only its {nodes} node(s) that "
        "exist take ops", False, WaitsOn.BUDGET),
    Reason.AGENT_SILENT: Rule(
        "the agent its flavor lives in has stopped sending heartbeats: it gets no new ops",
        "agent {agent} is silent (its last heartbeat at {since:%H:%M:%S}); no new ops go to it"),
    Reason.UNFITTABLE: Rule(
        "no node its pods may use could ever hold it",
        "no node offers {what}", False, WaitsOn.CAPACITY),
    Reason.BUDGET_EXHAUSTED: Rule(
        "its queue's or project's budget for the window is spent",
        # unit: "" (money) or " GPU-hours"; running: "" or " + N expected of running ops"; flavor: as cost_quota's
        "{scope} {name} {period} budget exhausted: {spent:.2f}{unit} spent{running} + {estimate:.2f} estimated{flavor} > "
        "{limit:.2f} limit; the window resets at {resets_at}", False, WaitsOn.BUDGET),
    Reason.BATCH_CONCURRENCY: Rule(
        "its batch (sweep) runs as many ops as its concurrency allows",
        "batch {batch} already runs {running} op(s) (its concurrency is {limit})", False, WaitsOn.BATCH),
    Reason.BACKOFF: Rule(
        "it backs off after an eviction or a failure",
        "backing off after {after} until {until:%H:%M:%S}", False, WaitsOn.TIME_OR_CONFIG),
    Reason.QUEUE_REMOVED: Rule(
        "its queue is no longer in the configuration",
        "queue {queue!r} is no longer configured", False, WaitsOn.TIME_OR_CONFIG),
    Reason.NO_MATCHING_FLAVOR: Rule(
        "no flavor of its queue matches its node selector",
        "no flavor of queue {queue} matches the op's node selector {selector}; it cannot be admitted to this queue",
        False, WaitsOn.TIME_OR_CONFIG),
    Reason.WAITING_FOR_VICTIMS: Rule(
        "it preempted ops; it waits for their pods to go",
        "waiting for {count} preempted op(s) to terminate: {victims}"),
    Reason.NEXT_CYCLE: Rule(
        "nothing holds it; the next cycle decides",
        "{ready}; the next cycle {step} it"),  # "fits now" / "admits", or its gates are open / "queues"
    Reason.QUEUE_POSITION: Rule(
        "ops before it in its queue go first",
        "{ahead} op(s) ahead of it in queue {queue}"),
    Reason.WAITING_COST_ESTIMATE: Rule(
        "the cost service has not estimated it yet",
        "waiting for the cost service's estimate"),
    Reason.WAITING_CACHE: Rule(
        "it uses the cache and the cache service has not answered yet",
        "waiting for the cache service's answer"),
    Reason.ON_HOLD: Rule(
        "it waits for `opsched approve`",
        "{why}"),  # the hold's own message (or reason)
    Reason.RETRYING: Rule(
        "an attempt failed; its retry is being scheduled",
        "attempt {attempt} failed ({failure}); its retry is being scheduled"),
    Reason.BEING_PREEMPTED: Rule(
        "it is being preempted; its pods are terminating",
        "being preempted by {preemptor}; its pods are terminating"),
    Reason.WAITING_FOR_DEPENDENCY: Rule(
        "the dispatcher cannot reach what it needs to dispatch it (the Kubernetes API); it keeps trying",
        "waiting for {dependency} since {since:%H:%M:%S} ({detail})"),  # dependency: ``dependency_name``
    Reason.HANDLER_FAILED: Rule(
        "a service's handler kept failing on a message the op waited on (a bug); the op was ended",
        "{service} gave up on its {failed} message: {error}"),
    Reason.UNKNOWN_OP: Rule(
        "no such operation",
        "no such operation"),
    Reason.BAD_REQUEST: Rule(
        "the query could not be answered",
        "{error}"),  # what decoding the query said
    Reason.RESOURCE_NOT_COVERED: Rule(  # a refusal at submit, never a wait: the op ends rejected
        "it asks for an accelerator its queue sets no quota for (a queue that lists resources covers only those)",
        "queue {queue} sets no quota for {resource} (its resources: {covered}); the op asks for {amount:g} x "
        "{resource}: submit it to a queue with {resource} quota, or give queue {queue} one"),
    Reason.USER_PENDING_CAP: Rule(  # a refusal at submit (or restart, copy), never a wait: the op ends rejected
        "its requester already has as many ops waiting in its queue as the queue's maxPendingPerUser allows",
        "user {user} already has {count} ops pending in queue {queue} (maxPendingPerUser {cap}); submit again "
        "once some are admitted or end, or use another queue"),
    Reason.QUEUE_HELD: Rule(
        "an admin held or drained its queue (`opsched queues hold` or `drain`): nothing of it is admitted until it is "
        "resumed",
        # state: "held" or "drained"; comment: "" or " (<the admin's comment>)"
        "queue {queue} is {state} by {by} since {since:%Y-%m-%d %H:%M:%S}{comment}: nothing is admitted until "
        "`opsched queues resume {queue}`", False, WaitsOn.TIME_OR_CONFIG),
}
DEPENDENCY_NAMES = {"kubernetes": "the Kubernetes API", "nats": "NATS"}  # as ``why`` names what an op waits for


def dependency_name(dependency: str) -> str:
    return DEPENDENCY_NAMES.get(dependency, dependency)


PREEMPTION_LIFTS = frozenset(r for r, rule in REASONS.items() if rule.preemption_lifts)


def message(reason: Reason, /, **fields: object) -> str:
    """``reason``'s message, its template filled with ``fields``. Missing or unexpected fields are a
    programming error (TypeError), so every template can be proved filled right by a test."""
    rule = REASONS[reason]
    try:
        return rule.render(**fields)
    except TypeError:
        missing, extra = sorted(rule.fields - fields.keys()), sorted(fields.keys() - rule.fields)
        if not missing and not extra:
            raise  # a value its format spec does not take
    raise TypeError(f"message for {reason.value!r} ({rule.template!r}): "
                    f"missing fields {missing}, unexpected fields {extra}") from None


def pending(reason: Reason, /, **fields: object) -> PendingReason:
    """``reason`` as ``why`` answers it and a cycle keeps it: its code and its message."""
    return PendingReason(code=reason, message=message(reason, **fields))


# ---- why an op (or an attempt) ends, is refused or taken away ----
class Failure(StrEnum):
    """``failed.reason`` (and ``retry_scheduled.reason``): why an attempt failed. Kubernetes' own reasons
    (a pod's or its container's ``reason``, e.g. ``OOMKilled``) come as Kubernetes spells them; these are
    the ones opsched names or acts on."""

    HANDLER_GAVE_UP = "HandlerFailed"  # a service's handler gave up on a message the attempt waited on (a bug)
    AGENT_LOST = "AgentLost"  # admission: the attempt's agent stopped sending heartbeats (policies.agents)
    POD_DELETED = "PodDeleted"  # the dispatcher: a pod deleted by someone else before the attempt ended
    POD_REJECTED = "PodRejected"  # the API refused the pod for good
    POD_CONFLICT = "PodConflict"  # a pod of its name belongs to another op or attempt
    NAMESPACE_REFUSED = "NamespaceRefused"  # its namespace is not the dispatcher's to use
    DEADLINE_EXCEEDED = "DeadlineExceeded"  # Kubernetes: activeDeadlineSeconds (termination.timeout) passed
    ERROR = "Error"  # a container exited non-zero and Kubernetes named no reason
    FAILED = "Failed"  # a pod failed and nothing named a reason
    # Kubernetes' reasons of a pod taken away from its node (infrastructure failures)
    NODE_LOST = "NodeLost"
    NODE_SHUTDOWN = "NodeShutdown"
    EVICTED = "Evicted"
    PREEMPTED = "Preempted"
    TERMINATED = "Terminated"
    SHUTDOWN = "Shutdown"
    UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
    OUT_OF_CPU = "OutOfcpu"
    OUT_OF_MEMORY = "OutOfmemory"
    OUT_OF_GPU = "OutOfnvidia.com/gpu"
    # opsched's ends of an op whose messages cannot be handled (also ``rejected.reason``, before it started)
    MESSAGE_TOO_LARGE = "message_too_large"  # an event about it is over the server's max payload
    PUBLISH_REFUSED = "publish_refused"  # an event about it is not admission's to publish
    FOLD_FAILED = "fold_failed"  # admission could not fold an event about it


class Ending(StrEnum):
    """The reason of an end that is not a failure or a refusal: ``succeeded``, ``stopped``, ``skipped``."""

    COMPLETED = "Completed"  # succeeded: its main pod completed (Kubernetes' word)
    CACHE_HIT = "cache_hit"  # succeeded: an identical op's result was reused
    STOPPED = "stopped"  # stopped (``stop_requested`` too): `opsched stop`
    CONDITION_FALSE = "condition_false"  # skipped: its ``conditions`` were false
    RESUMED = "resumed"  # not an end: the reason an op resumed in place shows (``OpRow``, ``why``)
    CULLED = "culled"  # stopped: a service nobody touched for its ``termination.culling.timeout``


class Refusal(StrEnum):
    """``rejected.reason`` and ``error.reason``: why an op or a command was refused."""

    INVALID_SPEC = "invalid_spec"
    INVALID_OP_ID = "invalid_op_id"
    UNKNOWN_QUEUE = "unknown_queue"
    AGENT_MISMATCH = "agent_mismatch"
    QUEUE_FULL = "queue_full"
    UNKNOWN_PRIORITY_CLASS = "unknown_priority_class"
    PRIORITY_TOO_HIGH = "priority_too_high"  # a priority above its queue's
    APPROVAL_REJECTED = "approval_rejected"  # `opsched reject` of an op held for approval
    NOT_ALLOWED = "not_allowed"  # the requester may not (``proto.access``)
    SPEC_TOO_LARGE = "spec_too_large"  # over ``rules.spec_size``'s bound
    FORBIDDEN_POD_SPEC = "forbidden_pod_spec"  # a pod spec its queue's podSecurity forbids
    UNSEALABLE_ENV = "unsealable_env"  # its env cannot be opened (``services.runtime.sealing``)
    INVALID_TEMPLATE = "invalid_template"
    INVALID_CONDITION = "invalid_condition"
    RATE_LIMITED = "rate_limited"  # its requester submits faster than the queue allows
    # a command's refusals (``error`` events: its sender reads them as its verdict)
    ALREADY_ENDED = "already_ended"  # a stop, approve or reject of an op that has ended
    ALREADY_APPROVED = "already_approved"  # an approve of an op approved before: nothing to do
    ALREADY_STOPPING = "already_stopping"  # a stop of an attempt whose stop was requested before: nothing to do
    NOT_ON_HOLD = "not_on_hold"  # a reject of an op not held for approval (stop it instead)
    DUPLICATE_OP_ID = "duplicate_op_id"
    NOT_RESUMABLE = "not_resumable"
    INVALID_QUEUES = "invalid_queues"
    QUEUES_FROM_RESOURCES = "queues_from_resources"  # the configuration is the cluster's queue resources'; --apply is refused
    INVALID_SCHEDULE = "invalid_schedule"
    INVALID_SCHEDULE_ID = "invalid_schedule_id"
    SCHEDULE_EXISTS = "schedule_exists"
    UNKNOWN_SCHEDULE = "unknown_schedule"
    MALFORMED_MESSAGE = "malformed_message"  # a message that does not decode (also a dead letter's reason)
    UNKNOWN_CONNECTION = "unknown_connection"  # a connection its queue's configuration does not declare for it
    NOT_A_RUNNING_SERVICE = "not_a_running_service"  # a touch of an op that is not a service, or not running
    QUEUE_UNCHANGED = "queue_unchanged"  # a hold, drain or resume of a queue already so: nothing to do


class Eviction(StrEnum):
    """``evicted.reason`` (and the pods' ``opsched.io/evicted`` annotation): why an attempt was released
    without being the op's fault."""

    GANG_TIMEOUT = "gang_timeout"  # the gang was not all Running in time
    GANG_FAILED = "gang_failed"  # another pod of the gang failed
    GANG_FINISHED = "gang_finished"  # the main pod succeeded; the workers still running are done
    POD_REJECTED = "pod_rejected"  # the API refused another pod of the gang
    UNWANTED = "unwanted"  # created for an attempt that a stop or preemption released meanwhile
    ORPHANED = "orphaned"  # a pod no live attempt owns
    UNSCHEDULABLE = "unschedulable"  # Unschedulable longer than its queue's pendingTimeout
    NODE_NOT_PROVISIONED = "node_not_provisioned"  # no node of its pool came within provisioningTimeoutSeconds


class Preemption(StrEnum):
    """``preempt_requested.reason`` (and ``preempted.reason``): why a victim is taken away."""

    WITHIN_QUEUE = "within_queue"  # a higher-priority op of its queue
    RECLAIM = "reclaim"  # its queue lent the quota the victim borrowed
    QUEUE_DRAINED = "queue_drained"  # an admin drained its queue (`opsched queues drain`): no preemptor


class Hold(StrEnum):
    """``on_hold.reason``: why an op waits for approval."""

    IS_APPROVED_FALSE = "is_approved_false"
    COST_ABOVE_THRESHOLD = "cost_above_threshold"
    GPUS_ABOVE_THRESHOLD = "gpus_above_threshold"


class CacheMiss(StrEnum):
    """``cache_missed.reason``."""

    DISABLED = "disabled"  # no longer published: on streams from before issue 36 only (``rules.caching``)
    NOT_FOUND = "not_found"
    EXPIRED = "expired"
    ORIGINAL_FAILED = "original_failed"


class DeadLetter(StrEnum):
    """``error.reason`` of a dead-lettered message (``services.runtime.deadletter``); one whose handler kept
    failing is ``Reason.HANDLER_FAILED``, one that does not decode ``Refusal.MALFORMED_MESSAGE``."""

    MAX_DELIVERIES = "max_deliveries"
    POISON_MESSAGE = "poison_message"  # it killed the service while in hand (``services.runtime.inhand``)
    NOTIFICATION_UNDELIVERABLE = "notification_undeliverable"  # a delivery given up (``services.notifier``)


class ScheduleEnd(StrEnum):
    """``schedule_finished.reason`` of a schedule disabled by admission (one whose stored spec is refused:
    ``Refusal.INVALID_SPEC``)."""

    FAILED = "failed"  # computing its runs raised
    MAX_RUNS = "max_runs"  # maxRuns runs fired
    COMPLETED = "completed"  # a datetime schedule's one run fired
    NO_MORE_SLOTS = "no_more_slots"  # its cron has no slot left
    END_AT = "end_at"  # no slot left before its endAt


class LogsRefusal(StrEnum):
    """``LogsChunk.reason`` (``proto.queries``): why the dispatcher answers a logs request with no lines (an op not
    on the op stream: ``Reason.UNKNOWN_OP``, as ``why`` says)."""

    INVALID_LOGS_REQUEST = "invalid_logs_request"  # a field out of its bounds, or a message that does not decode
    NO_POD_YET = "no_pod_yet"  # not admitted yet, or its pods not created yet
    POD_GONE = "pod_gone"  # its pods were deleted (ttl, stop, preemption, a gang released)
    UNKNOWN_ATTEMPT = "unknown_attempt"  # an attempt number it never had
    UNKNOWN_REPLICA = "unknown_replica"  # a replica its attempt has no pod for (the message lists its pods)
    UNKNOWN_CONTAINER = "unknown_container"  # a container its pod has not (the message lists them)
    NOT_STARTED = "not_started"  # the container has not started (its image pulled, its init containers running)
    LOGS_BUSY = "logs_busy"  # as many logs are being read as the dispatcher reads at once: ask again
    KUBERNETES_UNAVAILABLE = "kubernetes_unavailable"  # the API server did not answer
