"""The benchmark's workload generator: a YAML config shaped like Kueue's scheduler performance test
(cohorts × queue sets × workloads sets × workload classes) turned into opsched queues and a
deterministic stream of timed submissions.

    cohorts:                       # className, count, standalone, queuesSets
      - className: pool
        count: 1
        queuesSets:                # className, count, nominalQuota (GPUs), borrowingLimit, ...
          - className: team
            count: 10
            nominalQuota: 10
            workloadsSets:         # per queue: count, creationIntervalMs, initialDelayMs, arrivals
              - count: 100
                creationIntervalMs: 10
                workloads:         # className, runtimeMs, priority, request (GPUs)
                  - {className: train, runtimeMs: 3600000, priority: 0, request: 1}

As in Kueue, every queue of a set runs each of its workloads sets: ``count`` rounds, each creating
every class of the set once, one op per ``creationIntervalMs`` (ops ``k = 0, 1, ...`` of a set at
``initialDelayMs + k × interval``, or with exponential gaps of that mean for ``arrivals: poisson``,
seeded by ``seed``, the queue and the set). Queue ``i`` of a set in cohort ``c`` is named
``<cohort class>-<c>-<set class>-<i>`` (4 digits). A scenario may override the sizes it varies
(:func:`build`): the total queues and pending ops keep the config's proportions.
"""
from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass, field
from itertools import cycle
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

WORKLOADS = Path(__file__).resolve().parent / "workloads"
DEFAULT = WORKLOADS / "default.yaml"
PIPELINE = WORKLOADS / "pipeline.yaml"
GPU = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
UNBOUNDED = 10**9  # a GPU quota that never binds (the flavor is still assigned)
KEEP = "keep"  # build(nominal_quota=KEEP): the config's quota

Name = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=40)]
Policy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
Reclaim = Literal["Never", "LowerPriority", "Any"]


class GeneratorConfigError(ValueError):
    """A generator config that cannot be read or does not validate; the message names each field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


class WorkloadClass(_Model):
    class_name: Name
    runtime_ms: Annotated[int, Field(ge=1)]
    priority: int = 0
    request: Annotated[int, Field(ge=1)] = 1  # GPUs


class WorkloadsSet(_Model):
    count: Annotated[int, Field(ge=1)]
    creation_interval_ms: Annotated[float, Field(ge=0)]
    initial_delay_ms: Annotated[float, Field(ge=0)] = 0.0
    arrivals: Literal["fixed", "poisson"] = "fixed"
    workloads: Annotated[list[WorkloadClass], Field(min_length=1)]

    @property
    def ops(self) -> int:
        return self.count * len(self.workloads)


class QueuesSet(_Model):
    class_name: Name
    count: Annotated[int, Field(ge=1)]
    nominal_quota: Annotated[float, Field(ge=0)] | None = None  # GPUs; None: no quota at all
    borrowing_limit: Annotated[float, Field(ge=0)] | None = None
    lending_limit: Annotated[float, Field(ge=0)] | None = None
    concurrency: Annotated[int, Field(ge=1)] | None = None
    within_queue: Policy = "LowerPriority"
    reclaim_within_cohort: Reclaim = "LowerPriority"
    workloads_sets: Annotated[list[WorkloadsSet], Field(min_length=1)]


class CohortSet(_Model):
    class_name: Name
    count: Annotated[int, Field(ge=1)] = 1
    standalone: bool = False  # its queues join no cohort
    queues_sets: Annotated[list[QueuesSet], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_sets(self) -> "CohortSet":
        _unique([q.class_name for q in self.queues_sets], "queue set")
        return self


class Nodes(_Model):
    count: Annotated[int, Field(ge=0)] = 0
    gpus_per_node: Annotated[int, Field(ge=1)] = 8
    product: str = "A100"


class GeneratorConfig(_Model):
    seed: int = 0
    flavor: Name = "a100"
    nodes: Nodes = Nodes()
    cohorts: Annotated[list[CohortSet], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_cohorts(self) -> "GeneratorConfig":
        _unique([c.class_name for c in self.cohorts], "cohort")
        return self


def _unique(names: list[str], what: str) -> None:
    seen = {n for n in names if names.count(n) > 1}
    if seen:
        raise ValueError(f"{what} className {sorted(seen)[0]!r} is used twice (queue names would clash)")


# ---- loading ---------------------------------------------------------------------------------

def field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _explain(exc: ValidationError, source: str) -> GeneratorConfigError:
    lines = []
    for err in exc.errors(include_url=False):
        where = field_path(err["loc"])
        if err["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown field")
        elif err["type"] == "missing":
            lines.append(f"{where}: required field missing")
        else:
            got = err.get("input")
            shown = f" (got {got!r})" if isinstance(got, (str, int, float, bool, type(None))) else ""
            lines.append(f"{where}: {err['msg'].removeprefix('Value error, ')}{shown}")
    return GeneratorConfigError(f"{source}: invalid generator config:\n  " + "\n  ".join(lines))


def parse(text: str, source: str = "<string>") -> GeneratorConfig:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise GeneratorConfigError(f"{source}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise GeneratorConfigError(f"{source}: expected a mapping with 'cohorts', got {type(doc).__name__}")
    try:
        return GeneratorConfig.model_validate(doc)
    except ValidationError as exc:
        raise _explain(exc, source) from None


def load(path: Path | str = DEFAULT) -> GeneratorConfig:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise GeneratorConfigError(f"{path}: {exc.strerror or exc}") from None
    return parse(text, str(path))


# ---- sizes -----------------------------------------------------------------------------------

def apportion(weights: list[float], total: int) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainder; ties to the earlier one)."""
    if total < 0:
        raise ValueError("total must not be negative")
    whole = sum(weights)
    if whole <= 0:
        raise ValueError("weights must have a positive sum")
    shares = [w * total / whole for w in weights]
    out = [math.floor(s) for s in shares]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(shares[i] - out[i]), i))
    for i in by_remainder[: total - sum(out)]:
        out[i] += 1
    return out


