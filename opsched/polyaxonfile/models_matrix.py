"""Models of Polyaxon's ``matrix`` (V1GridSearch and V1RandomSearch), and the limits of a sweep.

``matrix`` expands a matrix into combinations; ``hyperparams`` turns one swept param into its values.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from opsched.polyaxonfile.fields import Int, Model

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
