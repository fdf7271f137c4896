"""Pydantic models of the part of the Polyaxon polyaxonfile format (v1.1) that opsched reads.

Field names are Polyaxon's camelCase. Each model rejects keys it does not know (``extra="forbid"``)
except the keys listed in its ``ignored`` set: Polyaxon allows them, opsched does not use them yet,
so they are accepted and dropped. A key with an empty (null) value counts as not set.
At the end, checks that span several fields (resources, inputs) return problems with exact
paths. The parser (``opsched.polyaxonfile``) turns these models into ``proto.spec.OpSpec`` and
documents the behaviour as a whole.
"""
from __future__ import annotations

import math
import re
import shlex
from datetime import datetime, timezone
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from proto.resources import QuantityError, is_accelerator, parse_quantity
from proto.schedules import ScheduleSpec
from proto.subjects import valid_token
from services.admission.cron import CronError
from services.admission.cron import parse as parse_cron

# Top-level keys of a component or an operation that are accepted and ignored. (``matrix`` is
# read by the parser before validation: see ``GridModel``/``RandomModel``.)
TOP_LEVEL_IGNORED = frozenset({
    "description", "presets", "hooks", "plugins", "joins", "schedule", "dependencies",
    "trigger", "skipOnUpstreamSkip", "events", "actions", "pathRef", "hubRef", "dagRef", "urlRef",
    "runPatch", "patchStrategy", "isPreset", "contexts", "template", "build",
})
# Of those, the ones whose absence changes what runs or when: the parser warns about them.
BEHAVIOUR_IGNORED = frozenset({
    "presets", "hooks", "plugins", "joins", "schedule", "dependencies", "trigger",
    "events", "actions", "runPatch", "template", "build",
})
# Keys Polyaxon or Kubernetes accept that opsched rejects: ignoring them would change the run.
UNSUPPORTED = frozenset({
    "init", "sidecars", "connections", "envFrom", "valueFrom", "nodeName", "schedulerName",
    "priority",  # run.environment.priority (a raw pod priority); use priorityClassName
    "schedulingPolicy", "elasticPolicy", "nProcPerNode",  # pytorchjob: change how the gang runs
    "earlyStopping",  # matrix: would stop a sweep early
})
SUPPORTED_VERSIONS = ("1", "1.0", "1.1")
RUN_KINDS_SUPPORTED = ("job", "pytorchjob")
RUN_KINDS_KNOWN = frozenset({
    "job", "service", "dag", "daskjob", "rayjob", "tfjob", "pytorchjob", "mpijob", "mxjob",
    "xgbjob", "paddlejob", "notifier", "watchdog", "tuner", "cleaner",
})

_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,128}$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_RESERVED_IO = frozenset({"globals", "params", "connections"})
_IO_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int, "float": (int, float), "bool": bool, "dict": dict, "list": list,
}
Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]  # (path in Polyaxon names, message)


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    return value


def _scalar_to_str(value: Any) -> Any:
    """YAML reads `nvidia.com/gpu: 1` or `value: 3` as numbers; Kubernetes wants strings."""
    if isinstance(value, bool):
        raise ValueError("expected a string, got a boolean (quote it: \"true\")")
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _quantity(value: str) -> str:
    try:
        parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return value


def valid_name(value: str) -> bool:
    """Polyaxon names (operation, component, project): letters, digits, '-' and '_'."""
    return bool(_NAME.match(value))


def _name(value: str) -> str:
    if not valid_name(value):
        raise ValueError(f"invalid name {value!r}: use letters, digits, '-' and '_' (at most 128)")
    return value


def normalize_queue(value: str) -> str:
    """``agent/queue`` routes to ``queue`` (opsched has one agent); the queue must be a token."""
    agent, slash, queue = value.rpartition("/")
    if slash and (not agent or "/" in agent):
        raise ValueError(f"invalid queue {value!r}: expected 'queue' or 'agent/queue'")
    if not valid_token(queue):
        raise ValueError(f"invalid queue name {queue!r}: use lowercase letters, digits and '-' "
                         "(at most 63, starting with a letter or digit)")
    return queue


