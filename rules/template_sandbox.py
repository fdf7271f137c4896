"""The sandbox every template renders in: Jinja2's immutable sandbox, bounded so no template burns CPU or memory.

Admission renders templates on its only event loop, so a template is bounded as a condition is, with the
same value bounds (``rules.value_bounds``: integers of ``MAX_INT_BITS`` bits, values of ``MAX_SIZE``
characters and items, ``MAX_SECONDS`` for all the templates of one op) and its own:
- the text: ``MAX_SOURCE`` characters, ``MAX_NODES`` syntax nodes nested at most ``MAX_DEPTH`` deep;
  statements ``if`` and ``for`` only (no set, macros, blocks, includes, recursive loops), loops not nested;
- every operator (``** * + - / // %``), ``~``, method call and filter: refused before it runs where its
  result's size is predictable and checked after; only the filters of ``ALLOWED_FILTERS`` and the methods
  of ``SAFE_METHODS`` (``'x'.ljust(10**9)`` or ``| indent(10**9)`` are refused); ``range`` up to ``MAX_RANGE``;
- the output: ``MAX_OUTPUT`` characters per field, measured while it streams;
- time: the deadline is read before every operator, call, filter, loop iteration and output chunk.
Failures raise ``SecurityError``, ``ValueTooLarge`` or ``OutOfTime``; ``rules.templating`` turns every
failure of any kind into a ``TemplateError`` naming the field.
"""
from __future__ import annotations

import contextvars
import functools
import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from jinja2 import StrictUndefined, nodes
from jinja2.exceptions import SecurityError
from jinja2.filters import FILTERS
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from opsched.rules.value_bounds import (
    MAX_FORMAT_WIDTH,
    MAX_SECONDS,
    MAX_SIZE,
    OPERATORS,
    Deadline,
    ValueTooLarge,
    binop,
    check_format,
    check_value,
    size,
)

