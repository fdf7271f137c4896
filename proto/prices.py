"""The price catalogue as carried on the bus (and read from YAML by the cost service).

Prices are per hour: ``cpuHour`` per core, ``gibHour`` per GiB of memory, ``accelerators`` per device
by resource name and product (``"*"`` = any product). A ``pools`` entry prices the nodes whose labels
include all of its ``match`` labels; what it sets replaces the default (an accelerator table replaces
the default table of that resource). Unknown fields are refused: a misspelt price must not silently
mean "the default price"."""
from __future__ import annotations

from typing import Annotated

import msgspec

from opsched.proto.spec import Wire

Price = Annotated[float, msgspec.Meta(ge=0)]
AcceleratorPrices = dict[str, dict[str, Price]]  # resource -> product ("*" = any) -> price per device-hour


def _builtin_accelerators() -> AcceleratorPrices:
    return {
        "nvidia.com/gpu": {"H100": 6.0, "A100": 3.0, "L4": 0.8, "T4": 0.35, "*": 2.0},
        "amd.com/gpu": {"*": 2.0},
        "cloud-tpus.google.com/v2": {"*": 4.5},
    }


class PricePool(Wire, kw_only=True, forbid_unknown_fields=True):
    """Prices of a node pool: nodes (or ops' nodeSelectors) carrying all the ``match`` labels."""

    name: str
    match: Annotated[dict[str, str], msgspec.Meta(min_length=1)]
    cpu_hour: Price | None = None  # None: the default price
    gib_hour: Price | None = None
    accelerators: AcceleratorPrices = {}
    # a whole node of this pool per hour (the cloud's instance price); None: a node is priced as its allocatable at
    # the pool's flat prices (``rules.pricing.node_hourly``)
    node_hour: Price | None = None


class Prices(Wire, kw_only=True, forbid_unknown_fields=True):
    """Prices per hour, with optional per-pool overrides (the first matching pool wins)."""

    currency: str = "USD"
    cpu_hour: Price = 0.04
    gib_hour: Price = 0.005
    accelerators: AcceleratorPrices = msgspec.field(default_factory=_builtin_accelerators)
    pools: list[PricePool] = []
    # an expected duration learnt from past runs (basis "history") is never below this: a component's short runs
    # cannot drive the estimate of its next op (one without a timeout) below the catalogue's price for this long.
    # None: the cost service's default duration (OPSCHED_DEFAULT_DURATION_S), so history only ever raises an estimate
    history_floor_seconds: Annotated[float, msgspec.Meta(ge=0)] | None = None
