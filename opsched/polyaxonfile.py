"""Parse a Polyaxon polyaxonfile (YAML, version 1.1) into a validated ``proto.spec.OpSpec``.

Public API: ``parse_polyaxonfile(text, source=, overrides=)``,
``load_polyaxonfile(path, overrides=)``, ``parse_polyaxonfile_batch(text, source=, overrides=,
salt=)``, ``load_polyaxonfile_batch(path, overrides=, salt=)`` (a sweep: one OpSpec per matrix
combination), ``expand_matrix(matrix, seed=)``, ``batch_id(text, overrides, salt)``,
``component_hash(container, environment, replicas=(), run_kind="job")``,
``SpecError`` (``.errors: list[FieldError]``), ``SpecWarning``.
``overrides`` may hold ``params`` (bare or ``{value: ...}``), ``queue``, ``priority``, ``project``,
``priority_class`` and ``preemptible`` (plain Python names, not Polyaxon's camelCase).

What is read
  * ``version``: 1, 1.0 or 1.1 (number or string); optional. Anything else is an error.
  * ``kind: component`` with ``run: {kind: job, container, environment, volumes}`` or
    ``run: {kind: pytorchjob, master, worker}`` (below), or ``kind: operation`` with an inline
    ``component:``. Other run kinds (service, dag, tfjob, mpijob, ...) are errors ("not supported
    yet; only 'job' and 'pytorchjob'"); so is an operation without an inline component
    (hubRef/pathRef/... unsupported). ``OpSpec.run_kind`` is the run kind.
  * Scheduling fields, on the component or the operation: ``name``, ``project`` (opsched's own,
    default "default"), ``tags`` (list or comma-separated string), ``queue``, ``priority`` (int,
    opsched's own), ``termination`` {maxRetries >= 0, timeout > 0 s, ttl >= 0 s}, ``cache``
    {disable, ttl >= 0, io, sections}, ``isApproved``, ``cost`` (>= 0), ``priorityClass`` and
    ``preemptible`` (bool, default true). The operation also has ``params`` and ``conditions``.
  * ``priorityClass`` (opsched's own, → ``OpSpec.priority_class``): the name of a priority class
    of opsched's queue config, a DNS label; whether it exists is checked by admission, not here.
    It is NOT the pod's ``run.environment.priorityClassName``, which is passed to Kubernetes.
  * Precedence: ``overrides`` > operation > component. ``termination`` and ``cache`` merge field by
    field; every other field is replaced as a whole. ``name`` falls back to the file's stem.
  * ``queue``: a lowercase subject token (``proto.subjects.valid_token``). Polyaxon's
    ``agent/queue`` is accepted and only ``queue`` is kept: opsched has a single agent.
  * ``params``: ``{lr: {value: 0.01}}`` or a bare ``{lr: 0.01}``; a param with ``ref`` is an error.
    Component ``inputs``/``outputs`` ({name, type, value, isOptional}) take their value from the
    param of the same name, else their ``value``; a required input without either is an error.
    Outputs without a value are left out. When the component declares inputs or outputs, a param
    that matches none of them is an error (as in Polyaxon). int/float/bool/dict/list types are
    checked; ``{{ ... }}`` templates are kept as they are, unchecked.
  * ``run.container``: ``image`` (required), ``name`` (default "main"), ``command`` (a string is
    split like a shell does), ``args`` (a string is ONE argument, for ``command: [sh, -c]``),
    ``env`` [{name, value}], ``resources`` {limits, requests} (Kubernetes quantities; numbers are
    turned into strings; accelerator counts must be whole, accelerator requests need an equal
    limit, requests may not exceed limits), ``workingDir``, ``securityContext``, ``volumeMounts``.
  * ``run.environment``: nodeSelector, tolerations, affinity, labels, annotations,
    priorityClassName, serviceAccountName, volumes (``run.volumes``, where Polyaxon puts them,
    is accepted too and merged in first).
  * ``run.kind: pytorchjob`` (Polyaxon's V1PytorchJob): ``master`` and ``worker`` are V1KFReplica
    sections {replicas, container}. The master's container is ``OpSpec.container`` (a master is
    required; its ``replicas`` must be 1 or absent); the worker section, if any, becomes
    ``OpSpec.replicas = [ReplicaGroup(name="worker", count=replicas (default 1, must be >= 1),
    container)]``, one gang with the master. Replica containers are validated like a job's, and
    errors are located under ``run.master.container...`` / ``run.worker.container...``.
    Environment: Polyaxon has no run-level ``environment``/``volumes`` for a pytorchjob (they are
    per replica), and OpSpec has no per-replica environment yet, so both ``run.environment`` and
    ``run.<replica>.environment``/``volumes`` are errors, and a pytorchjob gets the default
    environment (admission still adds its flavor's node selector and tolerations).
    ``cleanPodPolicy`` is accepted and ignored; ``schedulingPolicy``, ``elasticPolicy`` and
    ``nProcPerNode`` are errors (not supported yet).

Matrix (sweeps: Polyaxon's ``matrix`` on the operation, or at the top of a component file)
  * ``kind: grid`` (every combination, first param slowest; ``numRuns`` keeps the first N) or
    ``kind: random`` (``numRuns`` required: that many distinct combinations, drawn with
    ``random.Random(seed)``; if every param is discrete and the space is smaller, all of it).
    ``concurrency`` (>= 1) becomes every op's ``batch_concurrency`` (admission enforces it).
    Other kinds (mapping, hyperband, bayes, hyperopt, iterative, tuner) are errors, and so is
    ``earlyStopping`` (not supported yet). At most ``MAX_BATCH`` (1000) operations per matrix.
  * ``params: {name: {kind, value}}``. Discrete kinds (grid and random): ``choice`` (a list),
    ``range`` [start, stop, step] (stop excluded; ints stay ints), ``linspace`` [start, stop, num],
    ``logspace`` [start, stop, num(, base=10)] (base ** linspace), ``geomspace`` [start, stop,
    num]. Distributions (random only), as Polyaxon's hypertune draws them: ``pchoice``
    [[value, p], ...] (p sum to 1), ``uniform``/``loguniform`` [low, high] (loguniform is
    exp(uniform(low, high)): the bounds are natural logs), ``normal``/``lognormal`` [loc, scale],
    and their quantized ``q…`` forms with a third number q (floor(x / q) * q). A value is a list,
    a mapping ({start, stop, step}, {low, high}, ...) or a string ``"1:10:2"``. Computed floats
    are tidied to 12 significant digits.
  * Each combination fills the op's params (the operation's own params and overrides may not
    name a swept param), is checked against the component's inputs like any param (errors at
    ``matrix.params.<name>.value``), and every op of the file gets the same ``batch`` id
    (``sweep-`` + 8 hex chars of a hash of the text, the overrides and a salt). ``cache`` is left
    as written. The single-op ``parse_polyaxonfile`` refuses a file with a matrix.

Schedule (Polyaxon's ``schedule`` on the operation, else on its component)
  * Read only by ``parse_polyaxonfile_with_schedule`` / ``load_polyaxonfile_with_schedule``, which
    return ``(OpSpec, ScheduleSpec | None)``; ``parse_polyaxonfile`` still ignores it with a warning.
  * ``kind: cron`` (``cron``: 5 fields or a macro, UTC; ``services.admission.cron``), ``kind:
    interval`` (``frequency``: seconds > 0), ``kind: datetime`` (``startAt`` required); all take
    ``startAt``, ``endAt`` (not before startAt), ``maxRuns`` (>= 1), ``dependsOnPast``. Times
    without a zone are UTC. ``repeatable`` and ``{{ refs }}`` are not supported.

Accepted and ignored (Polyaxon allows them; opsched does not use them yet)
  * top level of a component or an operation: ``polyaxonfile_models.TOP_LEVEL_IGNORED``
    (description, presets, hooks, plugins, joins, schedule, dependencies, trigger,
    skipOnUpstreamSkip, events, actions, pathRef, hubRef, dagRef, urlRef, runPatch, patchStrategy,
    isPreset, contexts, template, build). Those that change what runs or when
    (``BEHAVIOUR_IGNORED``: schedule, hooks, ...) raise a ``SpecWarning``.
  * container: imagePullPolicy, ports, probes, lifecycle, terminationMessage*, stdin*, tty;
    pytorchjob run: cleanPodPolicy;
    environment: hostAliases, securityContext, imagePullSecrets, hostNetwork, hostPID, dnsPolicy,
    dnsConfig, restartPolicy; termination: culling; inputs/outputs: description, isList, isFlag,
    argFormat, delayValidation, options, connection, toInit, toEnv.
Every other key is an error ("unknown field"), and keys that would change the run if dropped
(init, sidecars, connections, envFrom, valueFrom, nodeName, schedulerName, environment.priority,
and the pytorchjob keys above) are errors saying they are not supported yet.

``component_hash``: first 16 hex chars of the sha256 of the canonical JSON (sorted keys) of the
normalized run section (kind, container, environment, and for a pytorchjob its replica groups).
A plain job hashes exactly as before replicas existed. Params and scheduling fields are not part
of it.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import secrets
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import yaml
from pydantic import BaseModel, ValidationError

from opsched.polyaxonfile_models import (
    BEHAVIOUR_IGNORED, MATRIX_KINDS_KNOWN, MATRIX_KINDS_SUPPORTED, MATRIX_MODELS, MAX_BATCH,
    MODELS_BY_RUN_KIND, RUN_KINDS_KNOWN, RUN_KINDS_SUPPORTED, UNSUPPORTED, ComponentModel,
    ContainerModel, GridModel, HpParam, IOModel, JobRunModel, Loc, OperationModel, OverridesModel,
    Problem, PytorchJobRunModel, RandomModel, check_run, hp_param, resolve_io, valid_name,
)
from proto.spec import Cache, Container, Environment, OpSpec, ReplicaGroup, Termination
from opsched.polyaxonfile_models import SCHEDULE_MODELS, schedule_kind_problem
from proto.schedules import ScheduleSpec

MAX_CHARS = 1_000_000

_PARAM_KEYS = frozenset({"value", "ref", "contextOnly", "connection", "toInit", "toEnv"})
_RUN_HINT = "a 'run' section with 'kind: job' or 'kind: pytorchjob' is required"
_MISSING_HINTS = {
    ("component",): "an inline component is required (hubRef, pathRef, dagRef and urlRef "
                    "are not supported yet)",
    ("run",): _RUN_HINT,
    ("component", "run"): _RUN_HINT,
    ("matrix", "numRuns"): "a random search needs numRuns (how many operations to sample)",
    ("matrix", "params"): "a matrix needs params: {name: {kind, value}}",
}
# Missing keys recognised by the end of their path (under "run" or "component.run").
_MISSING_TAIL_HINTS = {
    ("run", "master"): "a pytorchjob needs a 'master' replica: its container is the main one",
    ("master", "container"): "a 'container' is required",
    ("worker", "container"): "a 'container' is required",
}


@dataclass(frozen=True)
class FieldError:
    loc: str  # dotted path in Polyaxon's names, e.g. "termination.maxRetries"; "" is the document
    msg: str
    line: int | None = None  # 1-based, when the path exists in the YAML
    column: int | None = None


class SpecError(Exception):
    """An invalid polyaxonfile; ``errors`` lists every problem found."""

    def __init__(self, source: str, errors: list[FieldError]):
        self.source = source
        self.errors = list(errors)
        super().__init__(self._render())

    def _render(self) -> str:
        count = len(self.errors)
        lines = [f"{self.source}: invalid polyaxonfile ({count} error{'s' if count != 1 else ''})"]
        for err in self.errors:
            where = f" (line {err.line})" if err.line else ""
            lines.append(f"  {err.loc or '<document>'}{where}: {err.msg}")
        return "\n".join(lines)


class SpecWarning(UserWarning):
    """A polyaxonfile uses a Polyaxon feature that opsched accepts but ignores."""


class _Problems(Exception):
    def __init__(self, problems: list[Problem]):
        super().__init__(problems)
        self.problems = problems


# --- public API ---------------------------------------------------------------------------------

def parse_polyaxonfile(text: str, *, source: str = "<string>",
                       overrides: dict | None = None) -> OpSpec:
    """Validate a polyaxonfile and return its OpSpec; raise ``SpecError`` listing all problems.

    A file with a ``matrix`` makes several operations: it is refused here (error at ``matrix``);
    read it with ``parse_polyaxonfile_batch``/``load_polyaxonfile_batch``."""
    return _parse(text, source, overrides, salt=None, batch=False)[0]


def load_polyaxonfile(path: str | Path, *, overrides: dict | None = None) -> OpSpec:
    """Read and parse a polyaxonfile; unreadable files raise ``SpecError`` too."""
    return parse_polyaxonfile(_read(path), source=str(path), overrides=overrides)


def parse_polyaxonfile_with_schedule(text: str, *, source: str = "<string>", overrides: dict | None = None
                                     ) -> tuple[OpSpec, ScheduleSpec | None]:
    """The OpSpec and the ``schedule`` section (None without one); ``SpecError`` lists the problems of
    both. Other ignored keys still raise a ``SpecWarning``; ``schedule`` does not."""
    doc = _load_yaml(text, source)
    problems: list[Problem] = []
    schedule = _collect(problems, _schedule, doc) if isinstance(doc, dict) else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            spec = parse_polyaxonfile(text, source=source, overrides=overrides)
        except SpecError as exc:
            errors = _locate(text, problems) + exc.errors
            raise SpecError(source, sorted(errors, key=lambda e: (e.line is None, e.line or 0))) from None
    if problems:
        raise SpecError(source, _locate(text, problems))
    for w in caught:  # every warning but the "ignoring ..." one, which is given again without schedule
        if not (issubclass(w.category, SpecWarning) and str(w.message).startswith(f"{source}: ignoring ")):
            warnings.warn(w.message, w.category, stacklevel=2)
    _warn_ignored({k: v for k, v in doc.items() if k != "schedule"} | _without_component_schedule(doc), source)
    return spec, schedule


def load_polyaxonfile_with_schedule(path: str | Path, *, overrides: dict | None = None
                                    ) -> tuple[OpSpec, ScheduleSpec | None]:
    """``parse_polyaxonfile_with_schedule`` of a file; unreadable files raise ``SpecError`` too."""
    return parse_polyaxonfile_with_schedule(_read(path), source=str(path), overrides=overrides)


def _schedule(doc: dict) -> ScheduleSpec | None:
    """The operation's ``schedule``, else its inline component's, validated."""
    component = doc.get("component") if doc.get("kind") == "operation" else None
    for loc, holder in ((("schedule",), doc), (("component", "schedule"), component)):
        if isinstance(holder, dict) and holder.get("schedule") is not None:
            raw = holder["schedule"]
            problem = schedule_kind_problem(raw, loc)
            if problem is not None:
                raise _Problems([problem])
            model = _validate(SCHEDULE_MODELS[raw["kind"]], raw, loc)
            if model.check(loc):
                raise _Problems(model.check(loc))
            return model.to_spec()
    return None


def _without_component_schedule(doc: dict) -> dict:
    component = doc.get("component")
    if not isinstance(component, dict) or "schedule" not in component:
        return {}
    return {"component": {k: v for k, v in component.items() if k != "schedule"}}


def parse_polyaxonfile_batch(text: str, *, source: str = "<string>", overrides: dict | None = None,
                             salt: str | None = None) -> list[OpSpec]:
    """Every operation of a polyaxonfile: one per combination of its ``matrix``, each with its
    params filled, ``batch`` = ``batch_id(text, overrides, salt)`` and ``batch_concurrency`` =
    ``matrix.concurrency``. A file without a matrix gives ``[spec]``, not a batch (``batch`` None).
    ``salt`` makes the batch id differ between submissions of the same file (default: random);
    pass the same salt to get the same id back."""
    return _parse(text, source, overrides, salt=salt, batch=True)


def load_polyaxonfile_batch(path: str | Path, overrides: dict | None = None, *,
                            salt: str | None = None) -> list[OpSpec]:
    """``parse_polyaxonfile_batch`` of a file; unreadable files raise ``SpecError`` too."""
    return parse_polyaxonfile_batch(_read(path), source=str(path), overrides=overrides, salt=salt)


def expand_matrix(matrix: Mapping[str, Any], *, seed: int | None = None) -> list[dict[str, Any]]:
    """The param combinations of a raw ``matrix`` mapping (as written in YAML), in order.

    grid: the cartesian product, first param slowest, cut to ``numRuns``. random: ``numRuns``
    distinct combinations drawn with ``random.Random(seed)`` (``seed`` here is used when the
    matrix has none). Raises ``SpecError`` (source ``<matrix>``, locations ``matrix.…``)."""
    try:
        model, params = _matrix(dict(matrix) if isinstance(matrix, Mapping) else matrix)
        return _combinations(model, params, seed)
    except _Problems as exc:
        raise SpecError("<matrix>", [FieldError(".".join(map(str, loc)), msg)
                                     for loc, msg in exc.problems]) from None


def batch_id(text: str, overrides: dict | None = None, salt: str | None = None) -> str:
    """``sweep-`` + 8 hex chars of the sha256 of the file text, the overrides and the salt."""
    blob = json.dumps([text, overrides or {}, salt or ""], sort_keys=True, default=str)
    return "sweep-" + hashlib.sha256(blob.encode()).hexdigest()[:8]


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(path), [FieldError("", f"cannot read the file: {exc}")]) from None


def _parse(text: str, source: str, overrides: dict | None, *, salt: str | None,
           batch: bool) -> list[OpSpec]:
    doc = _load_yaml(text, source)
    try:
        component_model, operation_model = MODELS_BY_RUN_KIND[_precheck(doc)]
        body, raw_matrix = _split_matrix(doc)
        kind = operation_model if doc["kind"] == "operation" else component_model
        problems: list[Problem] = []
        model = _collect(problems, _validate, kind, body, ())
        extra = _collect(problems, _validate, OverridesModel, {} if overrides is None else overrides,
                         ("overrides",))
        matrix = None
        if raw_matrix is not None and not batch:
            problems.append((("matrix",), "a matrix makes a batch of operations: read this file "
                                          "with load_polyaxonfile_batch (as `opsched submit` does)"))
        elif raw_matrix is not None:
            matrix = _collect(problems, _matrix, raw_matrix)
        if problems:
            raise _Problems(problems)
        fallback = _fallback_name(source)
        if matrix is None:
            specs = [_build(model, extra, fallback)]
        else:
            salt = secrets.token_hex(8) if salt is None else salt
            specs = _build_batch(model, extra, fallback, matrix, batch_id(text, overrides, salt))
    except _Problems as exc:
        raise SpecError(source, _locate(text, exc.problems)) from None
    _warn_ignored(doc, source)
    return specs


def _collect(problems: list[Problem], fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or None with its problems added to ``problems``."""
    try:
        return fn(*args)
    except _Problems as exc:
        problems.extend(exc.problems)
        return None


