"""Conditional scheduling: a safe, bounded evaluator for Polyaxon's ``conditions``.

``{{ lr > 0.01 and epochs <= 100 }}`` is evaluated over the op's params and inputs (names resolve
to values; ``params.lr`` and ``inputs.x`` work too; a hook's conditions also see the finished op's
``outputs.NAME`` and ``globals.status``, given as scopes of their own). Only literals, names, arithmetic,
comparisons, ``and``/``or``/``not``, ``in``, ``x if c else y`` and list/tuple literals are allowed: no calls,
no attribute access beyond those scopes, no subscripts, no comprehensions, no bit operators.

It runs on admission's only event loop, so it is bounded, and every failure of any kind is a
``ConditionError`` with a readable message (the op is rejected ``invalid_condition``):
- the text: at most ``MAX_SOURCE`` characters, ``MAX_NODES`` syntax nodes, nested ``MAX_DEPTH`` deep;
- every value it builds (``rules.value_bounds``, the same bounds as templates'): an integer of at most
  ``MAX_INT_BITS`` bits, strings and lists of at most ``MAX_SIZE`` characters and items, refused before
  computing where the size is predictable (``'a' * 10**8``, ``(10**64)**64``) and checked on every result;
- time: ``MAX_SECONDS``, checked before each step.
"""
from __future__ import annotations

import ast
import io
import operator
import re
import tokenize
from typing import Any

from opsched.rules.value_bounds import (
    MAX_INT_BITS,
    MAX_SECONDS,
    MAX_SIZE,
    Deadline,
    OutOfTime,
    ValueTooLarge,
    binop,
    check_value,
    describe,
)

__all__ = ["MAX_DEPTH", "MAX_INT_BITS", "MAX_NODES", "MAX_SECONDS", "MAX_SIZE", "MAX_SOURCE", "ConditionError",
           "evaluate"]

MAX_SOURCE = 4096  # characters of one condition (what is inside ``{{ }}``)
MAX_DEPTH = 32  # how deep its expression may nest (``-(-(-x))`` is 4 deep; parentheses alone add nothing)
MAX_NODES = 1000  # syntax nodes of one condition (``x in [1, 2, 3]`` has about 10)

TEMPLATE = re.compile(r"^\s*\{\{(.*)\}\}\s*$", re.S)
_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_UNARY: dict[type, Any] = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos}


SCOPES = ("params", "inputs", "outputs", "globals")  # ``params.lr``: a name in a scope


class ConditionError(ValueError):
    pass


def evaluate(text: str, values: dict[str, Any]) -> Any:
    """Evaluate ``{{ expr }}`` (or a bare expression) over ``values``; ConditionError if it cannot be, for any
    reason (invalid, too large, too deep, too slow, a type or arithmetic error)."""
    match = TEMPLATE.match(text)
    source = (match.group(1) if match else text).strip()
    tree = _parse(source)
    try:
        return _Evaluator(values, Deadline(MAX_SECONDS)).eval(tree.body)
    except ConditionError:
        raise
    except ValueTooLarge as exc:
        raise ConditionError(f"{exc} in {_quote(source)}") from None
    except OutOfTime as exc:
        raise ConditionError(f"the condition {exc}: {_quote(source)}") from None
    except RecursionError:
        raise ConditionError(f"expression nested too deeply: {_quote(source)}") from None
    except MemoryError:
        raise ConditionError(f"out of memory evaluating {_quote(source)}") from None
    except Exception as exc:  # noqa: BLE001 - any other failure is the condition's, never a handler bug to retry
        raise ConditionError(f"cannot evaluate {_quote(source)}: {type(exc).__name__}: {exc}") from None


def _quote(source: str) -> str:
    return repr(source) if len(source) <= 80 else repr(source[:80] + "…")


