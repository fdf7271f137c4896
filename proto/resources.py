"""Kubernetes quantity parsing and the names of accelerator resources (shared contract semantics)."""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from opsched.proto.limits import MAX_QUANTITY

ACCELERATOR_RESOURCES = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "cloud-tpus.google.com/v2",
    "cloud-tpus.google.com/v3",
    "cloud-tpus.google.com/v4",
    "google.com/tpu",
    "aliyun.com/gpu-mem",
)
# Node labels naming the accelerator model: NVIDIA's GPU feature discovery, GKE, and the plain
# ``accelerator=<model>`` label managed clusters (e.g. Alibaba ACK) put on GPU nodes.
GPU_PRODUCT_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator", "accelerator")
# GPU memory sharing (Alibaba's gpushare device plugin): a node advertises ``aliyun.com/gpu-mem`` as a
# count of GiB over ``aliyun.com/gpu-count`` cards; a pod asks for GiB on one card. It is memory, not GPUs.
GPU_MEMORY = "aliyun.com/gpu-mem"
GPU_MEMORY_CARDS = "aliyun.com/gpu-count"
_GIB = Decimal(2**30)
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")  # Kubernetes' number (no '_', 'inf', 'nan')
_MAX = Decimal(MAX_QUANTITY)

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}


class QuantityError(ValueError):
    pass


@functools.lru_cache(maxsize=4096, typed=True)  # a few distinct quantities, parsed for every spec decoded
def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a Kubernetes quantity ("500m", "4Gi", "2", "1e3") into a Decimal of base units."""
    text = str(value).strip()
    if not text:
        raise QuantityError("empty quantity")
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            return _bounded(_number(text[: -len(suffix)], value) * factor, value)
    suffix = text[-1] if text[-1] in _DECIMAL and not text[-1].isdigit() else ""
    number = text[: -1] if suffix else text
    return _bounded(_number(number, value) * _DECIMAL[suffix], value)


def _bounded(quantity: Decimal, original: object) -> Decimal:
    if quantity > _MAX:
        raise QuantityError(f"{original!r} is above the limit of {MAX_QUANTITY} for any quantity")
    return quantity


def _number(text: str, original: object) -> Decimal:
    """The number before the unit: finite, non-negative and at most ``MAX_QUANTITY`` (checked before any
    arithmetic, so ``1e999999999`` is refused instead of overflowing the decimal context)."""
    if not _NUMBER.match(text):
        raise QuantityError(f"{original!r} is not a Kubernetes quantity")
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise QuantityError(f"{original!r} is not a Kubernetes quantity") from None
    if number < 0:
        raise QuantityError(f"{original!r} is negative; a quantity must be a non-negative number")
    if number.adjusted() > 19 or number > _MAX:  # 19: no unit's factor (at most 2**60) reaches past it
        raise QuantityError(f"{original!r} is above the limit of {MAX_QUANTITY} for any quantity")
    return number


def is_accelerator(resource: str) -> bool:
    """Extended resources are accelerators: anything with a domain prefix except hugepages."""
    if resource in ACCELERATOR_RESOURCES:
        return True
    return "/" in resource and not resource.startswith(("hugepages-", "kubernetes.io/"))


def is_device(resource: str) -> bool:
    """Whole accelerator devices (GPUs, TPUs): accelerators except shared GPU memory, which is GiB.
    Only these count as "GPUs" (approval thresholds, GPU-hour budgets, per-GPU prices)."""
    return is_accelerator(resource) and resource not in (GPU_MEMORY, GPU_MEMORY_CARDS)


def gpu_memory_gib(value: str | int | float) -> int:
    """GiB of shared GPU memory: a plain number is GiB (the device plugin's unit), a quantity with a
    unit is bytes (``8Gi`` = 8); anything but a whole number of GiB is refused."""
    text = str(value).strip()
    gib = parse_quantity(text) if text[-1:].isdigit() else parse_quantity(text) / _GIB
    if gib != gib.to_integral_value():
        raise QuantityError(f"{GPU_MEMORY} must be a whole number of GiB (e.g. 8 or 8Gi), got {value!r}")
    return int(gib)


def amount(resource: str, value: str | int | float) -> float:
    """A resource's quantity in the unit opsched counts it in: GiB for shared GPU memory, base units else."""
    return float(gpu_memory_gib(value)) if resource == GPU_MEMORY else float(parse_quantity(value))


def accelerators(limits: dict[str, str]) -> dict[str, int]:
    """The whole-device accelerators of a limits map, as integer counts (shared GPU memory excluded)."""
    out: dict[str, int] = {}
    for name, qty in limits.items():
        if is_device(name):
            out[name] = int(parse_quantity(qty))
    return out


def requested(limits: dict[str, str], requests: dict[str, str]) -> dict[str, float]:
    """What a container asks the scheduler for: its requests, and its limits where it set no request
    (Kubernetes defaults requests to limits; accelerators are set only as limits). Shared GPU memory in GiB."""
    out = {name: amount(name, qty) for name, qty in limits.items()}
    out.update({name: amount(name, qty) for name, qty in requests.items()})
    return out


def effective(regular: Iterable[dict[str, float]], init: Iterable[dict[str, float]] = ()) -> dict[str, float]:
    """What a pod asks for, as Kubernetes counts it from its containers' own amounts: per resource, the larger of
    the sum over its regular containers (they run together) and the largest of its init containers (they run one
    at a time, before them)."""
    out: dict[str, float] = {}
    for amounts in regular:
        for resource, value in amounts.items():
            out[resource] = out.get(resource, 0.0) + value
    for amounts in init:
        for resource, value in amounts.items():
            out[resource] = max(out.get(resource, 0.0), value)
    return out


def limited(limits: dict[str, str]) -> dict[str, float]:
    """A container's limits as amounts (``amount``: shared GPU memory in GiB)."""
    return {name: amount(name, qty) for name, qty in limits.items()}


def gpus_label(pods: list[tuple[dict[str, float], int]]) -> str:
    """Whole devices of all an op's pods (``2``, ``1xamd.com``) and shared GPU memory (``8GiB-mem``), as
    ``opsched ops`` shows them; ``pods`` are (a pod's limits as amounts, how many pods have them)."""
    gpus: dict[str, int] = {}
    memory = 0.0
    for limits, count in pods:
        for resource, n in limits.items():
            if is_device(resource):
                gpus[resource] = gpus.get(resource, 0) + int(n) * count
        memory += limits.get(GPU_MEMORY, 0.0) * count
    parts = [f"{n}x{r.split('/')[0]}" if r != "nvidia.com/gpu" else str(n) for r, n in gpus.items() if n]
    return ",".join(parts + ([f"{memory:g}GiB-mem"] if memory else [])) or "-"