def _not_reserved(value: str) -> str:
    if value in _RESERVED_IO:
        raise ValueError(f"{value!r} is reserved; use another input/output name")
    return value


def _dns_label(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(f"invalid container name {value!r}: must be a DNS label (lowercase, '-')")
    return value


def _priority_class(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(f"invalid priorityClass {value!r}: must be a DNS label (lowercase "
                         "letters, digits and '-', at most 63, starting and ending with a "
                         "letter or digit)")
    return value


def _command(value: Any) -> Any:
    """A command string is split like a shell would (``sh -c "echo hi"`` → 3 items)."""
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"cannot split command string: {exc}") from None
    return value


def _args(value: Any) -> Any:
    """An args string is ONE argument, as in Polyaxon's ``command: [sh, -c]``, ``args: "..."``."""
    return [value] if isinstance(value, str) else value


def _tags(value: Any) -> Any:
    return [t.strip() for t in value.split(",") if t.strip()] if isinstance(value, str) else value


def _version(value: Any) -> Any:
    if isinstance(value, bool) or str(value) not in SUPPORTED_VERSIONS:
        raise ValueError(f"unsupported version {value!r}: opsched reads Polyaxon version 1.1")
    return 1.1


Int = Annotated[int, BeforeValidator(_no_bool)]
Float = Annotated[float, BeforeValidator(_no_bool), Field(allow_inf_nan=False)]
Str = Annotated[str, BeforeValidator(_scalar_to_str)]
NonEmpty = Annotated[str, Field(min_length=1)]
Quantity = Annotated[str, BeforeValidator(_scalar_to_str), AfterValidator(_quantity)]
Name = Annotated[str, AfterValidator(_name)]
Queue = Annotated[str, AfterValidator(normalize_queue)]
Command = Annotated[list[str], BeforeValidator(_command)]
Args = Annotated[list[str], BeforeValidator(_args)]
Tags = Annotated[list[str], BeforeValidator(_tags)]
Version = Annotated[float, BeforeValidator(_version)]
PriorityClass = Annotated[str, AfterValidator(_priority_class)]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, frozen=True)
    ignored: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _drop_ignored(cls, data: Any) -> Any:
        """Drop ignored keys, and keys left empty (``environment:``), which mean "not set"."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in cls.ignored and v is not None}
        return data


class EnvVarModel(Model):
    name: NonEmpty
    value: Str = ""


class ResourcesModel(Model):
    limits: dict[str, Quantity] = {}
    requests: dict[str, Quantity] = {}


class ContainerModel(Model):
    ignored = frozenset({
        "imagePullPolicy", "ports", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
        "terminationMessagePath", "terminationMessagePolicy", "stdin", "stdinOnce", "tty",
    })
    image: NonEmpty
    name: Annotated[str, AfterValidator(_dns_label)] = "main"
    command: Command = []
    args: Args = []
    env: list[EnvVarModel] = []
    resources: ResourcesModel = ResourcesModel()
    working_dir: str | None = None
    security_context: dict[str, Any] | None = None
    volume_mounts: list[dict[str, Any]] = []


class TolerationModel(Model):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: Str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: Int | None = None


class EnvironmentModel(Model):
    ignored = frozenset({
        "hostAliases", "securityContext", "imagePullSecrets", "hostNetwork", "hostPID",
        "dnsPolicy", "dnsConfig", "restartPolicy",
    })
    node_selector: dict[str, Str] = {}
    tolerations: list[TolerationModel] = []
    affinity: dict[str, Any] | None = None
    labels: dict[str, Str] = {}
    annotations: dict[str, Str] = {}
    priority_class_name: str | None = None
    service_account_name: str | None = None
    volumes: list[dict[str, Any]] = []


class JobRunModel(Model):
    kind: Literal["job"]
    container: ContainerModel
    environment: EnvironmentModel = EnvironmentModel()
    volumes: list[dict[str, Any]] = []


class KFReplicaModel(Model):
    """Polyaxon's V1KFReplica: one replica section (master, worker) of a distributed run.

    ``environment`` and ``volumes`` are read only to be rejected by ``check_run`` (per-replica
    placement is not supported yet); init, sidecars and connections are in ``UNSUPPORTED``.
    """

    replicas: Int | None = None
    container: ContainerModel
    environment: Any = None
    volumes: Any = None


class PytorchJobRunModel(Model):
    """Polyaxon's V1PytorchJob. It has no run-level environment or volumes (they are per
    replica); both are read only to be rejected by ``check_run`` with a clear message."""

    ignored = frozenset({"cleanPodPolicy"})
    kind: Literal["pytorchjob"]
    master: KFReplicaModel
    worker: KFReplicaModel | None = None
    environment: Any = None
    volumes: Any = None


class TerminationModel(Model):
    ignored = frozenset({"culling"})
    max_retries: Annotated[Int, Field(ge=0)] | None = None
    timeout: Annotated[Int, Field(gt=0)] | None = None
    ttl: Annotated[Int, Field(ge=0)] | None = None


class CacheModel(Model):
    disable: bool | None = None
    ttl: Annotated[Int, Field(ge=0)] | None = None
    io: list[str] | None = None
    sections: list[Literal["init", "connections", "containers"]] | None = None


class IOModel(Model):
    """One entry of a component's ``inputs``/``outputs``; ``value`` is the default."""

    ignored = frozenset({
        "description", "isList", "isFlag", "argFormat", "delayValidation", "options",
        "connection", "toInit", "toEnv",
    })
    name: Annotated[Name, AfterValidator(_not_reserved)]
    type: str | None = None
    value: Any = None
    is_optional: bool = False


