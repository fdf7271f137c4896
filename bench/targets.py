"""The range checker: expected ranges of a run's figures (bench/targets.yaml, shaped like Kueue's
rangespec), checked against the medians over the rounds.

    targets:
      b_pipeline_throughput: {min: 0.5, note: "(b) ops/s ≥ 0.5 × publish ceiling ÷ 6"}
      decisions.c_10k.decision_p99_us: {max: 1000}

A key without a dot names a ratio of ``bench.report.RATIOS``; a dotted key names a figure of the
summary. A figure that was not measured (scenario not run, or failed) is reported, not failed.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bench.generator import field_path

DEFAULT = Path(__file__).resolve().parent / "targets.yaml"
Status = Literal["pass", "fail", "missing"]


class TargetsError(ValueError):
    """A targets file that cannot be read or does not validate."""


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    min: float | None = None
    max: float | None = None
    note: str = ""

    @model_validator(mode="after")
    def _bounds(self) -> "Target":
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def met(self, value: float) -> bool:
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def text(self) -> str:
        if self.min is not None and self.max is not None:
            return f"{_num(self.min)} – {_num(self.max)}"
        if self.min is not None:
            return f"≥ {_num(self.min)}"
        assert self.max is not None  # _bounds: min, max or both
        return f"≤ {_num(self.max)}"


class Targets(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    targets: Annotated[dict[str, Target], Field(min_length=1)]


def _num(v: float) -> str:
    return f"{v:g}"


def parse(text: str, source: str = "<string>", known: Iterable[str] | None = None) -> Targets:
    """Validate a targets document; ``known``: the ratio names a key without a dot must be one of."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TargetsError(f"{source}: not valid YAML: {exc}") from None
    try:
        spec = Targets.model_validate(doc)
    except ValidationError as exc:
        lines = [f"{field_path(e['loc'])}: " + ("unknown field" if e["type"] == "extra_forbidden"
                                           else e["msg"].removeprefix("Value error, "))
                 for e in exc.errors(include_url=False)]
        raise TargetsError(f"{source}: invalid targets:\n  " + "\n  ".join(lines)) from None
    if known is not None:
        names = set(known)
        unknown = sorted(k for k in spec.targets if "." not in k and k not in names)
        if unknown:
            raise TargetsError(f"{source}: targets.{unknown[0]}: no such ratio (known: {', '.join(sorted(names))})")
    return spec


def load(path: Path | str = DEFAULT, known: Iterable[str] | None = None) -> Targets:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise TargetsError(f"{path}: {exc.strerror or exc}") from None
    return parse(text, str(path), known)


@dataclass(frozen=True)
class Verdict:
    name: str
    target: Target
    median: float
    low: float
    high: float
    status: Status


def _finite(v) -> float:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else float("nan")


def check(spec: Targets, figures: dict[str, dict]) -> list[Verdict]:
    """Each target against ``figures[name]`` (``{"median", "min", "max"}``), in the file's order."""
    out = []
    for name, target in spec.targets.items():
        fig = figures.get(name) or {}
        med, lo, hi = (_finite(fig.get(k)) for k in ("median", "min", "max"))
        status: Status = "missing" if med != med else ("pass" if target.met(med) else "fail")
        out.append(Verdict(name, target, med, lo, hi, status))
    return out


def failed(verdicts: Iterable[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.status == "fail"]


def lines(verdicts: list[Verdict]) -> list[str]:
    """One line per target: ``PASS name  median (min – max)  target  note``."""
    from bench.report import fmt

    width = max((len(v.name) for v in verdicts), default=0)
    out = []
    for v in verdicts:
        word = {"pass": "pass", "fail": "FAIL", "missing": "n/a "}[v.status]
        value = "not measured" if v.status == "missing" else f"{fmt(v.median)} ({fmt(v.low)} – {fmt(v.high)})"
        out.append(f"{word}  {v.name:<{width}}  {value}  target {v.target.text()}"
                   + (f"  — {v.target.note}" if v.target.note else ""))
    return out


def as_json(verdicts: list[Verdict]) -> list[dict]:
    return [{"name": v.name, "status": v.status, "median": v.median, "min": v.low, "max": v.high,
             "target_min": v.target.min, "target_max": v.target.max, "note": v.target.note} for v in verdicts]
