"""Quota with Kueue's cohort semantics, per (resource, flavor).

Each queue's nominal quota splits into a guaranteed part (never lent) and a lendable part that
joins its cohort's pool. A queue uses its guaranteed part first, then the pool; it borrows when its
usage goes above its nominal. ``borrowingLimit`` caps how far above nominal it may go.
A queue without a cohort is a cohort of one: it fits exactly when usage stays within nominal. An op that is not
preemptible never borrows (KAI's rule): it fits only within its queue's nominal, so no op holds borrowed quota that
its lender could not reclaim.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from opsched.proto.reasons import Reason, message
from opsched.services.admission.model.queues import Book, Key, Usage


class Fit(Enum):
    FITS = "fits"  # within the queue's nominal quota
    BORROWS = "borrows"  # fits only with quota borrowed from the cohort
    NO = "no"


@dataclass(frozen=True)
class QuotaCheck:
    fit: Fit
    used: float
    nominal: float
    available: float  # the most this queue could take now (own free + what the cohort can lend)
    reason: str = ""
    code: Reason | None = None  # why not (``Fit.NO``): the reason ``reason`` is the message of

    @property
    def lent_out(self) -> bool:
        """Within its own nominal, but that quota is in use by cohort borrowers."""
        return self.code == Reason.QUOTA_LENT_OUT


def check(book: Book, usage: Usage, queue: str, key: Key, amount: float, nominal_only: bool = False) -> QuotaCheck:
    """Does ``amount`` more of ``key`` fit ``queue``'s quota? ``nominal_only``: the op may not borrow (it is not
    preemptible: quota it borrowed could never be reclaimed), so in a cohort it fits only within the nominal."""
    line = book.quotas[queue][key]
    used = usage.get(queue, {}).get(key, 0.0)
    after = used + amount
    room = _cohort_room(book, usage, queue, key)
    limit = line.nominal + line.borrowing_limit if line.borrowing_limit is not None else float("inf")
    available = max(0.0, min(room, limit - used))
    within = after <= line.nominal + 1e-9
    cohort = book.queues[queue].cohort
    if nominal_only and not within and cohort:
        never = "" if amount <= line.nominal + 1e-9 else (
            "; it asks more than the whole nominal, so it never fits here: make it preemptible, or use a queue with "
            "more nominal quota")
        return QuotaCheck(Fit.NO, used, line.nominal, available, code=Reason.NONPREEMPTIBLE_OVER_NOMINAL,
                          reason=message(Reason.NONPREEMPTIBLE_OVER_NOMINAL, queue=queue, resource=key[0],
                                         flavor=key[1], cohort=cohort, used=used, amount=amount,
                                         nominal=line.nominal, never=never))
    if amount <= available + 1e-9:
        return QuotaCheck(Fit.FITS if within else Fit.BORROWS, used, line.nominal, available)
    if within:
        return QuotaCheck(Fit.NO, used, line.nominal, available, code=Reason.QUOTA_LENT_OUT, reason=message(
            Reason.QUOTA_LENT_OUT, resource=key[0], flavor=key[1], amount=amount, nominal=line.nominal, free=available))
    return QuotaCheck(Fit.NO, used, line.nominal, available, _why_not(book, queue, key, used, line, limit, amount),
                      Reason.QUOTA_EXHAUSTED)


def _cohort_room(book: Book, usage: Usage, queue: str, key: Key) -> float:
    """How much more ``queue`` could use of ``key``: its unused guaranteed part + the pool's free part."""
    pool_cap = pool_used = 0.0
    own_guaranteed_free = 0.0
    for member in book.members(queue):
        line = book.quotas.get(member, {}).get(key)
        if line is None:
            continue
        guaranteed = line.nominal - line.lendable
        used = usage.get(member, {}).get(key, 0.0)
        pool_cap += line.lendable
        pool_used += max(0.0, used - guaranteed)
        if member == queue:
            own_guaranteed_free = max(0.0, guaranteed - used)
    return own_guaranteed_free + max(0.0, pool_cap - pool_used)


def _why_not(book: Book, queue: str, key: Key, used: float, line, limit: float, amount: float) -> str:
    borrowing = cohort = ""
    if not book.queues[queue].cohort:
        borrowing = "; no cohort to borrow from"
    elif used + amount > limit:
        borrowing = f"; borrowing limit {_n(limit - line.nominal)} reached"
    else:
        cohort = " and the cohort cannot lend enough"
    return message(Reason.QUOTA_EXHAUSTED, resource=key[0], flavor=key[1], used=used, nominal=line.nominal,
                   amount=amount, borrowing=borrowing, cohort=cohort)


def borrowed(book: Book, usage: Usage, queue: str, key: Key) -> float:
    line = book.quotas[queue][key]
    return max(0.0, usage.get(queue, {}).get(key, 0.0) - line.nominal)


def _n(x: float) -> str:
    return f"{x:g}"