def component_hash(container: Container, environment: Environment,
                   replicas: list[ReplicaGroup] | tuple[()] = (), run_kind: str = "job") -> str:
    """Stable id of a component's run section, for cache and cost history.

    Recompute it from a spec with
    ``component_hash(spec.container, spec.environment, spec.replicas, spec.run_kind)``.
    A plain job hashes as it always did; other kinds add their kind and replica groups.
    """
    payload: dict[str, Any] = {"kind": "job", "container": msgspec.to_builtins(container),
                               "environment": msgspec.to_builtins(environment)}
    if run_kind != "job" or replicas:
        payload["kind"] = run_kind
        payload["replicas"] = [msgspec.to_builtins(group) for group in replicas]
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# --- YAML ---------------------------------------------------------------------------------------

class _Loader(yaml.SafeLoader):
    """Safe YAML that rejects duplicate keys instead of silently keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)):
                continue  # unhashable keys are reported by the base constructor
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _load_yaml(text: str, source: str) -> Any:
    if len(text) > MAX_CHARS:
        raise SpecError(source, [FieldError("", f"file too large (> {MAX_CHARS} characters)")])
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        where = f" at line {line}, column {column}" if mark else ""
        detail = ": ".join(p for p in (exc.context, exc.problem) if p)
        raise SpecError(source, [FieldError("", f"YAML syntax error{where}: {detail}",
                                            line, column)]) from None
    except yaml.YAMLError as exc:
        raise SpecError(source, [FieldError("", f"YAML error: {exc}")]) from None


def _locate(text: str, problems: list[Problem]) -> list[FieldError]:
    """Turn problems into FieldErrors with the line/column of the deepest existing YAML node."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        root = None
    errors = []
    for loc, msg in problems:
        mark, node = None, root
        for part in loc:
            found = _child(node, part)
            if found is None:
                break
            mark, node = found
        pos = (mark.line + 1, mark.column + 1) if mark else (None, None)
        errors.append(FieldError(".".join(str(p) for p in loc), msg, *pos))
    return sorted(errors, key=lambda e: (e.line is None, e.line or 0, e.column or 0))


