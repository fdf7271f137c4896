"""Parking: a cycle skips a queue whose waiting ops it found blocked until something they wait on
changes, so a cycle's work follows what changed, not how many queues exist.

A queue is parked after a walk that admitted nothing, set nothing aside to borrow and planned no
preemption, when every op it looked at waits for a reason only a known change can lift. What each
reason waits on is a *generation* the queue manager bumps when the fold announces that that thing
changed (``queue_manager.QueueManager``, following ``transitions``):

- ``scope:<cohort or queue>`` — an op of the cohort (or of the lone queue) started or ended, or a
  lender's "waiting for its own quota" flag changed: queue concurrency, cost quota, quota, borrowing;
- ``capacity`` — an op ended anywhere, an op's node became known, a node changed, held room was let go;
- ``budget`` — actual spend was recorded; ``batch:<name>`` — an op of the batch ended or started.

A back-off parks until it ends; a queue with aging is looked at again after ``AGING_RECHECK`` (its
order moves with time). An op queued in it or leaving it (stopped, rejected: the ones behind it
move into the lookahead), a new configuration, a node change (an op may now fit, or be known never
to) or a timer firing un-parks it (the queue manager again). Every park also waits on its cohort's
usage, and an op ending anywhere moves ``capacity`` and ``budget`` (its expected spend is no longer
committed). A queue where preemption could ever find a victim for a waiting op is not
parked: the victims' protection (cooldown, minRuntime) runs out with time, not with an event.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from opsched.proto.reasons import REASONS, WaitsOn
from opsched.services.admission.model.queues import Book
from opsched.services.admission.model.records import OpRecord, Park
from opsched.services.admission.policies import preemption
from opsched.services.admission.state.queue_manager import QueueManager

AGING_RECHECK = timedelta(seconds=30)


def skip(state, queue: str, now: datetime) -> bool:
    """Can this cycle leave ``queue`` alone? (Un-parks it when what it waited on changed.)"""
    queues = state.queues
    park = queues.parked.get(queue)
    if park is None:
        return False
    if (park.until is None or now < park.until) and all(queues.gens.get(k, 0) == g for k, g in park.deps.items()):
        return True
    del queues.parked[queue]
    return False


def park(state, book: Book, queue: str, kept: list, now: datetime) -> None:
    """Park ``queue`` after a walk that decided nothing, when its ``kept`` (op, verdict) pairs allow it."""
    deps: set[str] = {state.queues.scope_key(queue)}  # a later check passed only at this usage: when it moves, a
    until: datetime | None = None             # reason may change (and "quota lent out" stops the cohort lending)
    for op, verdict in kept:
        if op.op_id in state.fold.nominated:
            return
        codes = [r.code for r in verdict.reasons]
        keys = [_dependency(code, op, state.queues) for code in codes]
        if not codes or None in keys:
            return  # a reason parking does not know: look again next cycle
        deps.update(k for k in keys if k)
        if preemption.worth_trying(codes) and preemption.possible(op, state.usage, book):
            return
        if op.not_before is not None and op.not_before > now:
            until = op.not_before if until is None else min(until, op.not_before)
    q = book.queues.get(queue)
    if q is not None and q.aging.per_minute > 0:
        until = now + AGING_RECHECK if until is None else min(until, now + AGING_RECHECK)
    state.queues.parked[queue] = Park({k: state.queues.gens.get(k, 0) for k in sorted(deps)}, until)


def _dependency(code: str, op: OpRecord, queues: QueueManager) -> str | None:
    """The generation a reason waits on (``proto.reasons``); "" when only time or a new configuration
    lifts it (a new configuration un-parks every queue); None when parking does not know."""
    rule = REASONS.get(code)  # type: ignore[call-overload]
    waits = rule.waits_on if rule is not None else None
    if waits is WaitsOn.SCOPE:
        return queues.scope_key(op.queue)
    if waits is WaitsOn.CAPACITY:
        return "capacity"
    if waits is WaitsOn.BUDGET:
        return "budget"
    if waits is WaitsOn.BATCH:
        return f"batch:{op.spec.batch}"
    return "" if waits is WaitsOn.TIME_OR_CONFIG else None
