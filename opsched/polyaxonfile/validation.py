"""Validation: the document's shape and kinds first, then a model; every problem is located by path.

  * ``kind: component`` with ``run: {kind: job, container, environment, volumes}``, a distributed run
    (``pytorchjob``, ``tfjob``, ``mpijob``, ``xgbjob``, ``paddlejob``, ``mxjob``: ``models_run``) or
    ``run: {kind: service, ports, replicas, ...}``, or ``kind: operation`` with an inline ``component:`` (a
    ``pathRef``/``hubRef`` is replaced by the component it names before: ``references``). Other run kinds (dag, ...)
    are errors ("not supported yet; only ..."); so is an operation without a component. ``OpSpec.run_kind`` is the
    run kind.

Unknown keys are errors ("unknown field"), with the closest known key of that place when one is close
(``unknown field 'comand'; did you mean 'command'?``, case first: ``nodeselector`` -> ``nodeSelector``), and
keys of ``keys.UNSUPPORTED`` are errors saying they are not supported yet; a missing required section gets a
hint of what it should hold.
"""
from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from opsched.polyaxonfile.errors import Loc, Problem, Problems
from opsched.polyaxonfile.keys import (
    REFUSED_MESSAGES,
    RUN_KINDS_KNOWN,
    RUN_KINDS_SUPPORTED,
    UNSUPPORTED,
)

_RUN_HINT = ("a 'run' section with 'kind: job' (or a distributed kind: pytorchjob, tfjob, mpijob, xgbjob, paddlejob, "
             "mxjob; or 'kind: service') is required")
_MISSING_HINTS = {
    ("component",): "a component is required: inline, or named by a pathRef or a hubRef (dagRef and urlRef "
                    "are not supported)",
    ("run",): _RUN_HINT,
    ("component", "run"): _RUN_HINT,
    ("matrix", "numRuns"): "a random search needs numRuns (how many operations to sample)",
    ("matrix", "params"): "a matrix needs params: {name: {kind, value}}",
    ("matrix", "values"): "a mapping needs values: a list of {param: value, ...}, one trial each",
}
# Missing keys recognised by the end of their path (under "run" or "component.run").
_MISSING_TAIL_HINTS = {
    ("run", "master"): "a pytorchjob or an xgbjob needs a 'master' replica: its container is the main one",
    ("run", "launcher"): "an mpijob needs a 'launcher' replica: its container is the main one",
    ("master", "container"): "a 'container' is required",
    ("worker", "container"): "a 'container' is required",
    ("run", "ports"): "a service needs 'ports': the ports it serves on (e.g. [8888]), its Service's",
}


def precheck(doc: Any) -> str:
    """Document shape, ``kind`` and ``run.kind``: checked first, as they decide everything else.

    Returns the run kind whose models validate the document ("job" when it is missing)."""
    if not isinstance(doc, dict):
        got = "an empty document" if doc is None else f"a {type(doc).__name__}"
        raise Problems([((), "the document must be a mapping (a Polyaxon component or "
                             f"operation), got {got}")])
    kind = doc.get("kind")
    if kind not in ("component", "operation"):
        msg = ("missing 'kind'" if kind is None else f"kind {kind!r} is not supported")
        raise Problems([(("kind",), f"{msg}; expected 'component' or 'operation'")])
    base: Loc = ("component",) if kind == "operation" else ()
    holder = doc.get("component") if kind == "operation" else doc
    run = holder.get("run") if isinstance(holder, dict) else None
    run_kind = run.get("kind") if isinstance(run, dict) else None
    if run_kind is None:
        return "job"  # the job model then reports the missing kind
    if run_kind not in RUN_KINDS_SUPPORTED:
        known = "is not supported yet" if str(run_kind) in RUN_KINDS_KNOWN else "is unknown"
        raise Problems([(base + ("run", "kind"),
                         f"run.kind {run_kind!r} {known}; only "
                         f"{', '.join(repr(k) for k in RUN_KINDS_SUPPORTED[:-1])} and {RUN_KINDS_SUPPORTED[-1]!r}")])
    return run_kind


def validate(model: type[BaseModel], data: Any, prefix: Loc) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Problems([_problem(err, prefix, model) for err in exc.errors(include_url=False)]) from None


def _models_in(annotation: Any) -> list[Any]:
    """The pydantic models an annotation holds: itself, or inside Optional/Union/list/dict/Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _models_in(args[0])
    if origin in (typing.Union, types.UnionType, list, tuple, set, frozenset):
        return [m for a in args for m in _models_in(a)]
    if origin is dict and len(args) == 2:
        return [_DictOf(args[1])]
    return []


class _DictOf:
    """A step through a mapping: any key, into its value."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _keys_of(model: type[BaseModel]) -> dict[str, Any]:
    """A model's keys as a file writes them (its aliases) -> their annotations."""
    return {(f.alias or name): f.annotation for name, f in model.model_fields.items()}


def known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys a file may write at ``loc`` (a path of keys and list indices, under ``model``)."""
    current: list[Any] = [model]
    for step in loc:
        following: list[Any] = []
        for m in current:
            if isinstance(m, _DictOf):
                following += _models_in(m.value)
            elif isinstance(step, str) and step in _keys_of(m):
                following += _models_in(_keys_of(m)[step])
            elif isinstance(step, int) or step not in _keys_of(m):
                following.append(m)  # a list index, or a union member's tag in pydantic's path: the same place
        current = following
    return sorted({k for m in current if not isinstance(m, _DictOf) for k in _keys_of(m)})


def did_you_mean(key: str, known: list[str]) -> str | None:
    """The known key ``key`` most likely meant: the same but for case, else the closest (none when nothing
    is close)."""
    same = [k for k in known if k.lower() == key.lower()]
    if same:
        return same[0]
    close = difflib.get_close_matches(key, known, 1, 0.75)
    return close[0] if close else None


def _problem(err: Any, prefix: Loc, model: type[BaseModel] | None = None) -> Problem:
    loc = prefix + tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        key = loc[-1]
        if loc == ("component", "matrix"):
            return loc, "a matrix belongs to the operation (top level), not to its component"
        if key in REFUSED_MESSAGES:
            return loc, REFUSED_MESSAGES[key]
        if key in UNSUPPORTED:
            return loc, f"'{key}' is not supported by opsched yet"
        known = known_keys(model, tuple(err["loc"])[:-1]) if model is not None else []
        guess = did_you_mean(str(key), known)
        return loc, f"unknown field '{key}'" + (f"; did you mean '{guess}'?" if guess else "")
    if err["type"] == "missing":
        return loc, _MISSING_HINTS.get(loc) or _MISSING_TAIL_HINTS.get(loc[-2:], "field required")
    if err["type"] in ("model_type", "dict_type", "model_attributes_type"):
        return loc, f"expected a mapping, got {type(err['input']).__name__}"
    return loc, err["msg"].removeprefix("Value error, ")


def collect(problems: list[Problem], fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or None with its problems added to ``problems``."""
    try:
        return fn(*args)
    except Problems as exc:
        problems.extend(exc.problems)
        return None
