"""Per node-pool prices: the first pool of the catalogue whose ``match`` labels are all among some
labels (an op's nodeSelector for its estimate, a node's labels for an attempt that ran there) prices
it; what the pool sets replaces the default price (an accelerator table replaces the default table of
that resource). Pure."""
from __future__ import annotations

import msgspec

from opsched.proto.prices import PricePool, Prices


def matching(prices: Prices, labels: dict[str, str]) -> PricePool | None:
    """The first pool whose match labels are all in ``labels``."""
    return next((p for p in prices.pools if matches(p.match, labels)), None)


def matches(match: dict[str, str], labels: dict[str, str]) -> bool:
    """All the ``match`` labels are in ``labels``."""
    return all(labels.get(key) == value for key, value in match.items())


def in_pool(prices: Prices, pool: PricePool | None) -> Prices:
    """The flat price table of ``pool`` (the defaults where the pool sets nothing)."""
    if pool is None:
        return msgspec.structs.replace(prices, pools=[])
    return msgspec.structs.replace(
        prices, pools=[],
        cpu_hour=prices.cpu_hour if pool.cpu_hour is None else pool.cpu_hour,
        gib_hour=prices.gib_hour if pool.gib_hour is None else pool.gib_hour,
        accelerators={**prices.accelerators, **pool.accelerators})