@dataclass(frozen=True)
class QueuePlan:
    """One generated queue: its name, cohort, set, GPU quota and ops per workloads set."""

    name: str
    cohort: str | None
    qset: QueuesSet
    nominal: float | None
    ops: tuple[int, ...]  # ops of each of qset.workloads_sets

    @property
    def binding(self) -> bool:
        return self.nominal is not None and self.nominal < UNBOUNDED


@dataclass(frozen=True, slots=True)
class Submission:
    """One op of the stream: where and when it is submitted and what it asks for."""

    index: int
    queue: str
    klass: str
    priority: int
    gpus: int
    runtime_s: float
    offset_s: float  # since the stream's start


def _groups(cfg: GeneratorConfig) -> list[tuple[CohortSet, int, QueuesSet]]:
    return [(c, ci, q) for c in cfg.cohorts for ci in range(c.count) for q in c.queues_sets]


def _plans(cfg: GeneratorConfig, queues: int | None, nominal_quota) -> list[QueuePlan]:
    groups = _groups(cfg)
    counts = [q.count for _, _, q in groups] if queues is None else apportion([q.count for _, _, q in groups], queues)
    plans = []
    for (c, ci, q), n in zip(groups, counts):
        nominal = q.nominal_quota if nominal_quota == KEEP else nominal_quota
        for qi in range(n):
            plans.append(QueuePlan(name=f"{c.class_name}-{ci}-{q.class_name}-{qi:04d}",
                                   cohort=None if c.standalone else f"{c.class_name}-{ci}", qset=q, nominal=nominal,
                                   ops=tuple(s.ops for s in q.workloads_sets)))
    if not plans:
        raise GeneratorConfigError("the workload has no queue (queues override of 0?)")
    return plans


def _scale_ops(plans: list[QueuePlan], pending: int) -> list[QueuePlan]:
    cells = [(i, s) for i, p in enumerate(plans) for s in range(len(p.ops))]
    sizes = apportion([plans[i].ops[s] for i, s in cells], pending)
    ops = [list(p.ops) for p in plans]
    for (i, s), n in zip(cells, sizes):
        ops[i][s] = n
    return [QueuePlan(p.name, p.cohort, p.qset, p.nominal, tuple(o)) for p, o in zip(plans, ops)]


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _offsets(seed: int, queue: str, si: int, wset: WorkloadsSet, n: int) -> list[float]:
    interval, start = wset.creation_interval_ms / 1e3, wset.initial_delay_ms / 1e3
    if wset.arrivals == "fixed" or interval == 0:
        return [start + k * interval for k in range(n)]
    rng = random.Random(f"{seed}/{queue}/{si}")  # a str seed is hashed the same in every process
    out, t = [], start
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(1.0 / interval)
    return out


