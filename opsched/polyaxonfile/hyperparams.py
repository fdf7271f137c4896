"""The values (discrete kinds) or the sampler (distributions) of one swept param of a matrix.

  * ``params: {name: {kind, value}}``. Discrete kinds (grid and random): ``choice`` (a list),
    ``range`` [start, stop, step] (stop excluded; ints stay ints), ``linspace`` [start, stop, num],
    ``logspace`` [start, stop, num(, base=10)] (base ** linspace), ``geomspace`` [start, stop,
    num], and the date ranges of Polyaxon's backfills (``dates``). Distributions (random only), as
    Polyaxon's hypertune draws them: ``pchoice`` [[value, p], ...] (p sum to 1),
    ``uniform``/``loguniform`` [low, high] (loguniform is exp(uniform(low, high)): the bounds are
    natural logs), ``normal``/``lognormal`` [loc, scale], and their quantized ``q…`` forms with a
    third number q (floor(x / q) * q). A value is a list, a mapping ({start, stop, step}, {low,
    high}, ...) or a string ``"1:10:2"`` (not for the date ranges). Computed floats are tidied to 12
    significant digits. (That a ``daterange``/``datetimerange`` fills an input of type
    ``date``/``datetime``, as in Polyaxon, is checked by ``matrix``, which knows the component.)
"""
from __future__ import annotations

import math
from typing import Any

from opsched.polyaxonfile.dates import date_range
from opsched.polyaxonfile.errors import Loc, Problem
from opsched.polyaxonfile.fields import valid_name
from opsched.polyaxonfile.models_matrix import (
    HP_DISCRETE,
    HP_DISTRIBUTIONS,
    MAX_VALUES,
    HpParamModel,
)


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


def spelled_out(value: Any, required: tuple[str, ...], optional: tuple[str, ...] = (), *,
                colons: bool = True, noun: str = "numbers") -> dict[str, Any]:
    """Polyaxon's spellings of a range: ``[a, b, c]``, ``{k: v}`` and (``colons``) ``"a:b:c"`` →
    {key: value as written}; ``noun`` names what the list holds in the message of a wrong count."""
    keys = required + optional
    spelled = f"[{', '.join(keys)}]"
    forms = "a list, a mapping or a string 'a:b:c'" if colons else "a list or a mapping"
    if isinstance(value, str) and colons:
        value = value.split(":")
    if isinstance(value, (list, tuple)):
        if not len(required) <= len(value) <= len(keys):
            count = f"{len(required)}" + (f" or {len(keys)}" if optional else "")
            raise ValueError(f"expected {count} {noun} {spelled}, got {len(value)}")
        return dict(zip(keys, value))
    if isinstance(value, dict):
        unknown = [k for k in value if k not in keys]
        missing = [k for k in required if k not in value]
        if unknown or missing:
            what = (f"unknown key {unknown[0]!r}" if unknown else f"missing {missing[0]!r}")
            raise ValueError(f"{what}; expected {spelled} ({forms})")
        return dict(value)
    raise ValueError(f"expected {spelled} as {forms}, got {type(value).__name__}")


def _fields(value: Any, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """A numeric range in any of Polyaxon's spellings → {key: number}."""
    return {k: _number(v, k) for k, v in spelled_out(value, required, optional).items()}


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
        problems.append((loc + ("kind",), f"kind {kind!r} is unknown; expected one of "
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
        if kind in ("daterange", "datetimerange"):
            return HpParam(kind, values=date_range(spelled_out(param.value, ("start", "stop", "step"), colons=False,
                                                               noun="values"), kind, MAX_VALUES))
        if kind in HP_DISCRETE:
            return HpParam(kind, values=_space(param.value, kind))
        return HpParam(kind, draw=_distribution(kind, param.value))
    except ValueError as exc:
        problems.append((loc + ("value",), str(exc)))
        return None
