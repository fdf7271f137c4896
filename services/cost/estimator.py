"""Estimate an operation's cost from a price catalogue: resources of all its pods x price x expected
duration. The price table is the catalogue's defaults, or the first node pool whose match labels are
all in the op's nodeSelector (``pools``). The expected duration is ``termination.timeout``, else the
median of the past runs of the same component (``durations``), else a default. An explicit ``cost``
wins over the catalogue."""
from __future__ import annotations

from collections.abc import Sequence

import msgspec

from proto.events import Money
from proto.prices import PricePool, Prices
from proto.resources import (
    GPU_PRODUCT_LABELS,
    accelerators,
    amount,
    is_accelerator,
    parse_quantity,
)
from proto.spec import Container, OpSpec
from services.cost.durations import LAST_RUNS, typical
from services.cost.pools import in_pool, matching

GIB = 2**30

__all__ = ["Estimate", "Prices", "estimate", "expected_duration", "gpu_count", "hourly_price", "pool_hourly"]


class Estimate(msgspec.Struct):
    money: Money
    basis: str
    duration_s: float
    breakdown: dict[str, float]
    pool: str = ""
    runs: int = 0


def expected_duration(spec: OpSpec, default_s: float, runs: Sequence[float] = ()) -> tuple[float, str]:
    """``termination.timeout`` ("timeout"), else the median of past runs ("history"), else the default."""
    if spec.termination.timeout:
        return float(spec.termination.timeout), "timeout"
    median = typical(runs)
    if median is not None:
        return median, "history"
    return default_s, "default"


def estimate(spec: OpSpec, prices: Prices, default_duration_s: float, runs: Sequence[float] = ()) -> Estimate:
    duration_s, basis = expected_duration(spec, default_duration_s, runs)
    used = min(len(runs), LAST_RUNS) if basis == "history" else 0
    pool = matching(prices, spec.environment.node_selector)
    if spec.cost is not None:
        return Estimate(Money(amount=spec.cost, currency=prices.currency), "explicit", duration_s, {}, runs=used)
    hours = duration_s / 3600.0
    breakdown = {k: round(v * hours, 6) for k, v in _hourly(spec, in_pool(prices, pool)).items()}
    return Estimate(Money(amount=round(sum(breakdown.values()), 6), currency=prices.currency),
                    basis, duration_s, breakdown, pool=pool.name if pool else "", runs=used)


def pods(spec: OpSpec) -> list[Container]:
    """The containers of all the op's pods: the main one and every replica of its gang."""
    return [spec.container] + [g.container for g in spec.replicas for _ in range(g.count)]


def _hourly(spec: OpSpec, prices: Prices) -> dict[str, float]:
    """Price per hour per resource, summed over all the op's pods (``prices`` without pools)."""
    product = _product(spec)
    out: dict[str, float] = {}
    for container in pods(spec):
        for resource, price in _container_hourly(container, product, prices).items():
            out[resource] = out.get(resource, 0.0) + price
    return out


def _container_hourly(container: Container, product: str | None, prices: Prices) -> dict[str, float]:
    res = container.resources
    amounts = {**res.requests, **res.limits}
    out: dict[str, float] = {}
    if "cpu" in amounts:
        out["cpu"] = float(parse_quantity(amounts["cpu"])) * prices.cpu_hour
    if "memory" in amounts:
        out["memory"] = float(parse_quantity(amounts["memory"])) / GIB * prices.gib_hour
    for resource, qty in res.limits.items():  # per device-hour; shared GPU memory per GiB-hour
        if not is_accelerator(resource):
            continue
        table = prices.accelerators.get(resource, {})
        price = table.get(product or "*", table.get("*", 0.0))
        out[resource] = amount(resource, qty) * price
    return out


def _product(spec: OpSpec) -> str | None:
    for label in GPU_PRODUCT_LABELS:
        if label in spec.environment.node_selector:
            return spec.environment.node_selector[label]
    return None


def hourly_price(spec: OpSpec, prices: Prices, default_duration_s: float, runs: Sequence[float] = ()) -> float:
    """What an hour of this op costs, from the same table as its estimate (an explicit ``cost`` is
    spread over the expected duration)."""
    if spec.cost is not None:
        duration_s, _ = expected_duration(spec, default_duration_s, runs)
        return spec.cost / (duration_s / 3600.0) if duration_s > 0 else 0.0
    return sum(_hourly(spec, in_pool(prices, matching(prices, spec.environment.node_selector))).values())


def pool_hourly(spec: OpSpec, prices: Prices, pool: PricePool) -> float:
    """What an hour of this op costs on the nodes of ``pool`` (not for an op with an explicit cost)."""
    return sum(_hourly(spec, in_pool(prices, pool)).values())


def gpu_count(spec: OpSpec) -> int:
    """Accelerators of all the op's pods (main container and replicas)."""
    return sum(sum(accelerators(c.resources.limits).values()) for c in pods(spec))
