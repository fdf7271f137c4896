"""Validation: the document's shape and kinds first, then a model; every problem is located by path.

  * ``kind: component`` with ``run: {kind: job, container, environment, volumes}``, a distributed run
    (``pytorchjob``, ``tfjob``, ``mpijob``, ``xgbjob``, ``paddlejob``, ``mxjob``: ``models_run``) or
    ``run: {kind: service, ports, replicas, ...}``, or ``kind: operation`` with an inline ``component:`` (a
    ``pathRef``/``hubRef`` is replaced by the component it names before: ``references``). Other run kinds (dag, ...)
    are errors ("not supported yet; only ..."); so is an operation without a component. ``OpSpec.run_kind`` is the
    run kind.

Unknown keys are errors ("unknown field"), and keys of ``keys.UNSUPPORTED`` are errors saying they
are not supported yet; a missing required section gets a hint of what it should hold.
"""
from __future__ import annotations

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
        raise Problems([_problem(err, prefix) for err in exc.errors(include_url=False)]) from None


def _problem(err: Any, prefix: Loc) -> Problem:
    loc = prefix + tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        key = loc[-1]
        if loc == ("component", "matrix"):
            return loc, "a matrix belongs to the operation (top level), not to its component"
        if key in REFUSED_MESSAGES:
            return loc, REFUSED_MESSAGES[key]
        if key in UNSUPPORTED:
            return loc, f"'{key}' is not supported by opsched yet"
        return loc, f"unknown field '{key}'"
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