def _child(node: Any, part: str | int) -> tuple[Any, Any] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return key.start_mark, value
    elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        return node.value[part].start_mark, node.value[part]
    return None


# --- validation ---------------------------------------------------------------------------------

def _precheck(doc: Any) -> str:
    """Document shape, ``kind`` and ``run.kind``: checked first, as they decide everything else.

    Returns the run kind whose models validate the document ("job" when it is missing)."""
    if not isinstance(doc, dict):
        got = "an empty document" if doc is None else f"a {type(doc).__name__}"
        raise _Problems([((), "the document must be a mapping (a Polyaxon component or "
                              f"operation), got {got}")])
    kind = doc.get("kind")
    if kind not in ("component", "operation"):
        msg = ("missing 'kind'" if kind is None else f"kind {kind!r} is not supported")
        raise _Problems([(("kind",), f"{msg}; expected 'component' or 'operation'")])
    base: Loc = ("component",) if kind == "operation" else ()
    holder = doc.get("component") if kind == "operation" else doc
    run = holder.get("run") if isinstance(holder, dict) else None
    run_kind = run.get("kind") if isinstance(run, dict) else None
    if run_kind is None:
        return "job"  # the job model then reports the missing kind
    if run_kind not in RUN_KINDS_SUPPORTED:
        known = "is not supported yet" if str(run_kind) in RUN_KINDS_KNOWN else "is unknown"
        raise _Problems([(base + ("run", "kind"),
                          f"run.kind {run_kind!r} {known}; only 'job' and 'pytorchjob'")])
    return run_kind


