"""Conditional scheduling: a safe evaluator for Polyaxon's ``conditions`` and templated fields.

``{{ lr > 0.01 and epochs <= 100 }}`` is evaluated over the op's params and inputs (names resolve
to values; ``params.lr`` and ``inputs.x`` work too). Only literals, names, arithmetic, comparisons,
``and``/``or``/``not``, ``in``, ``x if c else y`` and list/tuple literals are allowed: no calls,
no attribute access beyond ``params.``/``inputs.``, no subscripts, no comprehensions.
"""
from __future__ import annotations

import ast
import operator
import re
from typing import Any

TEMPLATE = re.compile(r"^\s*\{\{(.*)\}\}\s*$", re.S)
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_UNARY: dict[type, Any] = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos}


class ConditionError(ValueError):
    pass


def evaluate(text: str, values: dict[str, Any]) -> Any:
    """Evaluate ``{{ expr }}`` (or a bare expression) over ``values``; ConditionError if invalid."""
    match = TEMPLATE.match(text)
    source = (match.group(1) if match else text).strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"cannot parse {source!r}: {exc.msg}") from None
    return _eval(tree.body, values)


def _eval(node: ast.AST, values: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        if node.id not in values:
            raise ConditionError(f"unknown name {node.id!r}; known: {', '.join(sorted(values)) or 'none'}")
        return values[node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("params", "inputs"):
        return _eval(ast.Name(id=node.attr), values)
    if isinstance(node, ast.BoolOp):
        results = (_eval(v, values) for v in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, values))
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return _safe(_BIN[type(node.op)], _eval(node.left, values), _eval(node.right, values))
    if isinstance(node, ast.Compare):
        return _compare(node, values)
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, values) else node.orelse, values)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, values) for e in node.elts]
    raise ConditionError(f"{type(node).__name__} is not allowed in a condition (no calls, attributes or indexing)")


def _compare(node: ast.Compare, values: dict[str, Any]) -> bool:
    left = _eval(node.left, values)
    for op, comparator in zip(node.ops, node.comparators):
        right = _eval(comparator, values)
        if type(op) not in _CMP or not _safe(_CMP[type(op)], left, right):
            return False
        left = right
    return True


def _safe(fn, a: Any, b: Any) -> Any:
    if fn is operator.pow and isinstance(b, (int, float)) and abs(b) > 64:
        raise ConditionError(f"exponent {b!r} is too large")
    try:
        return fn(a, b)
    except (TypeError, ZeroDivisionError, OverflowError) as exc:
        raise ConditionError(f"cannot evaluate with {a!r} and {b!r}: {exc}") from None