class _Common(Model):
    """Fields an operation may set to override its component's."""

    ignored = TOP_LEVEL_IGNORED
    version: Version | None = None
    name: Name | None = None
    project: Name | None = None
    tags: Tags | None = None
    queue: Queue | None = None
    priority: Int | None = None
    termination: TerminationModel | None = None
    cache: CacheModel | None = None
    is_approved: bool | None = None
    cost: Annotated[Float, Field(ge=0)] | None = None
    priority_class: PriorityClass | None = None  # opsched's own: a class of the queue config
    preemptible: bool | None = None  # opsched's own


class ComponentModel(_Common):
    kind: Literal["component"] = "component"
    inputs: list[IOModel] = []
    outputs: list[IOModel] = []
    run: JobRunModel


class OperationModel(_Common):
    kind: Literal["operation"]
    params: dict[str, Any] = {}
    conditions: str | None = None
    component: ComponentModel


class PytorchComponentModel(ComponentModel):
    run: PytorchJobRunModel  # type: ignore[assignment]


class PytorchOperationModel(OperationModel):
    component: PytorchComponentModel  # type: ignore[assignment]


class _ScheduleModel(Model):
    """Polyaxon's V1CronSchedule / V1IntervalSchedule / V1DateTimeSchedule (times without a zone are UTC)."""

    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: Annotated[Int, Field(ge=1)] | None = None
    depends_on_past: bool | None = None

    def check(self, loc: Loc) -> list[Problem]:
        if self.start_at and self.end_at and _utc(self.end_at) < _utc(self.start_at):
            return [(loc + ("endAt",), f"endAt {self.end_at.isoformat()} is before startAt "
                                       f"{self.start_at.isoformat()}")]
        return []

    def to_spec(self) -> ScheduleSpec:
        return ScheduleSpec(kind=self.kind, cron=getattr(self, "cron", None),  # type: ignore[attr-defined]
                            frequency_s=getattr(self, "frequency", None),
                            start_at=self.start_at and _utc(self.start_at), end_at=self.end_at and _utc(self.end_at),
                            max_runs=self.max_runs, depends_on_past=bool(self.depends_on_past))


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _cron(value: str) -> str:
    try:
        parse_cron(value)
    except CronError as exc:
        raise ValueError(str(exc)) from None
    return value


class CronScheduleModel(_ScheduleModel):
    kind: Literal["cron"]
    cron: Annotated[str, AfterValidator(_cron)]


def _frequency(value: int) -> int:
    if value <= 0:
        raise ValueError(f"frequency must be a number of seconds above 0, got {value}")
    return value