def _validate(model: type[BaseModel], data: Any, prefix: Loc) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _Problems([_problem(err, prefix) for err in exc.errors(include_url=False)]) from None


def _problem(err: Any, prefix: Loc) -> Problem:
    loc = prefix + tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        key = loc[-1]
        if loc == ("component", "matrix"):
            return loc, "a matrix belongs to the operation (top level), not to its component"
        if key in UNSUPPORTED:
            return loc, f"'{key}' is not supported by opsched yet"
        return loc, f"unknown field '{key}'"
    if err["type"] == "missing":
        return loc, _MISSING_HINTS.get(loc) or _MISSING_TAIL_HINTS.get(loc[-2:], "field required")
    if err["type"] in ("model_type", "dict_type", "model_attributes_type"):
        return loc, f"expected a mapping, got {type(err['input']).__name__}"
    return loc, err["msg"].removeprefix("Value error, ")


def _param_value(raw: Any) -> Any:
    """``{value: x}`` (Polyaxon's V1Param) → x; any other value is taken as the value itself."""
    if isinstance(raw, dict) and raw and set(raw) <= _PARAM_KEYS and ({"value", "ref"} & set(raw)):
        if raw.get("ref") is not None:
            raise ValueError("params that reference other runs ('ref') are not supported yet")
        return raw.get("value")
    return raw


