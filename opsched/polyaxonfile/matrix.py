"""Sweeps: the combinations of a ``matrix`` and the batch of operations they make.

Matrix (sweeps: Polyaxon's ``matrix`` on the operation, or at the top of a component file)
  * ``kind: grid`` (every combination, first param slowest; ``numRuns`` keeps the first N) or
    ``kind: random`` (``numRuns`` required: that many distinct combinations, drawn with
    ``random.Random(seed)``; if every param is discrete and the space is smaller, all of it).
    ``concurrency`` (>= 1) becomes every op's ``batch_concurrency`` (admission enforces it).
    Other kinds (mapping, hyperband, bayes, hyperopt, iterative, tuner) are errors, and so is
    ``earlyStopping`` (not supported yet). At most ``MAX_BATCH`` (1000) operations per matrix.
  * ``params: {name: {kind, value}}``: see ``hyperparams``.
  * Each combination fills the op's params (the operation's own params and overrides may not
    name a swept param), is checked against the component's inputs like any param (errors at
    ``matrix.params.<name>.value``), and every op of the file gets the same ``batch`` id
    (``sweep-`` + 8 hex chars of a hash of the text, the overrides and a salt). ``cache`` is left
    as written. The single-op ``parse_polyaxonfile`` refuses a file with a matrix.
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

from opsched.polyaxonfile.convert import build_spec
from opsched.polyaxonfile.errors import FieldError, Problem, Problems, SpecError
from opsched.polyaxonfile.hyperparams import HpParam, hp_param
from opsched.polyaxonfile.models_matrix import (
    MATRIX_KINDS_KNOWN,
    MATRIX_KINDS_SUPPORTED,
    MATRIX_MODELS,
    MAX_BATCH,
    GridModel,
    RandomModel,
)
from opsched.polyaxonfile.models_operation import (
    ComponentModel,
    OperationModel,
    OverridesModel,
)
from opsched.polyaxonfile.validation import validate
from opsched.proto.spec import OpSpec

Matrix = tuple[GridModel | RandomModel, dict[str, HpParam]]


def split_matrix(doc: dict) -> tuple[dict, Any]:
    """The document without its top-level ``matrix``, and the matrix (None if absent or empty)."""
    if "matrix" not in doc:
        return doc, None
    return {k: v for k, v in doc.items() if k != "matrix"}, doc["matrix"]


def read_matrix(raw: Any) -> Matrix:
    """Validate a raw matrix: its model and each swept param's values or sampler."""
    if not isinstance(raw, dict):
        raise Problems([(("matrix",), f"expected a mapping, got {type(raw).__name__}")])
    kind = raw.get("kind")
    if kind not in MATRIX_KINDS_SUPPORTED:
        what = ("missing 'kind'" if kind is None else
                f"kind {kind!r} is not supported yet" if str(kind) in MATRIX_KINDS_KNOWN else
                f"kind {kind!r} is unknown")
        raise Problems([(("matrix", "kind"), f"{what}; expected 'grid' or 'random'")])
    model = validate(MATRIX_MODELS[kind], raw, ("matrix",))
    if not model.params:
        raise Problems([(("matrix", "params"), "a matrix needs at least one param")])
    problems: list[Problem] = []
    params = {name: hp_param(name, p, ("matrix", "params", name), problems, kind)
              for name, p in model.params.items()}
    if problems:
        raise Problems(problems)
    return model, params  # type: ignore[return-value]


def _grid_values(param: HpParam) -> list[Any]:
    """A grid's param's values (a grid refuses a distribution: ``hp_param``)."""
    assert param.values is not None
    return param.values


def combinations(model: GridModel | RandomModel, params: dict[str, HpParam],
                 default_seed: int | None = None) -> list[dict[str, Any]]:
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


def build_batch(model: ComponentModel | OperationModel, extra: OverridesModel, fallback: str,
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
        raise Problems(problems)
    specs = [build_spec(model, extra, fallback, swept=combo, iteration=i)
             for i, combo in enumerate(combinations(matrix_model, params))]
    return [msgspec.structs.replace(spec, batch=batch, batch_concurrency=matrix_model.concurrency)
            for spec in specs]


def expand_matrix(matrix: Mapping[str, Any], *, seed: int | None = None) -> list[dict[str, Any]]:
    """The param combinations of a raw ``matrix`` mapping (as written in YAML), in order.

    grid: the cartesian product, first param slowest, cut to ``numRuns``. random: ``numRuns``
    distinct combinations drawn with ``random.Random(seed)`` (``seed`` here is used when the
    matrix has none). Raises ``SpecError`` (source ``<matrix>``, locations ``matrix.…``)."""
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