class IntervalScheduleModel(_ScheduleModel):
    kind: Literal["interval"]
    frequency: Annotated[Int, AfterValidator(_frequency)]  # seconds


class DateTimeScheduleModel(_ScheduleModel):
    kind: Literal["datetime"]
    start_at: datetime  # type: ignore[assignment]  # required: the time to run at


SCHEDULE_MODELS: dict[str, type[_ScheduleModel]] = {
    "cron": CronScheduleModel, "interval": IntervalScheduleModel, "datetime": DateTimeScheduleModel,
}


def schedule_kind_problem(raw: Any, loc: Loc) -> Problem | None:
    """The shape and ``kind`` of a raw ``schedule`` section, checked before its model validates it."""
    if not isinstance(raw, dict):
        return loc, f"expected a mapping, got {type(raw).__name__}"
    kind = raw.get("kind")
    if kind in SCHEDULE_MODELS:
        return None
    what = ("missing 'kind'" if kind is None else f"kind {kind!r} is not supported yet" if kind == "repeatable"
            else f"kind {kind!r} is unknown")
    return loc + ("kind",), f"{what}; expected 'cron', 'interval' or 'datetime'"


# run.kind -> (component model, operation model); the parser picks them after its precheck.
MODELS_BY_RUN_KIND: dict[str, tuple[type[ComponentModel], type[OperationModel]]] = {
    "job": (ComponentModel, OperationModel),
    "pytorchjob": (PytorchComponentModel, PytorchOperationModel),
}


class OverridesModel(Model):
    """What a caller (CLI flags, API) may override; keys are plain Python names."""

    model_config = ConfigDict(alias_generator=None)
    params: dict[str, Any] = {}
    queue: Queue | None = None
    priority: Int | None = None
    project: Name | None = None
    priority_class: PriorityClass | None = None
    preemptible: bool | None = None


# --- checks that need more than one field (they report exact paths, which validators can't) ----

def check_resources(res: ResourcesModel, loc: Loc) -> list[Problem]:
    """Kubernetes rules the scheduler relies on: whole accelerators, requests within limits."""
    problems = []
    for section in ("limits", "requests"):
        for name, qty in getattr(res, section).items():
            if is_accelerator(name) and parse_quantity(qty) % 1:
                problems.append((loc + (section, name),
                                 f"{name} must be a whole number, got {qty!r}"))
    for name, req in res.requests.items():
        lim = res.limits.get(name)
        where = loc + ("requests", name)
        if lim is None and is_accelerator(name):
            problems.append((where, f"{name} needs a limit (set it in limits, like Kubernetes)"))
        elif lim is None:
            continue
        elif is_accelerator(name) and parse_quantity(req) != parse_quantity(lim):
            problems.append((where, f"{name} request {req!r} must equal its limit {lim!r}"))
        elif parse_quantity(req) > parse_quantity(lim):
            problems.append((where, f"request {req!r} exceeds the limit {lim!r}"))
    return problems


_REPLICA_UNSUPPORTED = {
    "environment": ("per-replica environment is not supported yet; leave it out (admission still "
                    "adds the flavor's node selector and tolerations)"),
    "volumes": "per-replica volumes are not supported yet; leave them out",
}


def check_run(run: JobRunModel | PytorchJobRunModel, loc: Loc) -> list[Problem]:
    """Resources of every container of the run, and the pytorchjob's replica rules."""
    if isinstance(run, JobRunModel):
        return check_resources(run.container.resources, loc + ("container", "resources"))
    problems: list[Problem] = []
    for key, unsupported in _REPLICA_UNSUPPORTED.items():
        if key in run.model_fields_set:
            msg = (f"a pytorchjob has no run-level {key} in Polyaxon (only per replica), "
                   f"and {unsupported}")
            problems.append((loc + (key,), msg))
    if run.master.replicas not in (None, 1):
        msg = (f"master.replicas must be 1, got {run.master.replicas} "
               "(set worker.replicas for more pods)")
        problems.append((loc + ("master", "replicas"), msg))
    if run.worker is not None and run.worker.replicas is not None and run.worker.replicas < 1:
        msg = (f"worker.replicas must be at least 1, got {run.worker.replicas} "
               "(leave the worker section out for a master-only job)")
        problems.append((loc + ("worker", "replicas"), msg))
    for section, replica in (("master", run.master), ("worker", run.worker)):
        if replica is None:
            continue
        for key, msg in _REPLICA_UNSUPPORTED.items():
            if key in replica.model_fields_set:
                problems.append((loc + (section, key), msg))
        problems += check_resources(replica.container.resources,
                                    loc + (section, "container", "resources"))
    return problems