def _params(layers: list[tuple[dict[str, Any], Loc]],
            problems: list[Problem]) -> tuple[dict[str, Any], dict[str, Loc]]:
    """Merge param layers (later wins) into their values and where each one was set."""
    values: dict[str, Any] = {}
    where: dict[str, Loc] = {}
    for raw, loc in layers:
        for name, value in raw.items():
            where[name] = loc + (name,)
            try:
                values[name] = _param_value(value)
            except ValueError as exc:
                problems.append((where[name], str(exc)))
    return values, where


# --- building the OpSpec ------------------------------------------------------------------------

def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _merged(struct: type, *parts: BaseModel | None) -> Any:
    data: dict[str, Any] = {}
    for part in parts:
        if part is not None:
            data.update(part.model_dump(by_alias=True, exclude_none=True))
    return msgspec.convert(data, struct)


def _environment(run: JobRunModel) -> Environment:
    data = run.environment.model_dump(by_alias=True, exclude_none=True)
    data["volumes"] = [*run.volumes, *data["volumes"]]
    return msgspec.convert(data, Environment)


def _container(model: ContainerModel) -> Container:
    return msgspec.convert(model.model_dump(by_alias=True), Container)


def _run_parts(run: JobRunModel | PytorchJobRunModel
               ) -> tuple[Container, Environment, list[ReplicaGroup]]:
    """The main container, the environment and the replica groups of a validated run."""
    if isinstance(run, JobRunModel):
        return _container(run.container), _environment(run), []
    replicas = []
    if run.worker is not None:
        replicas.append(ReplicaGroup(name="worker", count=_first(run.worker.replicas, 1),
                                     container=_container(run.worker.container)))
    # Polyaxon puts environment in each replica; opsched rejects it (check_run), so the
    # pytorchjob gets the default environment.
    return _container(run.master.container), Environment(), replicas