def _parse(source: str) -> ast.Expression:
    if len(source) > MAX_SOURCE:
        raise ConditionError(f"condition too long: {len(source)} characters (at most {MAX_SOURCE})")
    if _tokens_over(source, 2 * MAX_NODES):  # before the parser: its recursion is bounded by the stack it is called on
        raise ConditionError(f"expression too long: more than {MAX_NODES} parts: {_quote(source)}")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"cannot parse {_quote(source)}: {exc.msg}") from None
    except (RecursionError, MemoryError, SystemError):  # SystemError: CPython 3.11's AST builder out of its depth
        raise ConditionError(f"expression nested deeper than {MAX_DEPTH} levels: {_quote(source)}") from None
    except ValueError as exc:  # a lone surrogate (UnicodeEncodeError); what else ast.parse raises is handled above
        raise ConditionError(f"cannot parse {_quote(source)}: {exc}") from None
    _check_shape(tree.body, source)
    return tree


_LAYOUT = frozenset({tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT,
                     tokenize.COMMENT})


def _tokens_over(source: str, limit: int) -> bool:
    """More than ``limit`` tokens (a syntax node takes at least about half a token)? Counted without recursion,
    stopping at the limit; a source that does not tokenize is left to the parser to refuse."""
    count = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type not in _LAYOUT:
                count += 1
                if count > limit:
                    return True
    except (tokenize.TokenError, SyntaxError):
        return False
    return False


def _check_shape(root: ast.AST, source: str) -> None:
    """Depth, node count and literals, walked without recursion before anything is evaluated."""
    stack, count = [(root, 1)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise ConditionError(f"expression nested deeper than {MAX_DEPTH} levels: {_quote(source)}")
        if count > MAX_NODES:
            raise ConditionError(f"expression too long: more than {MAX_NODES} parts: "
                                 f"{_quote(source)}")
        if isinstance(node, ast.Constant):
            try:
                check_value(node.value, "a literal")
            except ValueTooLarge as exc:
                raise ConditionError(str(exc)) from None
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node)
                     if not isinstance(child, ast.expr_context))


class _Evaluator:
    """One evaluation: the names it may read and its deadline, checked before every step."""

    def __init__(self, values: dict[str, Any], deadline: Deadline) -> None:
        self.values = values
        self.deadline = deadline

    def eval(self, node: ast.AST) -> Any:  # noqa: C901 - one branch per kind of node allowed: a flat table
        self.deadline.check()
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in SCOPES:
            scope = self.values.get(node.value.id)
            if isinstance(scope, dict):  # a hook's context: ``outputs.loss``, ``globals.status`` (``scoped``)
                if node.attr not in scope:
                    raise ConditionError(f"unknown name {node.value.id}.{node.attr}; known: "
                                         f"{', '.join(sorted(scope)) or 'none'}")
                return scope[node.attr]
            return self._name(node.attr)
        if isinstance(node, ast.BoolOp):
            results = (self.eval(v) for v in node.values)
            return all(results) if isinstance(node.op, ast.And) else any(results)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return check_value(_UNARY[type(node.op)](self.eval(node.operand)), "a unary operation")
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return self._binop(_BIN[type(node.op)], self.eval(node.left), self.eval(node.right))
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.IfExp):
            return self.eval(node.body if self.eval(node.test) else node.orelse)
        if isinstance(node, (ast.List, ast.Tuple)):
            return check_value([self.eval(e) for e in node.elts], "a list literal")
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            raise ConditionError(f"the operator {type(node.op).__name__} is not allowed in a condition")
        raise ConditionError(f"{type(node).__name__} is not allowed in a condition (no calls, attributes or indexing)")

    def _name(self, name: str) -> Any:
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        if name not in self.values:
            raise ConditionError(f"unknown name {name!r}; known: {', '.join(sorted(self.values)) or 'none'}")
        return self.values[name]

    def _compare(self, node: ast.Compare) -> bool:
        left = self.eval(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = self.eval(comparator)
            if type(op) not in _CMP or not self._apply(_CMP[type(op)], left, right):
                return False
            left = right
        return True

    def _binop(self, symbol: str, a: Any, b: Any) -> Any:
        return self._apply(lambda x, y: binop(symbol, x, y), a, b)

    @staticmethod
    def _apply(fn: Any, a: Any, b: Any) -> Any:
        try:
            return fn(a, b)
        except (ValueTooLarge, OutOfTime):
            raise
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise ConditionError(f"cannot evaluate with {describe(a)} and {describe(b)}: {exc}") from None

