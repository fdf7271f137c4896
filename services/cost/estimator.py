"""Estimate an operation's cost from a price catalogue: resources of all its pods x price x expected
duration. The price table is the catalogue's defaults, or the first node pool whose match labels are
all in the op's nodeSelector (``rules.pricing``, which also prices it in every pool: the estimate's ``points``). The expected duration is ``termination.timeout``, else the
median of the past runs of the same component (``durations``) but never below the catalogue's
``historyFloorSeconds`` (unset: the default, so short runs cannot drive an estimate down), else a default.

The catalogue prices what runs: an op's own ``cost`` may only raise its estimate (the estimate is the
larger of the catalogue's and the op's own; when the op's is larger the basis is ``explicit`` and the
breakdown's ``explicit`` entry is what it adds above the catalogue). What an op is charged, and its
price per hour, always come from the catalogue (``hourly_price``, ``pool_hourly``), never from its
``cost``. Every amount is finite and non-negative (``amounts``)."""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from opsched.proto.events import CostEstimated, Money, OperationSubmitted, PricePoint
from opsched.proto.pod_resources import pod_limits
from opsched.proto.prices import PricePool, Prices
from opsched.proto.resources import is_device
from opsched.proto.spec import OpSpec
from opsched.rules.pricing import (
    DEFAULTS,
    PodAmounts,
    accelerators_of,
    hourly,
    in_pool,
    matching,
    places,
    pod_amounts,
    pod_shapes,
    product_of,
    products,
    shape_hourly,
)
from opsched.services.cost.amounts import bounded, own_cost
from opsched.services.cost.durations import LAST_RUNS, typical

EXPLICIT = "explicit"  # the basis, and the breakdown entry, of an estimate an op's own cost raised

__all__ = ["EXPLICIT", "Estimate", "Prices", "estimate", "estimated", "expected_duration", "gpu_count", "hourly_price",
           "pool_hourly", "price_points"]


class Estimate(msgspec.Struct):
    money: Money
    basis: str
    duration_s: float
    breakdown: dict[str, float]
    pool: str = ""
    runs: int = 0
    points: list[PricePoint] = msgspec.field(default_factory=list)


def expected_duration(spec: OpSpec, default_s: float, runs: Sequence[float] = (),
                      floor_s: float | None = None) -> tuple[float, str]:
    """``termination.timeout`` ("timeout"), else the median of past runs ("history") but never below ``floor_s``
    ("floor"; None: ``default_s``, so past runs only ever lengthen it), else the default."""
    if spec.termination.timeout:
        return float(spec.termination.timeout), "timeout"
    median = typical(runs)
    if median is not None:
        floor = default_s if floor_s is None else floor_s
        return (median, "history") if median >= floor else (floor, "floor")
    return default_s, "default"


def estimate(spec: OpSpec, prices: Prices, default_duration_s: float, runs: Sequence[float] = (),
             amounts: PodAmounts | None = None) -> Estimate:
    """The catalogue's estimate, raised to the op's own ``cost`` if that is larger (never lowered by it); past runs
    never bring it below the catalogue's price for ``prices.history_floor_seconds`` (unset: the default duration).
    Priced where the op's own nodeSelector says; ``points`` prices it in every pool for every product too
    (``amounts``: the op's ``rules.pricing.pod_amounts``, when computed already)."""
    amounts = amounts or pod_amounts(spec)
    duration_s, basis = expected_duration(spec, default_duration_s, runs, prices.history_floor_seconds)
    used = min(len(runs), LAST_RUNS) if basis in ("history", "floor") else 0
    labels = spec.environment.node_selector
    pool = matching(prices, labels)
    hours = duration_s / 3600.0
    breakdown = {k: bounded(round(v * hours, 6), f"estimate.{k}")
                 for k, v in hourly(spec, in_pool(prices, pool), product_of(labels), amounts).items()}
    amount = bounded(round(sum(breakdown.values()), 6), "estimate")
    own = own_cost(spec.cost)
    if own is not None and own > amount:
        breakdown[EXPLICIT] = round(own - amount, 6)
        amount, basis = own, EXPLICIT
    return Estimate(Money(amount=amount, currency=prices.currency), basis, duration_s, breakdown,
                    pool=pool.name if pool else "", runs=used, points=price_points(spec, prices, hours, amounts))


def estimated(event: OperationSubmitted, prices: Prices, at: datetime, *, default_duration_s: float,
              runs: Sequence[float] = (), source: str = "") -> CostEstimated:
    """An op's ``cost_estimated``: its estimate (``estimate``), and its price at submit, what its attempts are charged
    at (the ledger folds it): its price in every pool and product per pod shape (``points``), its own
    (``hourly``), its GPUs, its nodeSelector and each of its pods' shape."""
    spec = event.spec
    amounts = pod_amounts(spec)  # priced in every place below: counted once
    est = estimate(spec, prices, default_duration_s, runs, amounts)
    return CostEstimated(op_id=event.op_id, at=at, attempt=event.attempt, estimate=est.money, basis=est.basis,
                         duration_s=est.duration_s, breakdown=est.breakdown, prices_source=source, pool=est.pool,
                         runs=est.runs, points=est.points, hourly=hourly_price(spec, prices, amounts),
                         gpus=gpu_count(spec),
                         labels=dict(spec.environment.node_selector), pod_shapes=pod_shapes(event.op_id, spec))


def price_points(spec: OpSpec, prices: Prices, hours: float, amounts: PodAmounts | None = None) -> list[PricePoint]:
    """The op priced in every pool (catalogue order) and the defaults, for ``"*"`` and every product their tables of
    the accelerators it asks for name: at most ``rules.pricing.point_count`` (bounded when the catalogue is loaded);
    each with the price of one pod of each of its shapes (what its attempts are charged per pod: ``ledger``)."""
    own = own_cost(spec.cost) or 0.0
    wanted = accelerators_of(spec)
    amounts = amounts or pod_amounts(spec)
    out: list[PricePoint] = []
    for pool, flat in places(prices):
        for product in products(flat, wanted):
            per_hour = bounded(round(sum(hourly(spec, flat, product, amounts).values()), 6), "hourly price")
            amount = max(own, bounded(round(per_hour * hours, 6), "estimate"))
            per_shape = [bounded(sum(pod.values()), "hourly price")
                         for pod in shape_hourly(spec, flat, product, amounts)]
            out.append(PricePoint(pool=pool.name if pool else DEFAULTS, match=dict(pool.match) if pool else {},
                                  product=product, hourly=per_hour, amount=amount, shapes=per_shape))
    return out


def hourly_price(spec: OpSpec, prices: Prices, amounts: PodAmounts | None = None) -> float:
    """What an hour of this op costs by the catalogue (its nodeSelector's pool, else the defaults):
    what it is charged per hour of run time, whatever its own ``cost`` says."""
    return pool_hourly(spec, prices, matching(prices, spec.environment.node_selector), amounts)


def pool_hourly(spec: OpSpec, prices: Prices, pool: PricePool | None, amounts: PodAmounts | None = None) -> float:
    """What an hour of this op costs on the nodes of ``pool`` (None: at the default prices), for the product its
    nodeSelector names."""
    product = product_of(spec.environment.node_selector)
    return bounded(sum(hourly(spec, in_pool(prices, pool), product, amounts).values()), "hourly price")


def gpu_count(spec: OpSpec) -> int:
    """Whole accelerators of all the op's pods (as Kubernetes counts each pod's: ``proto.pod_resources``)."""
    return sum(int(n) * count for limits, count in pod_limits(spec) for r, n in limits.items() if is_device(r))