def _type_problem(io: IOModel, value: Any) -> str | None:
    expected = _IO_TYPES.get(io.type or "")
    if expected is None or value is None or (isinstance(value, str) and "{{" in value):
        return None
    if isinstance(value, bool) != (io.type == "bool") or not isinstance(value, expected):
        return f"{io.name!r} expects a value of type {io.type}, got {value!r}"
    return None


def resolve_io(ios: list[IOModel], params: dict[str, Any], where: dict[str, Loc],
               loc: Loc, problems: list[Problem], *, inputs: bool) -> dict[str, Any]:
    """Values of a component's inputs (or outputs): the param of the same name, else the default.

    A required input with neither is a problem; outputs without a value are left out.
    """
    out: dict[str, Any] = {}
    seen: set[str] = set()
    for i, io in enumerate(ios):
        if io.name in seen:
            problems.append((loc + (i, "name"), f"duplicate name {io.name!r}"))
        seen.add(io.name)
        if io.name in params:
            value, at = params[io.name], where[io.name]
        elif "value" in io.model_fields_set:
            value, at = io.value, loc + (i, "value")
        elif inputs and not io.is_optional:
            problems.append((loc + (i,), f"input {io.name!r} is required: set it in params"))
            continue
        else:
            value, at = None, loc + (i,)
        problem = _type_problem(io, value)
        if problem:
            problems.append((at, problem))
        if inputs or value is not None:
            out[io.name] = value
    return out


# --- matrix (sweeps): Polyaxon's V1GridSearch and V1RandomSearch -------------------------------
#
# ``matrix: {kind: grid|random, params: {name: {kind, value}}, concurrency, numRuns, seed}``.
# The models check the shape; ``hp_param`` turns one param into its values (discrete kinds) or a
# sampler (distributions), reporting problems at ``matrix.params.<name>.kind`` / ``.value``.

MATRIX_KINDS_SUPPORTED = ("grid", "random")
MATRIX_KINDS_KNOWN = frozenset({"mapping", "grid", "random", "hyperband", "bayes", "hyperopt",
                                "iterative", "tuner"})
HP_DISCRETE = ("choice", "range", "linspace", "logspace", "geomspace")
HP_DISTRIBUTIONS = ("pchoice", "uniform", "quniform", "loguniform", "qloguniform", "normal",
                    "qnormal", "lognormal", "qlognormal")
HP_KNOWN_UNSUPPORTED = frozenset({"daterange", "datetimerange"})
MAX_BATCH = 1000  # operations one matrix may make
MAX_VALUES = 10_000  # values one discrete param may generate
PositiveInt = Annotated[Int, Field(ge=1)]


class HpParamModel(Model):
    """One swept param: ``{kind: choice, value: [1, 2]}``; the value is checked by ``hp_param``."""

    kind: str
    value: Any


class _MatrixModel(Model):
    params: dict[str, HpParamModel]
    concurrency: PositiveInt | None = None  # at most this many of the batch run at once


class GridModel(_MatrixModel):
    """Every combination of the params' discrete values (first param slowest); ``numRuns``
    keeps the first N."""

    kind: Literal["grid"]
    num_runs: PositiveInt | None = None


class RandomModel(_MatrixModel):
    """``numRuns`` distinct combinations sampled from the params (discrete values uniformly,
    distributions by their law); ``seed`` makes the draw reproducible."""

    kind: Literal["random"]
    num_runs: PositiveInt
    seed: Int | None = None


