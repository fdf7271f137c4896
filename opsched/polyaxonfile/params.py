"""Params, and the component inputs and outputs they fill.

  * ``params``: ``{lr: {value: 0.01}}`` or a bare ``{lr: 0.01}``; a param with ``ref`` is an error,
    and so are ``connection``/``toInit`` (not supported yet). ``toEnv: NAME`` (on a param, or on an
    input/output) sets the env var NAME on every container to the value (``OpSpec.to_env``).
    ``contextOnly: true`` makes a param usable in templates without being an input or output.
    Component ``inputs``/``outputs`` ({name, type, value, isOptional, isList, options,
    delayValidation, toEnv}) take their value from the param of the same name, else their ``value``;
    a required input without either is an error. Outputs without a value are left out. When the
    component declares inputs or outputs, a param that matches none of them (and is not
    ``contextOnly``) is an error (as in Polyaxon). int/float/bool/str/dict/list types are checked,
    element by element with ``isList``, and the value must be one of ``options`` if given; values that
    are ``{{ ... }}`` templates and IOs with ``delayValidation`` are not checked.
"""
from __future__ import annotations

from typing import Any

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.polyaxonfile.fields import env_name
from opsched.polyaxonfile.models_operation import (
    ComponentModel,
    IOModel,
    OperationModel,
    OverridesModel,
)
from opsched.rules.templating import has_template

_IO_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int, "float": (int, float), "bool": bool, "str": str, "dict": dict, "list": list,
}
_PARAM_KEYS = frozenset({"value", "ref", "contextOnly", "connection", "toInit", "toEnv"})
_PARAM_UNSUPPORTED = {"connection": "params with a 'connection' are not supported yet",
                      "toInit": "params with 'toInit' are not supported yet (opsched has no init containers)"}


def _type_problem(io: IOModel, value: Any) -> str | None:
    if io.delay_validation or value is None or (isinstance(value, str) and has_template(value)):
        return None
    if io.is_list and not isinstance(value, list):
        return f"{io.name!r} is a list (isList), got {value!r}"
    for item in value if io.is_list else [value]:
        if io.options is not None and item not in io.options:
            return f"{io.name!r} must be one of {io.options!r}, got {item!r}"
        expected = _IO_TYPES.get(io.type or "")
        if expected is not None and (isinstance(item, bool) != (io.type == "bool") or not isinstance(item, expected)):
            return f"{io.name!r} expects a value of type {io.type}, got {item!r}"
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


class Params:
    """Param layers merged (later wins): values, where each was set, toEnv and contextOnly names."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.where: dict[str, Loc] = {}
        self.to_env: dict[str, str] = {}  # env var -> param
        self.context_only: set[str] = set()

    def add(self, raw: dict[str, Any], loc: Loc, problems: list[Problem], *, unwrap: bool = True) -> None:
        for name, value in raw.items():
            self.where[name] = loc + (name,)
            if unwrap and is_param(value):
                self._add_param(name, value, problems)
            else:
                self.values[name] = value

    def _add_param(self, name: str, raw: dict[str, Any], problems: list[Problem]) -> None:
        at = self.where[name]
        for key, message in _PARAM_UNSUPPORTED.items():
            if raw.get(key) is not None:
                problems.append((at + (key,), message))
        if raw.get("ref") is not None:
            problems.append((at + ("ref",), "params that reference other runs ('ref') are not supported yet"))
        if raw.get("contextOnly"):
            self.context_only.add(name)
        if raw.get("toEnv") is not None:
            self.env(str(raw["toEnv"]), name, at + ("toEnv",), problems)
        self.values[name] = raw.get("value")

    def env(self, var: str, name: str, at: Loc, problems: list[Problem]) -> None:
        try:
            env_name(var)
        except ValueError as exc:
            problems.append((at, str(exc)))
            return
        if self.to_env.get(var, name) != name:
            problems.append((at, f"toEnv {var} is already set from {self.to_env[var]!r}"))
        self.to_env[var] = name


def is_param(raw: Any) -> bool:
    """``{value: x, ...}`` (Polyaxon's V1Param) rather than a mapping that is itself the value."""
    return isinstance(raw, dict) and bool(raw) and set(raw) <= _PARAM_KEYS and bool({"value", "ref"} & set(raw))


def io_and_params(op: OperationModel | None, comp: ComponentModel, extra: OverridesModel,
                  base: Loc, problems: list[Problem], swept: dict[str, Any] | None = None,
                  swept_at: dict[str, Loc] | None = None) -> tuple[dict, dict, dict, dict]:
    """Params (operation, then one trial of a matrix, then overrides), the inputs/outputs they fill,
    and ``to_env`` (env var -> param). Swept values are taken as they are (never unwrapped), written
    at ``swept_at[name]`` (default ``matrix.params.<name>.value``)."""
    params = Params()
    params.add(op.params if op else {}, ("params",), problems)
    for name, value in (swept or {}).items():
        params.values[name] = value
        params.where[name] = (swept_at or {}).get(name, ("matrix", "params", name, "value"))
    params.add(extra.params, ("overrides", "params"), problems)
    values, where = params.values, params.where
    inputs = resolve_io(comp.inputs, values, where, base + ("inputs",), problems, inputs=True)
    outputs = resolve_io(comp.outputs, values, where, base + ("outputs",), problems, inputs=False)
    for section, ios in (("inputs", comp.inputs), ("outputs", comp.outputs)):
        for i, io in enumerate(ios):
            if io.to_env is not None:
                params.env(io.to_env, io.name, base + (section, i, "toEnv"), problems)
    if comp.inputs or comp.outputs:
        declared = {io.name for io in (*comp.inputs, *comp.outputs)}
        problems += [(where[n], f"param {n!r} is not an input or output of the component")
                     for n in values if n not in declared and n not in params.context_only]
    return values, inputs, outputs, params.to_env
