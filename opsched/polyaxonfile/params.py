"""Params, and the component inputs and outputs they fill.

  * ``params``: ``{lr: {value: 0.01}}`` or a bare ``{lr: 0.01}``; a param with ``ref`` is an error.
    Component ``inputs``/``outputs`` ({name, type, value, isOptional}) take their value from the
    param of the same name, else their ``value``; a required input without either is an error.
    Outputs without a value are left out. When the component declares inputs or outputs, a param
    that matches none of them is an error (as in Polyaxon). int/float/bool/dict/list types are
    checked; ``{{ ... }}`` templates are kept as they are, unchecked.
"""
from __future__ import annotations

from typing import Any

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.polyaxonfile.models_operation import ComponentModel, IOModel, OperationModel, OverridesModel

_IO_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int, "float": (int, float), "bool": bool, "dict": dict, "list": list,
}
_PARAM_KEYS = frozenset({"value", "ref", "contextOnly", "connection", "toInit", "toEnv"})


def _type_problem(io: IOModel, value: Any) -> str | None:
    expected = _IO_TYPES.get(io.type or "")
    if expected is None or value is None or (isinstance(value, str) and "{{" in value):
        return None
    if isinstance(value, bool) != (io.type == "bool") or not isinstance(value, expected):
        return f"{io.name!r} expects a value of type {io.type}, got {value!r}"
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


def io_and_params(op: OperationModel | None, comp: ComponentModel, extra: OverridesModel,
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
