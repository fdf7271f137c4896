"""Queue configs, flavors and quotas (Kueue-style admission), compiled into a book.

    b = book(queue("a", cohort="lab", gpus={"h100": 4}),
             queue("b", cohort="lab", gpus=[quota("h100", 2, guaranteed=1)]))
"""
from __future__ import annotations

from typing import Any

from opsched.proto.config import QueuesConfigured
from opsched.proto.queues import (
    Cohort,
    Flavor,
    FlavorQuota,
    PriorityClass,
    Queue,
    QueuesConfig,
    ResourceQuota,
)
from tests.builders.clock import T0
from tests.builders.specs import GPU, GPU_PRODUCT


def gpu_flavor(name: str, product: str | None = None, *, tolerations: list[dict[str, Any]] | None = None,
               **labels: str) -> Flavor:
    """A flavor selecting GPU nodes of one product: ``gpu_flavor("h100")`` selects product H100."""
    node_labels = {GPU_PRODUCT: product or name.upper(), **labels}
    return Flavor(name=name, node_labels=node_labels, tolerations=list(tolerations or []))


def quota(name: str, nominal: int | float | str, *, borrow: int | float | str | None = None,
          lend: int | float | str | None = None, guaranteed: int | float | str | None = None) -> FlavorQuota:
    """The quota of one flavor: ``quota("h100", 4, borrow=2, lend=1, guaranteed=1)``."""
    return FlavorQuota(name=name, nominal=nominal, borrowing_limit=borrow, lending_limit=lend,
                       guaranteed=guaranteed)


def resource_quota(resource: str, flavors: dict[str, Any] | list[FlavorQuota]) -> ResourceQuota:
    """``{"h100": 4, "a100": quota("a100", 2, borrow=0)}`` or a list of quotas, in preference order."""
    if isinstance(flavors, dict):
        flavors = [v if isinstance(v, FlavorQuota) else quota(k, v) for k, v in flavors.items()]
    return ResourceQuota(resource=resource, flavors=list(flavors))


def queue(name: str, *, gpus: dict[str, Any] | list[FlavorQuota] | None = None,
          resources: dict[str, dict[str, Any] | list[FlavorQuota]] | None = None, **fields: Any) -> Queue:
    """A queue config in one line: ``queue("a", cohort="lab", concurrency=2, gpus={"h100": 4})``."""
    quotas = [resource_quota(GPU, gpus)] if gpus is not None else []
    quotas += [resource_quota(r, f) for r, f in (resources or {}).items()]
    return Queue(name=name, resources=quotas, **fields)


def cohort(name: str, parent: str | None = None, *, gpus: dict[str, Any] | list[FlavorQuota] | None = None) -> Cohort:
    """A declared cohort in one line: ``cohort("dept", "org", gpus={"h100": 2})``."""
    return Cohort(name=name, parent=parent, resources=[resource_quota(GPU, gpus)] if gpus is not None else [])


def book(*queues: Queue, flavors: list[Flavor] | None = None, default: str | None = None,
         projects: dict[str, str] | None = None, reject_unfittable: bool = True,
         priority_classes: dict[str, int] | None = None, fair_sharing: Any = None, cohorts: list[Cohort] | None = None):
    """A compiled queue book. Flavors a quota names but ``flavors`` does not define are defined as
    GPU-product flavors (``"a100"`` selects ``nvidia.com/gpu.product: A100``)."""
    from opsched.services.admission.model.queues import DEFAULT_FLAVOR, compile_book

    defined = {f.name: f for f in flavors or []}
    for q in queues:
        for rq in q.resources:
            for fq in rq.flavors:
                if fq.name != DEFAULT_FLAVOR and fq.name not in defined:
                    defined[fq.name] = gpu_flavor(fq.name)
    config = QueuesConfig(queues=list(queues), default_queue=default or queues[0].name,
                          project_queues=dict(projects or {}), flavors=list(defined.values()),
                          reject_unfittable=reject_unfittable,
                          priority_classes=[PriorityClass(name=n, value=v)
                                            for n, v in (priority_classes or {}).items()],
                          cohorts=list(cohorts or []),
                          **({"fair_sharing": fair_sharing} if fair_sharing is not None else {}))
    return compile_book(config)


def queues_configured(text: str, source: str = "test") -> QueuesConfigured:
    """A queue configuration in force, as published on ``config.queues`` (``await bus.publish(...)``): what a
    dispatcher run without admission checks the ``admitted`` events a test forges against."""
    from opsched.rules.queues_file import parse_queues

    return QueuesConfigured(config=parse_queues(text, source), at=T0, source=source)
