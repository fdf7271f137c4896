"""Estimate an operation's cost from a price catalogue: resources of all its pods x price x expected
duration. The price table is the catalogue's defaults, or the first node pool whose match labels are
all in the op's nodeSelector (``pools``). The expected duration is ``termination.timeout``, else the
median of the past runs of the same component (``durations``) but never below the catalogue's
``historyFloorSeconds`` (unset: the default, so short runs cannot drive an estimate down), else a default.

The catalogue prices what runs: an op's own ``cost`` may only raise its estimate (the estimate is the
larger of the catalogue's and the op's own; when the op's is larger the basis is ``explicit`` and the
breakdown's ``explicit`` entry is what it adds above the catalogue). What an op is charged, and its
price per hour, always come from the catalogue (``hourly_price``, ``pool_hourly``), never from its
``cost``. Every amount is finite and non-negative (``amounts``)."""
from __future__ import annotations

from collections.abc import Sequence

import msgspec

from opsched.proto.events import Money
from opsched.proto.pod_resources import pod_limits, shapes
from opsched.proto.prices import PricePool, Prices
from opsched.proto.resources import (
    GPU_PRODUCT_LABELS,
    amount,
    effective,
    is_accelerator,
    is_device,
    parse_quantity,
)
from opsched.proto.spec import Container, OpSpec
from opsched.services.cost.amounts import bounded, own_cost
from opsched.services.cost.durations import LAST_RUNS, typical
from opsched.services.cost.pools import in_pool, matching

GIB = 2**30

EXPLICIT = "explicit"  # the basis, and the breakdown entry, of an estimate an op's own cost raised

__all__ = ["EXPLICIT", "Estimate", "Prices", "estimate", "expected_duration", "gpu_count", "hourly_price", "pool_hourly"]


class Estimate(msgspec.Struct):
    money: Money
    basis: str
    duration_s: float
    breakdown: dict[str, float]
    pool: str = ""
    runs: int = 0


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


def estimate(spec: OpSpec, prices: Prices, default_duration_s: float, runs: Sequence[float] = ()) -> Estimate:
    """The catalogue's estimate, raised to the op's own ``cost`` if that is larger (never lowered by it); past runs
    never bring it below the catalogue's price for ``prices.history_floor_seconds`` (unset: the default duration)."""
    duration_s, basis = expected_duration(spec, default_duration_s, runs, prices.history_floor_seconds)
    used = min(len(runs), LAST_RUNS) if basis in ("history", "floor") else 0
    pool = matching(prices, spec.environment.node_selector)
    hours = duration_s / 3600.0
    breakdown = {k: bounded(round(v * hours, 6), f"estimate.{k}")
                 for k, v in _hourly(spec, in_pool(prices, pool)).items()}
    amount = bounded(round(sum(breakdown.values()), 6), "estimate")
    own = own_cost(spec.cost)
    if own is not None and own > amount:
        breakdown[EXPLICIT] = round(own - amount, 6)
        amount, basis = own, EXPLICIT
    return Estimate(Money(amount=amount, currency=prices.currency), basis, duration_s, breakdown,
                    pool=pool.name if pool else "", runs=used)


def _hourly(spec: OpSpec, prices: Prices) -> dict[str, float]:
    """Price per hour per resource, summed over all the op's pods (``prices`` without pools); each pod's amounts
    counted as Kubernetes counts them (``proto.pod_resources``: its init containers against the rest)."""
    product = _product(spec)
    out: dict[str, float] = {}
    for shape in shapes(spec):
        pod = effective(map(_priced_amounts, shape.containers), map(_priced_amounts, shape.init))
        for resource, price in _pod_hourly(pod, product, prices).items():
            out[resource] = out.get(resource, 0.0) + price * shape.pods
    return out


def _priced_amounts(container: Container) -> dict[str, float]:
    """What a container is priced on: its CPU and memory (the limit where set, else the request) and its
    accelerators (limits: per device, shared GPU memory per GiB)."""
    res = container.resources
    amounts = {**res.requests, **res.limits}
    out: dict[str, float] = {r: float(parse_quantity(amounts[r])) for r in ("cpu", "memory") if r in amounts}
    out.update({r: amount(r, qty) for r, qty in res.limits.items() if is_accelerator(r)})
    return out


def _pod_hourly(pod: dict[str, float], product: str | None, prices: Prices) -> dict[str, float]:
    out: dict[str, float] = {}
    if "cpu" in pod:
        out["cpu"] = pod["cpu"] * prices.cpu_hour
    if "memory" in pod:
        out["memory"] = pod["memory"] / GIB * prices.gib_hour
    for resource, quantity in pod.items():  # per device-hour; shared GPU memory per GiB-hour
        if not is_accelerator(resource):
            continue
        table = prices.accelerators.get(resource, {})
        price = table.get(product or "*", table.get("*", 0.0))
        out[resource] = quantity * price
    return out


def _product(spec: OpSpec) -> str | None:
    for label in GPU_PRODUCT_LABELS:
        if label in spec.environment.node_selector:
            return spec.environment.node_selector[label]
    return None


def hourly_price(spec: OpSpec, prices: Prices) -> float:
    """What an hour of this op costs by the catalogue (its nodeSelector's pool, else the defaults):
    what it is charged per hour of run time, whatever its own ``cost`` says."""
    return pool_hourly(spec, prices, matching(prices, spec.environment.node_selector))


def pool_hourly(spec: OpSpec, prices: Prices, pool: PricePool | None) -> float:
    """What an hour of this op costs on the nodes of ``pool`` (None: at the default prices)."""
    return bounded(sum(_hourly(spec, in_pool(prices, pool)).values()), "hourly price")


def gpu_count(spec: OpSpec) -> int:
    """Whole accelerators of all the op's pods (as Kubernetes counts each pod's: ``proto.pod_resources``)."""
    return sum(int(n) * count for limits, count in pod_limits(spec) for r, n in limits.items() if is_device(r))
