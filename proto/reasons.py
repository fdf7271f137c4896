"""Why an operation waits: every reason code, defined once, with what it means, its message template,
whether preemption can lift it, and what it waits on (the generation parking watches:
``services.admission.parking``). A message is only ever built from its template: ``message(reason, **fields)``,
or ``pending(reason, **fields)`` for the ``PendingReason`` that ``why`` answers.

Codes are ``StrEnum`` members, so they equal their text on the wire (``PendingReason.code``) and in
``opsched why``; a producer in another language matches on the text.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from string import Formatter

from proto.queries import PendingReason


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
    Reason.COST_QUOTA: Rule(
        "the estimated cost of its queue's running ops is at the queue's costQuota",
        "queue {queue} cost quota: {used:.2f} in use + {estimate:.2f} estimated > {quota:.2f}", True, WaitsOn.SCOPE),
    Reason.QUOTA_EXHAUSTED: Rule(
        "its queue (and cohort) has no quota left for a resource it asks",
        # borrowing: "; no cohort to borrow from", "; borrowing limit N reached" or ""; cohort: "" or " and the
        # cohort cannot lend enough"
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
    Reason.NO_CAPACITY: Rule(
        "no node its pods may use has room now",
        "no free capacity now for {what}", True, WaitsOn.CAPACITY),
    Reason.AGENT_SILENT: Rule(
        "the agent its flavor lives in has stopped sending heartbeats: it gets no new ops",
        "agent {agent} is silent (its last heartbeat at {since:%H:%M:%S}); no new ops go to it"),
    Reason.UNFITTABLE: Rule(
        "no node its pods may use could ever hold it",
        "no node offers {what}", False, WaitsOn.CAPACITY),
    Reason.BUDGET_EXHAUSTED: Rule(
        "its queue's or project's budget for the window is spent",
        # unit: "" (money) or " GPU-hours"; running: "" or " + N expected of running ops"
        "{scope} {name} {period} budget exhausted: {spent:.2f}{unit} spent{running} + {estimate:.2f} estimated > "
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
        "the cache service has not answered yet",
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
