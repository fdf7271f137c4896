"""The price of an op where it runs: one rule for the cost service's estimate and charge and for admission's
estimate per flavor. Pure.

Where: a set of node labels (an op's nodeSelector, the nodeSelector a flavor gives it, a node's labels). The first
pool of the catalogue whose ``match`` labels are all among them prices it (``matching``; what the pool sets replaces
the default price, an accelerator table replaces the default table of that resource: ``in_pool``), else the
defaults; the GPU product is the first ``GPU_PRODUCT_LABELS`` label among them (``product_of``; none: ``"*"``).

A price point (``proto.events.PricePoint``) is the op priced in one pool (or the defaults) for one product: the cost
service lists them with its estimate (``points``: every pool and the defaults, each for every product its
accelerator tables name and ``"*"``), and ``point_for`` finds the one that prices a set of labels, so that admission
prices each flavor it considers without the catalogue. ``point_count`` bounds a catalogue's points
(``proto.limits.MAX_PRICE_POINTS``)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import msgspec

from opsched.proto.pod_resources import shapes
from opsched.proto.prices import PricePool, Prices
from opsched.proto.resources import GPU_PRODUCT_LABELS, amount, effective, is_accelerator, parse_quantity
from opsched.proto.spec import Container, OpSpec
from opsched.rules.naming import pod_names

GIB = 2**30
ANY = "*"  # the product of labels that name none (and the price of a product a table does not name)
DEFAULTS = ""  # the pool name of the catalogue's default prices


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


def product_of(labels: dict[str, str]) -> str:
    """The GPU product ``labels`` name (the first of ``GPU_PRODUCT_LABELS``), else ``"*"``."""
    return next((labels[label] for label in GPU_PRODUCT_LABELS if label in labels), ANY)


PodAmounts = list[tuple[dict[str, float], int]]  # per pod shape: what one pod is priced on, and how many pods


def pod_amounts(spec: OpSpec) -> PodAmounts:
    """What one pod of each of the op's pod shapes (``proto.pod_resources.shapes``: the main pod, then each replica
    group's) is priced on, counted as Kubernetes counts it (its init containers against the rest), with how many
    pods have that shape. It does not depend on prices: an op pricing itself in many places computes it once."""
    return [(effective(map(_priced_amounts, s.containers), map(_priced_amounts, s.init)), s.pods)
            for s in shapes(spec)]


def shape_hourly(spec: OpSpec, flat: Prices, product: str, amounts: PodAmounts | None = None) -> list[dict[str, float]]:
    """Price per hour per resource of one pod of each of the op's pod shapes, at the flat prices ``flat``
    (``in_pool``) for ``product`` (``amounts``: the op's ``pod_amounts``, when computed already)."""
    return [_pod_hourly(pod, product, flat) for pod, _ in (amounts or pod_amounts(spec))]


def hourly(spec: OpSpec, flat: Prices, product: str, amounts: PodAmounts | None = None) -> dict[str, float]:
    """Price per hour per resource, summed over all the op's pods (``shape_hourly`` x pods of each shape)."""
    out: dict[str, float] = {}
    for pod, pods in (amounts or pod_amounts(spec)):
        for resource, price in _pod_hourly(pod, product, flat).items():
            out[resource] = out.get(resource, 0.0) + price * pods
    return out


def _priced_amounts(container: Container) -> dict[str, float]:
    """What a container is priced on: its CPU and memory (the limit where set, else the request) and its
    accelerators (limits: per device, shared GPU memory per GiB)."""
    res = container.resources
    amounts = {**res.requests, **res.limits}
    out: dict[str, float] = {r: float(parse_quantity(amounts[r])) for r in ("cpu", "memory") if r in amounts}
    out.update({r: amount(r, qty) for r, qty in res.limits.items() if is_accelerator(r)})
    return out


def _pod_hourly(pod: dict[str, float], product: str, prices: Prices) -> dict[str, float]:
    out: dict[str, float] = {}
    if "cpu" in pod:
        out["cpu"] = pod["cpu"] * prices.cpu_hour
    if "memory" in pod:
        out["memory"] = pod["memory"] / GIB * prices.gib_hour
    for resource, quantity in pod.items():  # per device-hour; shared GPU memory per GiB-hour
        if not is_accelerator(resource):
            continue
        table = prices.accelerators.get(resource, {})
        out[resource] = quantity * table.get(product, table.get(ANY, 0.0))
    return out


def places(prices: Prices) -> list[tuple[PricePool | None, Prices]]:
    """Every pool of the catalogue in its order, then the defaults (None), each with its flat prices."""
    return [(pool, in_pool(prices, pool)) for pool in [*prices.pools, None]]


def products(flat: Prices, resources: Sequence[str] | None = None) -> list[str]:
    """``"*"`` and every product the accelerator tables of ``resources`` (None: all) name in ``flat``."""
    names = {ANY}
    for resource, table in flat.accelerators.items():
        if resources is None or resource in resources:
            names.update(table)
    return sorted(names)


def point_count(prices: Prices) -> int:
    """How many price points the catalogue can give an op (the most: one asking for every accelerator)."""
    return sum(len(products(flat)) for _, flat in places(prices))


def accelerators_of(spec: OpSpec) -> list[str]:
    """The accelerator resources any pod of the op asks for."""
    return sorted({r for s in shapes(spec) for c in [*s.containers, *s.init] for r in c.resources.limits
                   if is_accelerator(r)})


class Point(Protocol):
    """A price point as the cost service's estimate (``PricePoint``) and its ledger keep it."""

    @property
    def pool(self) -> str: ...
    @property
    def match(self) -> dict[str, str]: ...
    @property
    def product(self) -> str: ...


P = TypeVar("P", bound=Point)


def pod_shapes(op_id: str, spec: OpSpec) -> list[int]:
    """For each pod of an attempt in name order (``OperationRunning.nodes``' order: the main pod first), the index
    of its shape (``shape_hourly``); the same for every attempt (only the main pod's name, their prefix, changes)."""
    indexes = [i for i, s in enumerate(shapes(spec)) for _ in range(s.pods)]
    names = pod_names(op_id, 0, spec)
    if len(names) != len(indexes):  # never: both list the main pod, a service's replicas, then each group's pods
        return indexes
    return [indexes[i] for i in sorted(range(len(names)), key=names.__getitem__)]


def point_for(points: Sequence[P], labels: dict[str, str]) -> P | None:
    """The point that prices ``labels``: the first pool (catalogue order) whose match labels are all in them, else
    the defaults; within it the point of their product, else of ``"*"``. None when ``points`` has no such place."""
    pool = next((p.pool for p in points if p.pool != DEFAULTS and matches(p.match, labels)), DEFAULTS)
    here = [p for p in points if p.pool == pool]
    product = product_of(labels)
    return next((p for p in here if p.product == product), None) or next((p for p in here if p.product == ANY), None)


def node_hourly(prices: Prices, labels: dict[str, str], allocatable: dict[str, str]) -> tuple[str, float]:
    """What a whole node costs per hour, and the catalogue pool that prices it (``""``: the defaults): the pool's
    ``nodeHour`` where it sets one, else the node's allocatable (CPU, memory, accelerators) at the pool's flat
    prices for the node's GPU product. A quantity that does not parse is priced at nothing (the node still is)."""
    pool = matching(prices, labels)
    name = pool.name if pool is not None else DEFAULTS
    if pool is not None and pool.node_hour is not None:
        return name, pool.node_hour
    amounts: dict[str, float] = {}
    for resource, quantity in allocatable.items():
        if resource not in ("cpu", "memory") and not is_accelerator(resource):
            continue
        try:
            amounts[resource] = amount(resource, quantity) if is_accelerator(resource) \
                else float(parse_quantity(quantity))
        except (ValueError, ArithmeticError):
            continue
    return name, sum(_pod_hourly(amounts, product_of(labels), in_pool(prices, pool)).values())