def _io_and_params(op: OperationModel | None, comp: ComponentModel, extra: OverridesModel,
                   base: Loc, problems: list[Problem],
                   swept: dict[str, Any] | None = None) -> tuple[dict, dict, dict]:
    """Params (operation, then one matrix combination, then overrides), and the inputs/outputs
    they fill. Swept values are taken as they are (never unwrapped like ``{value: x}``)."""
    params, where = _params([(op.params if op else {}, ("params",))], problems)
    for name, value in (swept or {}).items():
        params[name], where[name] = value, ("matrix", "params", name, "value")
    more, more_where = _params([(extra.params, ("overrides", "params"))], problems)
    params.update(more)
    where.update(more_where)
    inputs = resolve_io(comp.inputs, params, where, base + ("inputs",), problems, inputs=True)
    outputs = resolve_io(comp.outputs, params, where, base + ("outputs",), problems, inputs=False)
    if comp.inputs or comp.outputs:
        problems += [(where[n], f"param {n!r} is not an input or output of the component")
                     for n in params if n not in inputs and n not in _io_names(comp.outputs)]
    return params, inputs, outputs


def _io_names(ios: list[IOModel]) -> set[str]:
    return {io.name for io in ios}


def _build(model: ComponentModel | OperationModel, extra: OverridesModel, fallback: str,
           swept: dict[str, Any] | None = None) -> OpSpec:
    op = model if isinstance(model, OperationModel) else None
    comp = op.component if op else model
    base: Loc = ("component",) if op else ()
    problems = check_run(comp.run, base + ("run",))
    params, inputs, outputs = _io_and_params(op, comp, extra, base, problems, swept)
    if problems:
        raise _Problems(problems)
    layers = [m for m in (op, comp) if m is not None]

    def pick(attr: str) -> Any:  # the operation's value, else the component's
        return _first(*(getattr(m, attr) for m in layers))

    container, environment, replicas = _run_parts(comp.run)
    return OpSpec(
        name=pick("name") or fallback,
        container=container,
        project=_first(extra.project, pick("project"), "default"),
        queue=_first(extra.queue, pick("queue")),
        priority=_first(extra.priority, pick("priority"), 0),
        params=params, inputs=inputs, outputs=outputs, environment=environment,
        termination=_merged(Termination, comp.termination, op and op.termination),
        cache=_merged(Cache, comp.cache, op and op.cache),
        is_approved=pick("is_approved"),
        conditions=op.conditions if op else None,
        cost=pick("cost"),
        tags=pick("tags") or [],
        run_kind=comp.run.kind,
        component_hash=component_hash(container, environment, replicas, comp.run.kind),
        priority_class=_first(extra.priority_class, pick("priority_class")),
        preemptible=_first(extra.preemptible, pick("preemptible"), True),
        replicas=replicas,
    )


