"""Every amount of money the cost service produces or adds up is finite and between 0 and
``proto.limits.MAX_COST``: whatever a price, a quantity or a message on the bus says, nothing is ever
credited (a negative charge) nor made infinite. An amount outside is clamped, with a warning naming it."""
from __future__ import annotations

import math

import structlog

from opsched.proto.limits import MAX_COST

log = structlog.get_logger()


def bounded(value: float, what: str) -> float:
    """``value`` if it is a finite amount in [0, MAX_COST]; else 0 (negative or NaN) or MAX_COST (too big)."""
    if math.isfinite(value) and 0.0 <= value <= MAX_COST:
        return value
    clamped = MAX_COST if value > MAX_COST else 0.0
    log.warning("cost_amount_clamped", what=what, value=repr(value), clamped=clamped)
    return clamped


def own_cost(value: float | None) -> float | None:
    """An op's own ``cost`` if it is a usable amount (None when it has none, or one that is negative or
    not finite: the contract refuses those at the edge; one arriving anyway raises nothing)."""
    if value is None:
        return None
    if math.isfinite(value) and 0.0 <= value <= MAX_COST:
        return value
    log.warning("spec_cost_ignored", cost=repr(value), reason=f"must be finite and within 0..{MAX_COST:g}")
    return None