MAX_OUTPUT = 65536  # characters one rendered field may have
MAX_SOURCE = 8192  # characters of one template
MAX_DEPTH = 32  # how deep its syntax may nest (``{% for %}{% if %}{{ (a + b) * c }}`` is 6 deep)
MAX_NODES = 2000  # syntax nodes of one template
MAX_RANGE = 10000  # largest ``range()``
MAX_LOOP_DEPTH = 1  # no loop inside a loop
MAX_JSON_INDENT = 8  # ``tojson(indent)``
# Statements a template may use: output, if and for. No set, macros, calls, filters blocks or includes.
ALLOWED_STATEMENTS = (nodes.Output, nodes.If, nodes.For)
# Filters whose output is at most a small multiple of their input once their arguments are checked; not
# batch, slice, indent, wordwrap, pprint, urlize, xmlattr, urlencode (a size from an argument) or random
# (renders differently each time).
ALLOWED_FILTERS = frozenset({
    "abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "filesizeformat",
    "first", "float", "forceescape", "format", "groupby", "int", "items", "join", "last", "length", "list", "lower",
    "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr",
    "sort", "string", "striptags", "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "wordcount"})
_STR_METHODS = frozenset({
    "capitalize", "casefold", "count", "endswith", "find", "index", "isalnum", "isalpha", "isdecimal", "isdigit",
    "islower", "isnumeric", "isspace", "istitle", "isupper", "join", "lower", "lstrip", "partition", "removeprefix",
    "removesuffix", "replace", "rfind", "rindex", "rpartition", "rsplit", "rstrip", "split", "splitlines",
    "startswith", "strip", "swapcase", "title", "upper"})
# Methods a template may call on plain values; any other (``ljust``, ``zfill``, ``format``, ``to_bytes``) is refused.
SAFE_METHODS: dict[type, frozenset[str]] = {
    str: _STR_METHODS, dict: frozenset({"items", "keys", "values", "get"}),
    list: frozenset({"count", "index"}), tuple: frozenset({"count", "index"})}
_PLAIN = (str, bytes, int, float, complex, list, tuple, dict, set, frozenset, range)
_EACH, _CONCAT = "__bounded_each__", "__bounded_concat__"

_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("template_deadline", default=None)


@contextmanager
def time_budget(seconds: float | None = None) -> Iterator[None]:
    """One time budget (``MAX_SECONDS`` unless given) for everything rendered inside (an op's templates);
    a budget inside another shares the outer one."""
    if _DEADLINE.get() is not None:
        yield
        return
    token = _DEADLINE.set(Deadline(MAX_SECONDS if seconds is None else seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _tick() -> None:
    deadline = _DEADLINE.get()
    if deadline is not None:
        deadline.check()


class _Environment(ImmutableSandboxedEnvironment):
    """The sandbox, with every operator, method call and attribute bounded."""

    intercepted_binops = frozenset(OPERATORS) - {"<<"}

    def call_binop(self, context: Any, operator_name: str, left: Any, right: Any) -> Any:
        _tick()
        return binop(operator_name, left, right)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if not super().is_safe_attribute(obj, attr, value):
            return False
        if isinstance(obj, _PLAIN) and callable(value):
            return any(isinstance(obj, t) and attr in names for t, names in SAFE_METHODS.items())
        return True

    def wrap_str_format(self, value: Any) -> None:
        """``str.format`` is not offered (a width in a format spec is a size): refused as any unlisted method."""
        return None

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        _tick()
        owner, name = getattr(__obj, "__self__", None), getattr(__obj, "__name__", "")
        if isinstance(owner, str) and name == "replace":
            _check_replace(owner, *args, **kwargs)
        if isinstance(owner, str) and name == "join" and args:
            args = (_check_join(args[0], owner), *args[1:])
        return _checked(super().call(__context, __obj, *args, **kwargs), f"{name or 'a call'}()")


def _checked(result: Any, what: str) -> Any:
    """A result measured, unless it is a lazy iterator (whatever consumes it is measured)."""
    return result if isinstance(result, Iterator) else check_value(result, what)


def _text_size(value: Any) -> int:
    """About how many characters ``str(value)`` has, without building it."""
    return len(value) if isinstance(value, str) else 24 + 4 * size(value)


def _check_replace(text: Any, old: Any = "", new: Any = "", count: Any = -1) -> None:
    text, old, new = str(text), str(old), str(new)
    found = len(text) + 1 if not old else text.count(old)
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    predicted = len(text) + found * max(0, len(new) - len(old))
    if predicted > MAX_SIZE:
        raise ValueTooLarge(f"value too large: replace() would build {predicted} characters (at most {MAX_SIZE})")


def _check_join(items: Any, sep: Any = "") -> list[Any]:
    """The items to join, taken from any iterable, refused if the joined text could pass the bound."""
    taken = list(itertools.islice(items, MAX_SIZE + 1))
    predicted = len(str(sep)) * max(0, len(taken) - 1) + sum(_text_size(i) for i in taken)
    if predicted > MAX_SIZE:
        raise ValueTooLarge(f"value too large: join would build about {predicted} characters (at most {MAX_SIZE})")
    return taken


def _filter_join(value: Any, d: Any = "", attribute: Any = None) -> Any:
    return _check_join(value, d)


def _filter_replace(value: Any, old: Any = "", new: Any = "", count: Any = None) -> Any:
    _check_replace(value, old, new, -1 if count is None else count)
    return value


def _filter_format(value: Any, *args: Any, **kwargs: Any) -> Any:
    check_format(str(value), kwargs or args, "format")
    return value


def _filter_center(value: Any, width: Any = 80) -> Any:
    if isinstance(width, int) and width > MAX_SIZE:
        raise ValueTooLarge(f"value too large: center({width}) (at most {MAX_SIZE})")
    return value


def _filter_tojson(value: Any, indent: Any = None) -> Any:
    if isinstance(indent, int) and indent > MAX_JSON_INDENT:
        raise ValueTooLarge(f"value too large: tojson(indent={indent}) (at most {MAX_JSON_INDENT})")
    return value


def _filter_sum(value: Any, attribute: Any = None, start: Any = 0) -> Any:
    taken = list(itertools.islice(value, MAX_SIZE + 1))
    predicted = size(start) + sum(size(i) for i in taken)
    if predicted > MAX_SIZE:
        raise ValueTooLarge(f"value too large: sum would build {predicted} characters and items (at most {MAX_SIZE})")
    return taken


# Checks run before a filter, given its value and arguments; each returns the value to pass on.
_FILTER_PRECHECKS: dict[str, Callable[..., Any]] = {
    "join": _filter_join, "replace": _filter_replace, "format": _filter_format, "center": _filter_center,
    "tojson": _filter_tojson, "sum": _filter_sum}


def _bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    skip = 1 if getattr(fn, "jinja_pass_arg", None) is not None else 0
    precheck = _FILTER_PRECHECKS.get(name)

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _tick()
        head, value, rest = args[:skip], args[skip], args[skip + 1:]
        if precheck is not None:
            value = precheck(value, *rest, **kwargs)
        return _checked(fn(*head, value, *rest, **kwargs), f"the filter {name}")
    return bounded


def _each(value: Any) -> Iterator[Any]:
    """What a ``{% for %}`` loop iterates: its items, the deadline read before each."""
    for item in value:
        _tick()
        yield item


def _concat(parts: list[Any]) -> str:
    """``a ~ b``: measured before it is joined."""
    _tick()
    texts = [p if isinstance(p, str) else str(check_value(p, "an operand of ~")) for p in parts]
    total = sum(len(t) for t in texts)
    if total > MAX_SIZE:
        raise ValueTooLarge(f"value too large: ~ would build {total} characters (at most {MAX_SIZE})")
    return "".join(texts)


def _bounded_range(*args: int) -> range:
    _tick()
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise SecurityError(f"range of {len(rng)} items (at most {MAX_RANGE})")
    return rng


def _finalize(value: Any) -> Any:
    """Measure a value before it is turned into text: ``str()`` of a huge list is itself a bomb."""
    budget = [MAX_OUTPUT]

    def spend(v: Any, depth: int) -> None:
        budget[0] -= len(v) if isinstance(v, str) else 8
        if budget[0] < 0 or depth > MAX_DEPTH:
            raise SecurityError(f"renders to more than {MAX_OUTPUT} characters")
        if isinstance(v, dict):
            v = [*v.keys(), *v.values()]
        if isinstance(v, (list, tuple)):
            for item in v:
                spend(item, depth + 1)
    spend(value, 0)
    return value


_ENV = _Environment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True, finalize=_finalize)
_ENV.globals = {"range": _bounded_range}
_ENV.filters = {name: _bounded_filter(name, FILTERS[name]) for name in ALLOWED_FILTERS}
_ENV.filters.update({_EACH: _each, _CONCAT: _concat})


class _Bounded(NodeTransformer):
    """Every loop iterates through ``_each`` and every ``~`` goes through ``_concat``."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, _EACH, [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Filter(nodes.List(node.nodes, lineno=node.lineno), _CONCAT, [], [], None, None,
                            lineno=node.lineno)


@functools.lru_cache(maxsize=4096)
def compiled(text: str) -> Any:
    """The template of ``text``, checked and bounded (SecurityError or ValueTooLarge if it may not run)."""
    if len(text) > MAX_SOURCE:
        raise SecurityError(f"the template has {len(text)} characters (at most {MAX_SOURCE})")
    tree = _ENV.parse(text)
    _check_tree(tree)
    tree = _Bounded().visit(tree)
    tree.set_environment(_ENV)
    return _ENV.from_string(tree)


def _check_tree(root: nodes.Node) -> None:
    """Statements, loops, filters, literals, depth and size, walked without recursion."""
    stack, count = [(root, 0, 0)], 0
    while stack:
        node, depth, loops = stack.pop()
        count += 1
        if depth > MAX_DEPTH or count > MAX_NODES:
            raise SecurityError(f"the template nests deeper than {MAX_DEPTH} levels" if depth > MAX_DEPTH
                                else f"the template has more than {MAX_NODES} parts")
        _check_node(node, loops)
        loops += isinstance(node, nodes.For)
        stack.extend((child, depth + 1, loops) for child in node.iter_child_nodes())


def _check_node(node: nodes.Node, loops: int) -> None:
    if isinstance(node, nodes.Stmt) and not isinstance(node, ALLOWED_STATEMENTS):
        raise SecurityError(f"{{% {type(node).__name__.lower()} %}} is not allowed (only if and for)")
    if isinstance(node, nodes.For) and node.recursive:
        raise SecurityError("recursive loops are not allowed")
    if isinstance(node, nodes.For) and loops + 1 > MAX_LOOP_DEPTH:
        raise SecurityError(f"loops nested deeper than {MAX_LOOP_DEPTH}")
    if isinstance(node, nodes.Filter) and node.name not in ALLOWED_FILTERS:
        raise SecurityError(f"the filter {node.name!r} is not allowed (allowed: {', '.join(sorted(ALLOWED_FILTERS))})")
    if isinstance(node, nodes.Const):
        check_value(node.value, "a literal")


def render(text: str, values: dict[str, Any]) -> str:
    """Stream the output so a template cannot build an unbounded string before it is measured."""
    with time_budget():
        template = compiled(text)
        parts, total = [], 0
        for chunk in template.generate(values):
            _tick()
            total += len(chunk)
            if total > MAX_OUTPUT:
                raise SecurityError(f"renders to more than {MAX_OUTPUT} characters")
            parts.append(chunk)
        return "".join(parts)


__all__ = ["MAX_FORMAT_WIDTH", "MAX_OUTPUT", "MAX_SOURCE", "compiled", "render", "time_budget"]