def _fallback_name(source: str) -> str:
    stem = Path(source).stem
    return stem if not source.startswith("<") and valid_name(stem) else "operation"


def _warn_ignored(doc: dict, source: str) -> None:
    component = doc.get("component")
    keys = set(doc) | (set(component) if isinstance(component, dict) else set())
    found = sorted(k for k in keys if k in BEHAVIOUR_IGNORED)
    if found:
        hint = "; `opsched schedule` runs a file on its schedule" if "schedule" in found else ""
        warnings.warn(f"{source}: ignoring {', '.join(found)} (not supported by opsched yet){hint}",
                      SpecWarning, stacklevel=3)


# --- matrix (sweeps) ----------------------------------------------------------------------------

Matrix = tuple[GridModel | RandomModel, dict[str, HpParam]]


def _split_matrix(doc: dict) -> tuple[dict, Any]:
    """The document without its top-level ``matrix``, and the matrix (None if absent or empty)."""
    if "matrix" not in doc:
        return doc, None
    return {k: v for k, v in doc.items() if k != "matrix"}, doc["matrix"]


def _matrix(raw: Any) -> Matrix:
    """Validate a raw matrix: its model and each swept param's values or sampler."""
    if not isinstance(raw, dict):
        raise _Problems([(("matrix",), f"expected a mapping, got {type(raw).__name__}")])
    kind = raw.get("kind")
    if kind not in MATRIX_KINDS_SUPPORTED:
        what = ("missing 'kind'" if kind is None else
                f"kind {kind!r} is not supported yet" if str(kind) in MATRIX_KINDS_KNOWN else
                f"kind {kind!r} is unknown")
        raise _Problems([(("matrix", "kind"), f"{what}; expected 'grid' or 'random'")])
    model = _validate(MATRIX_MODELS[kind], raw, ("matrix",))
    if not model.params:
        raise _Problems([(("matrix", "params"), "a matrix needs at least one param")])
    problems: list[Problem] = []
    params = {name: hp_param(name, p, ("matrix", "params", name), problems, kind)
              for name, p in model.params.items()}
    if problems:
        raise _Problems(problems)
    return model, params  # type: ignore[return-value]


