"""Sweeps: the trials of a ``matrix`` and the batch of operations they make.

Matrix (sweeps: Polyaxon's ``matrix`` on the operation, or at the top of a component file)
  * ``kind: grid`` (every combination, first param slowest; ``numRuns`` keeps the first N),
    ``kind: random`` (``numRuns`` required: that many distinct combinations, drawn with
    ``random.Random(seed)``; if every param is discrete and the space is smaller, all of it), or
    ``kind: mapping`` (``values``: a non-empty list of trials, each a mapping of params taken as
    written; entries may name different params, as in Polyaxon; a date or datetime YAML reads there
    becomes its ISO string, as Polyaxon passes it). ``concurrency`` (>= 1) becomes every op's
    ``batch_concurrency`` (admission enforces it). The kinds that need a tuner (hyperband, bayes,
    hyperopt, iterative, tuner) are refused, saying so; so is ``earlyStopping`` (``keys``). At most
    ``MAX_BATCH`` (1000) operations per matrix.
  * ``params: {name: {kind, value}}`` (grid, random): see ``hyperparams`` (and ``dates``).
  * Each trial fills the op's params (the operation's own params and overrides may not name a swept
    or mapped param), is checked against the component's inputs like any param (errors at
    ``matrix.params.<name>.value``, or ``matrix.values[i].<name>`` for a mapping; a problem a trial
    causes elsewhere, e.g. a required input an entry leaves out, names the trial), and every op of
    the file gets the same ``batch`` id (``sweep-`` + 8 hex chars of a hash of the text, the
    overrides and a salt), ``iteration`` = its index and the name ``<name>-<iteration>``
    (``rules.trial_names``). ``cache`` is left as written. The single-op ``parse_polyaxonfile``
    refuses a file with a matrix.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from collections.abc import Mapping
from typing import Any

import msgspec

from opsched.polyaxonfile.convert import Trial, build_spec
from opsched.polyaxonfile.dates import iso
from opsched.polyaxonfile.errors import FieldError, Loc, Problem, Problems, SpecError
from opsched.polyaxonfile.fields import valid_name
from opsched.polyaxonfile.hyperparams import HpParam, hp_param
from opsched.polyaxonfile.models_matrix import (
    HP_INPUT_TYPES,
    MATRIX_KINDS_SUPPORTED,
    MATRIX_KINDS_TUNED,
    MATRIX_MODELS,
    MAX_BATCH,
    GridModel,
    MappingModel,
    MatrixModel,
)
from opsched.polyaxonfile.models_operation import (
    ComponentModel,
    OperationModel,
    OverridesModel,
)
from opsched.polyaxonfile.validation import validate
from opsched.proto.spec import OpSpec

Matrix = tuple[MatrixModel, dict[str, HpParam]]  # a mapping has no swept params: {}
_KINDS = "expected 'grid', 'random' or 'mapping'"


def split_matrix(doc: dict) -> tuple[dict, Any]:
    """The document without its top-level ``matrix``, and the matrix (None if absent or empty)."""
    if "matrix" not in doc:
        return doc, None
    return {k: v for k, v in doc.items() if k != "matrix"}, doc["matrix"]


def read_matrix(raw: Any) -> Matrix:
    """Validate a raw matrix: its model, and each swept param's values or sampler (each mapped param's
    name)."""
    if not isinstance(raw, dict):
        raise Problems([(("matrix",), f"expected a mapping, got {type(raw).__name__}")])
    kind = raw.get("kind")
    if kind is None:
        raise Problems([(("matrix", "kind"), f"missing 'kind'; {_KINDS}")])
    if str(kind) in MATRIX_KINDS_TUNED:
        raise Problems([(("matrix", "kind"), f"kind {kind!r} needs a tuner, which opsched does not have yet; "
                                             "use grid, random or mapping")])
    if kind not in MATRIX_KINDS_SUPPORTED:
        raise Problems([(("matrix", "kind"), f"kind {kind!r} is unknown; {_KINDS}")])
    model = validate(MATRIX_MODELS[kind], raw, ("matrix",))
    if isinstance(model, MappingModel):
        _check_mapping(model)
        return model, {}
    if not model.params:
        raise Problems([(("matrix", "params"), "a matrix needs at least one param")])
    problems: list[Problem] = []
    params = {name: hp_param(name, p, ("matrix", "params", name), problems, kind)
              for name, p in model.params.items()}
    if problems:
        raise Problems(problems)
    return model, params  # type: ignore[return-value]


def _check_mapping(model: MappingModel) -> None:
    """At least one entry, at most ``MAX_BATCH``, and valid param names."""
    if not model.values:
        raise Problems([(("matrix", "values"), "a mapping needs at least one entry (one trial's params)")])
    if len(model.values) > MAX_BATCH:
        raise Problems([(("matrix", "values"), f"{len(model.values)} entries; at most {MAX_BATCH} "
                                               "operations per batch (split the sweep)")])
    problems: list[Problem] = [(("matrix", "values", i, name), f"invalid param name {name!r}: use letters, "
                                                                "digits, '-' and '_'")
                               for i, entry in enumerate(model.values) for name in entry if not valid_name(name)]
    if problems:
        raise Problems(problems)


def _grid_values(param: HpParam) -> list[Any]:
    """A grid's param's values (a grid refuses a distribution: ``hp_param``)."""
    assert param.values is not None
    return param.values


def combinations(model: MatrixModel, params: dict[str, HpParam],
                 default_seed: int | None = None) -> list[dict[str, Any]]:
    """Each trial's params, in order."""
    if isinstance(model, MappingModel):
        return [iso(entry) for entry in model.values]
    names = list(params)
    if isinstance(model, GridModel):
        grid = [_grid_values(p) for p in params.values()]
        total = math.prod(len(values) for values in grid)
        count = min(total, model.num_runs or total)
        if count > MAX_BATCH:
            where = ("matrix", "numRuns") if model.num_runs else ("matrix",)
            raise Problems([(where, f"the grid makes {count} operations; at most {MAX_BATCH} "
                                    "per batch (set numRuns, or split the sweep)")])
        product = itertools.product(*grid)
        return [dict(zip(names, values)) for values in itertools.islice(product, count)]
    if model.num_runs > MAX_BATCH:
        raise Problems([(("matrix", "numRuns"), f"{model.num_runs} operations; at most "
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


def _where(model: MatrixModel, iteration: int, combo: dict[str, Any]) -> dict[str, Loc]:
    """Where each param of a trial was written."""
    if isinstance(model, MappingModel):
        return {name: ("matrix", "values", iteration, name) for name in combo}
    return {name: ("matrix", "params", name, "value") for name in combo}


def _fixed_or_swept(model: ComponentModel | OperationModel, extra: OverridesModel,
                    matrix_model: MatrixModel, trials: list[dict[str, Any]]) -> list[Problem]:
    """A param is either fixed (the operation's params, the overrides) or swept: each one both, once."""
    fixed = model.params if isinstance(model, OperationModel) else {}
    problems: list[Problem] = []
    seen: set[str] = set()
    for i, combo in enumerate(trials):
        for name in combo:
            if name in seen:
                continue
            seen.add(name)
            if name in fixed:
                at: Loc = (("matrix", "values", i, name) if isinstance(matrix_model, MappingModel)
                           else ("matrix", "params", name))
                problems.append((at, f"param {name!r} is also set in params: a param is either fixed or swept"))
            if name in extra.params:
                problems.append((("overrides", "params", name),
                                 f"param {name!r} is swept by the matrix; it cannot be overridden"))
    return problems


def _input_types(model: ComponentModel | OperationModel, params: dict[str, HpParam]) -> list[Problem]:
    """A date range fills an input (or output) of type date/datetime, as Polyaxon requires."""
    comp = model.component if isinstance(model, OperationModel) else model
    ios = {io.name: (section, io) for section, group in (("input", comp.inputs), ("output", comp.outputs))
           for io in group}
    problems: list[Problem] = []
    for name, param in params.items():
        wanted = HP_INPUT_TYPES.get(param.kind)
        if wanted is None or name not in ios or ios[name][1].type == wanted:
            continue
        section, io = ios[name]
        has = f"has type {io.type!r}" if io.type else "has no type"
        problems.append((("matrix", "params", name, "kind"),
                         f"a {param.kind} fills an input of type {wanted} (as in Polyaxon); {section} "
                         f"{name!r} {has}: set `type: {wanted}`"))
    return problems


def _summary(combo: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in combo.items())
    return text if len(text) <= 80 else text[:77] + "..."


def build_batch(model: ComponentModel | OperationModel, extra: OverridesModel, fallback: str,
                matrix: Matrix, batch: str) -> list[OpSpec]:
    """One OpSpec per trial of the matrix, all in ``batch``; the problems of every trial at once
    (the first of each location)."""
    matrix_model, params = matrix
    trials = combinations(matrix_model, params)
    where = [_where(matrix_model, i, combo) for i, combo in enumerate(trials)]
    problems = _fixed_or_swept(model, extra, matrix_model, trials) + _input_types(model, params)
    if problems:
        raise Problems(problems)
    specs: list[OpSpec] = []
    found: dict[Loc, str] = {}
    for i, combo in enumerate(trials):
        try:
            specs.append(build_spec(model, extra, fallback, Trial(i, len(trials), combo, where[i])))
        except Problems as exc:
            for loc, msg in exc.problems:
                if loc[:1] != ("matrix",):
                    msg = f"{msg} (in trial {i}: {_summary(combo) or 'no params'})"
                found.setdefault(loc, msg)
    if found:
        raise Problems(list(found.items()))
    return [msgspec.structs.replace(spec, batch=batch, batch_concurrency=matrix_model.concurrency)
            for spec in specs]


def expand_matrix(matrix: Mapping[str, Any], *, seed: int | None = None) -> list[dict[str, Any]]:
    """The param combinations of a raw ``matrix`` mapping (as written in YAML), in order.

    grid: the cartesian product, first param slowest, cut to ``numRuns``. random: ``numRuns``
    distinct combinations drawn with ``random.Random(seed)`` (``seed`` here is used when the
    matrix has none). mapping: its ``values``. Raises ``SpecError`` (source ``<matrix>``,
    locations ``matrix.…``)."""
    try:
        model, params = read_matrix(dict(matrix) if isinstance(matrix, Mapping) else matrix)
        return combinations(model, params, seed)
    except Problems as exc:
        raise SpecError("<matrix>", [FieldError(".".join(map(str, loc)), msg)
                                     for loc, msg in exc.problems]) from None


def batch_id(text: str, overrides: dict | None = None, salt: str | None = None) -> str:
    """``sweep-`` + 8 hex chars of the sha256 of the file text, the overrides and the salt."""
    blob = json.dumps([text, overrides or {}, salt or ""], sort_keys=True, default=str)
    return "sweep-" + hashlib.sha256(blob.encode()).hexdigest()[:8]