@dataclass
class Workload:
    """A config with the scenario's sizes applied: queues, nodes, and the stream of submissions."""

    config: GeneratorConfig
    plans: list[QueuePlan]
    nodes: int
    source: str = "<config>"
    _by_queue: dict[str, list[Submission]] = field(default_factory=dict, repr=False)

    @property
    def gpus_per_node(self) -> int:
        return self.config.nodes.gpus_per_node

    @property
    def queue_names(self) -> list[str]:
        return [p.name for p in self.plans]

    def node_names(self) -> list[str]:
        return [f"node-{j:05d}" for j in range(self.nodes)]

    def queues_config(self):
        """The opsched ``QueuesConfig`` (one GPU flavor; a queue set's quota on every queue of it)."""
        from opsched.proto.queues import (
            Flavor,
            FlavorQuota,
            Preemption,
            Queue,
            QueuesConfig,
            ResourceQuota,
        )

        queues = []
        for p in self.plans:
            q = p.qset
            resources = [] if p.nominal is None else [ResourceQuota(resource=GPU, flavors=[FlavorQuota(
                name=self.config.flavor, nominal=_number(p.nominal), borrowing_limit=q.borrowing_limit,
                lending_limit=q.lending_limit)])]
            queues.append(Queue(name=p.name, cohort=p.cohort, concurrency=q.concurrency, resources=resources,
                                preemption=Preemption(within_queue=q.within_queue,
                                                      reclaim_within_cohort=q.reclaim_within_cohort),
                                max_pending_per_user=0))  # one client submits every op: no per-user cap here
        flavors = [Flavor(name=self.config.flavor, node_labels={PRODUCT_LABEL: self.config.nodes.product})]
        return QueuesConfig(queues=queues, default_queue=queues[0].name,
                            flavors=flavors if any(q.resources for q in queues) else [])

    @functools.cached_property
    def submissions(self) -> list[Submission]:
        """Every op, ordered by creation offset (ties: queue, then set, then position in the set)."""
        rows = []
        for qi, p in enumerate(self.plans):
            for si, (wset, n) in enumerate(zip(p.qset.workloads_sets, p.ops)):
                for k, t in enumerate(_offsets(self.config.seed, p.name, si, wset, n)):
                    rows.append((t, qi, si, k, wset.workloads[k % len(wset.workloads)]))
        rows.sort(key=lambda r: r[:4])
        return [Submission(i, self.plans[qi].name, w.class_name, w.priority, w.request, w.runtime_ms / 1e3, t)
                for i, (t, qi, _, _, w) in enumerate(rows)]

    def pattern(self, queue: str) -> list[Submission]:
        """The queue's own ops in stream order (one of each of its classes if it has none)."""
        if not self._by_queue:
            for s in self.submissions:
                self._by_queue.setdefault(s.queue, []).append(s)
        own = self._by_queue.get(queue)
        if own:
            return own
        plan = next(p for p in self.plans if p.name == queue)
        return [Submission(-1, queue, w.class_name, w.priority, w.request, w.runtime_ms / 1e3, 0.0)
                for s in plan.qset.workloads_sets for w in s.workloads]

    def fill(self) -> list[tuple[Submission, str | None]]:
        """Running ops that use up every binding quota and, with nodes, every node (packed in order),
        drawn round-robin over the queues from each queue's own class mix; with their node."""
        left = {p.name: float(p.nominal) for p in self.plans if p.nominal is not None and p.binding}
        queues = [p.name for p in self.plans if self.nodes or p.binding]
        draws = {q: cycle(self.pattern(q)) for q in queues}
        free, node = self.gpus_per_node, 0
        out: list[tuple[Submission, str | None]] = []
        while queues:
            for q in list(queues):
                sub = next(draws[q])
                if sub.gpus > left.get(q, math.inf):
                    queues.remove(q)
                    continue
                placed = None
                if self.nodes:
                    if sub.gpus > free:
                        node, free = node + 1, self.gpus_per_node
                    if node >= self.nodes or sub.gpus > free:
                        return out
                    placed, free = f"node-{node:05d}", free - sub.gpus
                if q in left:
                    left[q] -= sub.gpus
                out.append((sub, placed))
        return out

    def arrivals(self) -> dict[str, "cycle[Submission]"]:
        """Per queue, an endless draw from its class mix (steady-state arrivals)."""
        return {q: cycle(self.pattern(q)) for q in self.queue_names}

    def describe(self) -> dict:
        classes: dict[str, int] = {}
        for s in self.submissions:
            classes[s.klass] = classes.get(s.klass, 0) + 1
        return {"source": self.source, "queues": len(self.plans), "nodes": self.nodes,
                "cohorts": len({p.cohort for p in self.plans if p.cohort}), "pending": len(self.submissions),
                "classes": classes, "seed": self.config.seed}


def build(config: GeneratorConfig, *, pending: int | None = None, queues: int | None = None,
          nominal_quota: float | None | str = KEEP, nodes: int | None = None, source: str = "<config>") -> Workload:
    """The config with a scenario's sizes: ``queues`` in total (split over the queue sets in their
    proportions), ``pending`` ops in total (split over queues and workloads sets in proportion to
    their ops), ``nominal_quota`` GPUs per queue (None: no quota; ``UNBOUNDED``: one that never
    binds), ``nodes`` simulated nodes. None / ``KEEP`` keep the config's value."""
    plans = _plans(config, queues, nominal_quota)
    if pending is not None:
        plans = _scale_ops(plans, pending)
    return Workload(config, plans, config.nodes.count if nodes is None else nodes, source)


def build_file(path: Path | str | None, default: Path = DEFAULT, **sizes) -> Workload:
    """:func:`build` of the config at ``path`` (``default`` when None)."""
    path = Path(path) if path else default
    return build(load(path), source=str(path), **sizes)
