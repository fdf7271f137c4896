"""Estimate an operation's cost from a price table: resources x price x expected duration."""
from __future__ import annotations

from pathlib import Path

import msgspec
import yaml

from proto.events import Money
from proto.resources import GPU_PRODUCT_LABELS, accelerators, parse_quantity
from proto.spec import OpSpec

GIB = 2**30


class Prices(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Prices per hour. ``accelerators`` maps resource name -> product -> price ("*" = any product)."""

    currency: str = "USD"
    cpu_hour: float = 0.04
    gib_hour: float = 0.005
    accelerators: dict[str, dict[str, float]] = msgspec.field(default_factory=lambda: {
        "nvidia.com/gpu": {"H100": 6.0, "A100": 3.0, "L4": 0.8, "T4": 0.35, "*": 2.0},
        "amd.com/gpu": {"*": 2.0},
        "cloud-tpus.google.com/v2": {"*": 4.5},
    })


class Estimate(msgspec.Struct):
    money: Money
    basis: str
    duration_s: float
    breakdown: dict[str, float]


def load_prices(path: Path | None) -> Prices:
    if path is None:
        return Prices()
    return msgspec.convert(yaml.safe_load(path.read_text()) or {}, Prices)


def expected_duration(spec: OpSpec, default_s: float) -> tuple[float, str]:
    if spec.termination.timeout:
        return float(spec.termination.timeout), "timeout"
    return default_s, "default"


def estimate(spec: OpSpec, prices: Prices, default_duration_s: float) -> Estimate:
    duration_s, basis = expected_duration(spec, default_duration_s)
    if spec.cost is not None:
        return Estimate(Money(amount=spec.cost, currency=prices.currency), "explicit", duration_s, {})
    hours = duration_s / 3600.0
    breakdown = _hourly(spec, prices)
    breakdown = {k: round(v * hours, 6) for k, v in breakdown.items()}
    return Estimate(Money(amount=round(sum(breakdown.values()), 6), currency=prices.currency),
                    basis, duration_s, breakdown)


def _hourly(spec: OpSpec, prices: Prices) -> dict[str, float]:
    res = spec.container.resources
    amounts = {**res.requests, **res.limits}
    out: dict[str, float] = {}
    if "cpu" in amounts:
        out["cpu"] = float(parse_quantity(amounts["cpu"])) * prices.cpu_hour
    if "memory" in amounts:
        out["memory"] = float(parse_quantity(amounts["memory"])) / GIB * prices.gib_hour
    product = _product(spec)
    for resource, count in accelerators(res.limits).items():
        table = prices.accelerators.get(resource, {})
        price = table.get(product or "*", table.get("*", 0.0))
        out[resource] = count * price
    return out


def _product(spec: OpSpec) -> str | None:
    for label in GPU_PRODUCT_LABELS:
        if label in spec.environment.node_selector:
            return spec.environment.node_selector[label]
    return None


def hourly_price(spec: OpSpec, prices: Prices, default_duration_s: float) -> float:
    """What an hour of this op costs, from the same table as its estimate (an explicit ``cost`` is
    spread over the expected duration)."""
    if spec.cost is not None:
        duration_s, _ = expected_duration(spec, default_duration_s)
        return spec.cost / (duration_s / 3600.0) if duration_s > 0 else 0.0
    return sum(_hourly(spec, prices).values())


def gpu_count(spec: OpSpec) -> int:
    """Accelerators of all the op's pods (main container and replicas)."""
    pods = [spec.container] + [g.container for g in spec.replicas for _ in range(g.count)]
    return sum(sum(accelerators(c.resources.limits).values()) for c in pods)