MATRIX_MODELS: dict[str, type[_MatrixModel]] = {"grid": GridModel, "random": RandomModel}


class HpParam:
    """A validated swept param: ``values`` (discrete kinds) or ``draw(rng)`` (distributions)."""

    def __init__(self, kind: str, values: list[Any] | None = None,
                 draw: Any = None) -> None:
        self.kind = kind
        self.values = values
        self.draw = draw if draw is not None else (lambda rng: rng.choice(values))

    @property
    def discrete(self) -> bool:
        return self.values is not None


def tidy(x: float) -> float:
    """A computed float without representation noise (``0.30000000000000004`` → ``0.3``)."""
    return float(f"{x:.12g}")


def _number(raw: Any, key: str) -> int | float:
    if isinstance(raw, str):
        try:
            raw = int(raw)
        except ValueError:
            try:
                raw = float(raw)
            except ValueError:
                raise ValueError(f"{key} must be a number, got {raw!r}") from None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw != raw or raw in (
            float("inf"), float("-inf")):
        raise ValueError(f"{key} must be a number, got {raw!r}")
    return raw


def _fields(value: Any, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """Polyaxon's three spellings: ``[a, b, c]``, ``{k: v}`` and ``"a:b:c"`` → {key: number}."""
    keys = required + optional
    spelled = f"[{', '.join(keys)}]"
    if isinstance(value, str):
        value = value.split(":")
    if isinstance(value, (list, tuple)):
        if not len(required) <= len(value) <= len(keys):
            count = f"{len(required)}" + (f" or {len(keys)}" if optional else "")
            raise ValueError(f"expected {count} numbers {spelled}, got {len(value)}")
        value = dict(zip(keys, value))
    elif isinstance(value, dict):
        unknown = [k for k in value if k not in keys]
        missing = [k for k in required if k not in value]
        if unknown or missing:
            what = (f"unknown key {unknown[0]!r}" if unknown else f"missing {missing[0]!r}")
            raise ValueError(f"{what}; expected {spelled} (a list, a mapping or 'a:b:c')")
    else:
        raise ValueError(f"expected {spelled} as a list, a mapping or a string 'a:b:c', "
                         f"got {type(value).__name__}")
    return {k: _number(v, k) for k, v in value.items()}


def _count(raw: int | float, key: str) -> int:
    if raw != int(raw) or raw < 1:
        raise ValueError(f"{key} must be a whole number >= 1, got {raw!r}")
    return int(raw)


def _ordered(f: dict[str, Any], low: str, high: str) -> None:
    if f[low] >= f[high]:
        raise ValueError(f"{high} must be greater than {low}, got {low}={f[low]!r}, "
                         f"{high}={f[high]!r}")


def _positive(f: dict[str, Any], key: str) -> None:
    if f[key] <= 0:
        raise ValueError(f"{key} must be > 0, got {f[key]!r}")


def _too_many(n: int) -> None:
    if n > MAX_VALUES:
        raise ValueError(f"generates {n} values; at most {MAX_VALUES}")


def _range(value: Any) -> list[Any]:
    """numpy's ``arange(start, stop, step)``: stop excluded; ints stay ints."""
    f = _fields(value, ("start", "stop", "step"))
    _ordered(f, "start", "stop")
    _positive(f, "step")
    start, stop, step = f["start"], f["stop"], f["step"]
    n = math.ceil((stop - start) / step)
    _too_many(n)
    if all(isinstance(v, int) for v in (start, stop, step)):
        return [start + i * step for i in range(n)]
    return [tidy(start + i * step) for i in range(n)]


def _linear(start: float, stop: float, num: int) -> list[float]:
    if num == 1:
        return [float(start)]
    return [float(start) + i * (stop - start) / (num - 1) for i in range(num - 1)] + [float(stop)]


def _space(value: Any, kind: str) -> list[float]:
    """numpy's ``linspace``/``logspace``/``geomspace(start, stop, num)``: both ends included."""
    f = _fields(value, ("start", "stop", "num"), ("base",) if kind == "logspace" else ())
    _ordered(f, "start", "stop")
    num = _count(f["num"], "num")
    _too_many(num)
    if kind == "linspace":
        return [tidy(v) for v in _linear(f["start"], f["stop"], num)]
    if kind == "logspace":
        base = f.get("base", 10)
        if base <= 0:
            raise ValueError(f"base must be > 0, got {base!r}")
        return [tidy(base ** v) for v in _linear(f["start"], f["stop"], num)]
    start, stop = f["start"], f["stop"]
    if start == 0 or stop == 0 or (start < 0) != (stop < 0):
        raise ValueError("geomspace needs start and stop of the same sign, neither 0")
    sign = -1 if start < 0 else 1
    logs = _linear(math.log(abs(start)), math.log(abs(stop)), num)
    values = [sign * math.exp(v) for v in logs]
    values[0], values[-1] = float(start), float(stop)
    return [tidy(v) for v in values]


def _quantize(x: float, q: float) -> float:
    return tidy((x // q) * q)  # Polyaxon's round(x // q) * q


def _distribution(kind: str, value: Any) -> Any:
    """The sampler of a distribution (Polyaxon's hypertune laws): ``draw(rng) -> value``."""
    if kind == "pchoice":
        if not isinstance(value, list) or not value or not all(
                isinstance(v, (list, tuple)) and len(v) == 2 for v in value):
            raise ValueError("expected a list of [value, probability] pairs")
        options = [v[0] for v in value]
        weights = [_number(v[1], "probability") for v in value]
        if any(not 0 < w <= 1 for w in weights) or abs(sum(weights) - 1) > 1e-6:
            raise ValueError(f"probabilities must be in (0, 1] and sum to 1, got {weights}")
        return lambda rng: rng.choices(options, weights)[0]
    quantized = kind.startswith("q")
    base = kind[1:] if quantized else kind
    if base in ("uniform", "loguniform"):
        f = _fields(value, ("low", "high", "q") if quantized else ("low", "high"))
        _ordered(f, "low", "high")
        law = (lambda rng: rng.uniform(f["low"], f["high"])) if base == "uniform" else (
            lambda rng: math.exp(rng.uniform(f["low"], f["high"])))
    else:
        f = _fields(value, ("loc", "scale", "q") if quantized else ("loc", "scale"))
        _positive(f, "scale")
        law = (lambda rng: rng.gauss(f["loc"], f["scale"])) if base == "normal" else (
            lambda rng: rng.lognormvariate(f["loc"], f["scale"]))
    if quantized:
        _positive(f, "q")
        return lambda rng: _quantize(law(rng), f["q"])
    return law


def hp_param(name: str, param: HpParamModel, loc: Loc, problems: list[Problem],
             matrix_kind: str) -> HpParam | None:
    """Values or sampler of one swept param; None (and a problem) if it is invalid."""
    kind = param.kind
    if not valid_name(name):
        problems.append((loc, f"invalid param name {name!r}: use letters, digits, '-' and '_'"))
        return None
    if kind not in HP_DISCRETE and kind not in HP_DISTRIBUTIONS:
        known = "is not supported yet" if kind in HP_KNOWN_UNSUPPORTED else "is unknown"
        problems.append((loc + ("kind",), f"kind {kind!r} {known}; expected one of "
                                          f"{', '.join(HP_DISCRETE + HP_DISTRIBUTIONS)}"))
        return None
    if matrix_kind == "grid" and kind in HP_DISTRIBUTIONS:
        problems.append((loc + ("kind",), f"{kind!r} is a distribution: a grid needs discrete "
                                          f"values ({', '.join(HP_DISCRETE)}); use kind: random"))
        return None
    try:
        if kind == "choice":
            if not isinstance(param.value, list) or not param.value:
                raise ValueError("expected a non-empty list of values")
            _too_many(len(param.value))
            return HpParam(kind, values=list(param.value))
        if kind == "range":
            return HpParam(kind, values=_range(param.value))
        if kind in HP_DISCRETE:
            return HpParam(kind, values=_space(param.value, kind))
        return HpParam(kind, draw=_distribution(kind, param.value))
    except ValueError as exc:
        problems.append((loc + ("value",), str(exc)))
        return None
