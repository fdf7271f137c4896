"""Models of Polyaxon's ``matrix`` (V1GridSearch, V1RandomSearch and V1Mapping), and the limits of a sweep.

``matrix`` expands a matrix into trials; ``hyperparams`` turns one swept param into its values.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from opsched.polyaxonfile.fields import Int, Model

# --- matrix (sweeps): Polyaxon's V1GridSearch, V1RandomSearch and V1Mapping ----------------------
#
# ``matrix: {kind: grid|random, params: {name: {kind, value}}, concurrency, numRuns, seed}`` or
# ``matrix: {kind: mapping, values: [{name: value, ...}, ...], concurrency}``. The models check the
# shape; ``hp_param`` turns one param into its values (discrete kinds) or a sampler (distributions),
# reporting problems at ``matrix.params.<name>.kind`` / ``.value``. ``earlyStopping`` is refused
# (``keys.UNSUPPORTED``).

MATRIX_KINDS_SUPPORTED = ("grid", "random", "mapping")
MATRIX_KINDS_TUNED = frozenset({"hyperband", "bayes", "hyperopt", "iterative", "tuner"})  # need a tuner
HP_DISCRETE = ("choice", "range", "linspace", "logspace", "geomspace", "daterange", "datetimerange")
HP_DISTRIBUTIONS = ("pchoice", "uniform", "quniform", "loguniform", "qloguniform", "normal",
                    "qnormal", "lognormal", "qlognormal")
HP_INPUT_TYPES = {"daterange": "date", "datetimerange": "datetime"}  # the input type Polyaxon requires
MAX_BATCH = 1000  # operations one matrix may make
MAX_VALUES = 10_000  # values one discrete param may generate
PositiveInt = Annotated[Int, Field(ge=1)]


class HpParamModel(Model):
    """One swept param: ``{kind: choice, value: [1, 2]}``; the value is checked by ``hp_param``."""

    kind: str
    value: Any


class _Concurrent(Model):
    concurrency: PositiveInt | None = None  # at most this many of the batch run at once


class _Search(_Concurrent):
    params: dict[str, HpParamModel]


class GridModel(_Search):
    """Every combination of the params' discrete values (first param slowest); ``numRuns``
    keeps the first N."""

    kind: Literal["grid"]
    num_runs: PositiveInt | None = None


class RandomModel(_Search):
    """``numRuns`` distinct combinations sampled from the params (discrete values uniformly,
    distributions by their law); ``seed`` makes the draw reproducible."""

    kind: Literal["random"]
    num_runs: PositiveInt
    seed: Int | None = None


class MappingModel(_Concurrent):
    """An explicit list of trials: each entry of ``values`` is one trial's params, taken as written
    (entries may name different params, as in Polyaxon)."""

    kind: Literal["mapping"]
    values: list[dict[str, Any]]


MatrixModel = GridModel | RandomModel | MappingModel
MATRIX_MODELS: dict[str, type[MatrixModel]] = {"grid": GridModel, "random": RandomModel,
                                               "mapping": MappingModel}