def _combinations(model: GridModel | RandomModel, params: dict[str, HpParam],
                  default_seed: int | None = None) -> list[dict[str, Any]]:
    names = list(params)
    if isinstance(model, GridModel):
        total = math.prod(len(p.values) for p in params.values())  # type: ignore[arg-type]
        count = min(total, model.num_runs or total)
        if count > MAX_BATCH:
            where = ("matrix", "numRuns") if model.num_runs else ("matrix",)
            raise _Problems([(where, f"the grid makes {count} operations; at most {MAX_BATCH} "
                                     "per batch (set numRuns, or split the sweep)")])
        product = itertools.product(*(p.values for p in params.values()))  # type: ignore[misc]
        return [dict(zip(names, values)) for values in itertools.islice(product, count)]
    if model.num_runs > MAX_BATCH:
        raise _Problems([(("matrix", "numRuns"), f"{model.num_runs} operations; at most "
                                                 f"{MAX_BATCH} per batch")])
    rng = random.Random(model.seed if model.seed is not None else default_seed)
    if all(p.discrete for p in params.values()):
        # Distinct combinations without replacement; all of them if numRuns exceeds the space.
        sizes = [len(p.values) for p in params.values()]  # type: ignore[arg-type]
        total = math.prod(sizes)
        return [_decode(index, names, params, sizes)
                for index in rng.sample(range(total), min(model.num_runs, total))]
    combos: dict[str, dict[str, Any]] = {}
    for _ in range(model.num_runs * 20):  # distributions repeat only when quantized/pchoice
        combo = {name: p.draw(rng) for name, p in params.items()}
        combos.setdefault(json.dumps(combo, sort_keys=True, default=str), combo)
        if len(combos) == model.num_runs:
            break
    return list(combos.values())


def _decode(index: int, names: list[str], params: dict[str, HpParam],
            sizes: list[int]) -> dict[str, Any]:
    """The ``index``-th combination of the grid (first param slowest)."""
    picks = {}
    for name, size in zip(reversed(names), reversed(sizes)):
        index, i = divmod(index, size)
        picks[name] = params[name].values[i]  # type: ignore[index]
    return {name: picks[name] for name in names}


def _build_batch(model: ComponentModel | OperationModel, extra: OverridesModel, fallback: str,
                 matrix: Matrix, batch: str) -> list[OpSpec]:
    """One OpSpec per combination of the matrix, all in ``batch``."""
    matrix_model, params = matrix
    fixed = model.params if isinstance(model, OperationModel) else {}
    problems: list[Problem] = []
    for name in params:
        if name in fixed:
            problems.append((("matrix", "params", name), f"param {name!r} is also set in params: "
                                                         "a param is either fixed or swept"))
        if name in extra.params:
            problems.append((("overrides", "params", name),
                             f"param {name!r} is swept by the matrix; it cannot be overridden"))
    if problems:
        raise _Problems(problems)
    specs = [_build(model, extra, fallback, swept=combo)
             for combo in _combinations(matrix_model, params)]
    return [msgspec.structs.replace(spec, batch=batch, batch_concurrency=matrix_model.concurrency)
            for spec in specs]
