"""Can this op be admitted now? Checks in order — its queue held or drained by an admin, queue concurrency, its
services cap (a service op), batch concurrency, then for each flavor assignment (most preferred first): cost quota
and budgets with its estimate on that assignment (``flavor_cost``), quota (own, then borrowed: never for an op that
is not preemptible) and node capacity.
A fit without borrowing beats one with borrowing; the reasons of every failure are kept for `why`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opsched.proto.queries import PendingReason
from opsched.proto.reasons import Reason, pending
from opsched.services.admission.model import agents, placement
from opsched.services.admission.model.node_affinity import Terms, required_terms
from opsched.services.admission.model.nodes import describe
from opsched.services.admission.model.pools import PoolReach
from opsched.services.admission.model.queue_stops import held
from opsched.services.admission.model.records import OpRecord
from opsched.services.admission.policies import budgets, flavor_cost
from opsched.services.admission.policies import flavors as flavor_policy
from opsched.services.admission.policies.quota import Fit, check
from opsched.services.admission.state.snapshot import Snapshot

ADMIT, BORROW, WAIT, UNFITTABLE = "admit", "borrow", "wait", "never_fits"  # verdict outcomes


@dataclass
class Verdict:
    outcome: str
    reasons: list[PendingReason] = field(default_factory=list)
    flavors: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[str] | None = None  # where each pod would go (when capacity is known)
    agent: str = ""  # whose cluster (model.agents)
    hosts: list[str] = field(default_factory=list)  # each pod's preferred host (model.placement), or none
    queue_blocked: bool = False  # no later op of this queue can pass either
    estimate: float | None = None  # its estimate on ``flavors`` (``policies.flavor_cost``), and the pool pricing it
    pool: str = ""
    provisioning: list[str] = field(default_factory=list)  # per pod, the node pool of its new node ("": existing)
    provisioning_timeout_s: float | None = None  # the largest provisioningTimeoutSeconds of those pools
    provisioning_expected_s: float | None = None  # the largest provisioningSeconds of those pools


def evaluate(op: OpRecord, snap: Snapshot, allow_borrow: bool = True) -> Verdict:
    queue = snap.book.queues.get(op.queue)
    if op.not_before is not None and snap.now is not None and snap.now < op.not_before:
        why = f"{op.reason}: {op.reason_message}" if op.reason_message else (op.reason or "an eviction")
        return _wait(pending(Reason.BACKOFF, after=why, until=op.not_before))
    if queue is None:
        return _wait(pending(Reason.QUEUE_REMOVED, queue=op.queue), blocked=True)
    stop = snap.stopped.get(op.queue)
    if stop is not None:  # an admin held or drained it: nothing of it is admitted (``queue_stops``)
        return _wait(held(stop), blocked=True)
    running = snap.running[op.queue]
    if queue.concurrency is not None and running >= queue.concurrency:
        return _wait(pending(Reason.QUEUE_CONCURRENCY, queue=op.queue, running=running, limit=queue.concurrency),
                     blocked=True)
    cap = queue.services.max_services
    if op.service and cap is not None and snap.services[op.queue] >= cap:
        return _wait(pending(Reason.MAX_SERVICES, queue=op.queue, running=snap.services[op.queue], limit=cap))
    batch, limit = op.spec.batch, op.spec.batch_concurrency
    if batch and limit is not None and snap.batch_running[batch] >= limit:
        return _wait(pending(Reason.BATCH_CONCURRENCY, batch=batch, running=snap.batch_running[batch], limit=limit))
    return _assign(op, snap, allow_borrow)


def _cost(op: OpRecord, snap: Snapshot, estimate: float, flavor: str) -> PendingReason | None:
    """Its queue's cost quota, then the budgets covering it, with its ``estimate`` on the assignment tried
    (``flavor``: the assignment as a reason names it, ``policies.flavor_cost.named``)."""
    quota, cost = snap.book.queues[op.queue].cost_quota, snap.cost_used[op.queue]
    if quota is not None and cost + estimate > quota + 1e-9:
        return pending(Reason.COST_QUOTA, queue=op.queue, used=cost, estimate=estimate, quota=quota, flavor=flavor)
    budget_list = snap.book.config.budgets
    if not budget_list or snap.now is None:
        return None
    return budgets.check(budget_list, op.queue, op.spec.project, estimate, op.gpu_hours,
                         snap.spend.of, snap.spend.held(snap.committed), snap.now, flavor=flavor)


def _assign(op: OpRecord, snap: Snapshot, allow_borrow: bool) -> Verdict:
    reasons: list[PendingReason] = []
    borrow_option: Verdict | None = None
    ever = False
    selector = op.spec.environment.node_selector
    combos = flavor_policy.combos(snap.book, op.queue, op.request, selector)
    if not combos:
        return _wait(pending(Reason.NO_MATCHING_FLAVOR, queue=op.queue, selector=selector))
    for combo in combos:
        verdict = _try(op, snap, combo, reasons)
        ever = ever or verdict.outcome != UNFITTABLE
        if verdict.outcome == ADMIT:
            return verdict
        if verdict.outcome == BORROW and borrow_option is None:
            borrow_option = verdict
    if borrow_option is not None:
        return borrow_option if allow_borrow else Verdict(BORROW, [pending(Reason.BORROW_LATER)])
    if not ever:
        return Verdict(UNFITTABLE, reasons)
    return Verdict(WAIT, [r for r in reasons if r.code != Reason.UNFITTABLE] or reasons)


def _try(op: OpRecord, snap: Snapshot, combo: dict[str, str], reasons: list[PendingReason]) -> Verdict:
    book = snap.book
    agent = agents.agent_of(book, op.queue, combo)
    if agent is None or (op.spec.agent is not None and agent != op.spec.agent):
        return Verdict(UNFITTABLE)  # flavors in two clusters, or not on the agent its file names
    if agent in snap.silent:
        reasons.append(pending(Reason.AGENT_SILENT, agent=agent, since=snap.silent[agent]))
        return Verdict(WAIT)
    node_selector, tolerations = flavor_policy.placement(book, op.queue, combo)
    full_selector = {**op.spec.environment.node_selector, **node_selector, **agents.selector(agent)}
    full_tolerations = list(op.spec.environment.tolerations) + tolerations
    affinity = required_terms(op.spec.environment.affinity) if op.spec.environment.affinity else None
    capacity = snap.capacity
    known = capacity.knows(agent)
    never = _never(op, snap, full_selector, full_tolerations, affinity) if known else None
    if never is not None and capacity.reported(agent):
        reasons.append(never)
        return Verdict(UNFITTABLE)
    known = known and never is None  # only pools' new nodes, none for it: as before its agent reports nodes
    estimate, pool = flavor_cost.estimate_for(op, full_selector)
    over = _cost(op, snap, estimate, flavor_cost.named(combo))
    if over is not None:
        reasons.append(over)
        return Verdict(WAIT)
    borrowing = False
    for resource, flavor in combo.items():
        result = check(book, snap.usage, op.queue, (resource, flavor), op.request[resource],
                       nominal_only=not op.preemptible)
        if result.fit == Fit.NO:
            assert result.code is not None
            reasons.append(PendingReason(code=result.code, message=result.reason))  # its template, filled by check
            return Verdict(WAIT)
        borrowing = borrowing or result.fit == Fit.BORROWS
    lenders = [m for m in book.members(op.queue) if m != op.queue and m in snap.starved] if borrowing else []
    if lenders:
        reasons.append(pending(Reason.COHORT_LENDER_WAITING, lender=lenders[0], cohort=book.queues[op.queue].cohort))
        return Verdict(WAIT)
    rule = placement.rule_of(book, combo)
    nodes = capacity.place(op.pods, full_selector, full_tolerations, affinity, rule) if known else None
    if known and nodes is None:
        what = describe(op.pods[0], full_selector) if len(op.pods) == 1 else (
            f"a gang of {len(op.pods)} pods ({describe(op.request, full_selector)} in all)")
        reasons.append(_no_room(capacity.pools_for(full_selector, full_tolerations, affinity), what))
        return Verdict(WAIT)
    hosts = placement.preferred_hosts(rule, nodes, lambda n: capacity.nodes[n].labels, op.pods)
    # each new node once (the pods sharing one: "" after the first), so what is awaited counts nodes, not pods
    provisioning, counted = [], set()
    for n in nodes or []:
        provisioning.append("" if n in counted else capacity.nodes[n].virtual_pool)
        counted.add(n)
    used = [p.pool for p in capacity.pools if p.pool.name in provisioning]
    return Verdict(BORROW if borrowing else ADMIT, [], combo, node_selector, tolerations, nodes, hosts=hosts,
                   agent=agent, estimate=estimate, pool=pool,
                   provisioning=provisioning if any(provisioning) else [],
                   provisioning_timeout_s=max((p.provisioning_timeout_seconds for p in used), default=None),
                   provisioning_expected_s=max((p.provisioning_seconds for p in used), default=None))


def _never(op: OpRecord, snap: Snapshot, selector: dict[str, str], tolerations: list[dict[str, Any]],
           affinity: Terms | None) -> PendingReason | None:
    """Why no node, existing or any its pools may add, could ever hold the op (``unfittable``); None when one could.
    A gang onto a pool must fit on the pool's ``maxNodes`` nodes at once."""
    capacity = snap.capacity
    if not capacity.ever_all(op.pods, selector, tolerations, affinity):
        biggest = max(op.pods, key=lambda p: sum(p.values())) if op.pods else op.request
        return pending(Reason.UNFITTABLE, what=describe(biggest, selector, affinity))
    if len(op.pods) > 1 and not capacity.ever_gang(op.pods, selector, tolerations, affinity):
        pools = capacity.pools_for(selector, tolerations, affinity)
        each = describe(max(op.pods, key=lambda p: sum(p.values())), {})
        where = ", ".join(f"pool {p.pool.name} (maxNodes {p.pool.max_nodes})" for p in pools)
        return pending(Reason.UNFITTABLE, what=f"a gang of {len(op.pods)} pods ({each} each) in {where}")
    return None


def _no_room(pools: list[PoolReach], what: str) -> PendingReason:
    """Why nothing has room now: a pool that may add no node (at maxNodes, or its budget spent), else no capacity."""
    for p in pools:
        if p.reach > 0:
            continue
        if p.blocked_until is not None:
            return pending(Reason.POOL_BUDGET, pool=p.pool.name, period=_period(p), resets_at=p.blocked_until,
                           nodes=p.existing - p.leaving)
        leaving = f", {p.leaving} leaving" if p.leaving else ""
        return pending(Reason.POOL_AT_MAX, pool=p.pool.name, nodes=p.existing, max=p.pool.max_nodes, leaving=leaving,
                       what=what)
    return pending(Reason.NO_CAPACITY, what=what)


def _period(p: PoolReach) -> str:
    return budgets.ADJECTIVE.get(p.blocked_window, p.blocked_window)


def _wait(reason: PendingReason, blocked: bool = False) -> Verdict:
    return Verdict(WAIT, [reason], queue_blocked=blocked)
