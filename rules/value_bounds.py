"""How large a value a condition or a template may build, and for how long it may run: one rule for both.

Admission evaluates ``conditions`` (``rules.conditions``) and renders templates
(``rules.templating``) on its only event loop, so neither may burn CPU or memory. Every operation is
checked twice: before it runs, where its result's size is predictable (``*`` repetition, ``**``, ``<<``,
``+`` of strings and lists, ``%`` formatting), and on its result. A step that would pass a bound raises
``ValueTooLarge`` ("value too large: ..."); a ``Deadline`` read between steps raises ``OutOfTime``.

The size of a value counts the characters of every string (bytes of bytes) and the items of every list,
tuple, dict and set inside it, and a 64-bit word for each integer (``[0] * 60000`` weighs 60,000;
``['ab'] * 30000`` weighs 90,000).
"""
from __future__ import annotations

import operator
import re
import time
from collections.abc import Callable
from typing import Any

MAX_INT_BITS = 4096  # bits of an integer any step may produce (about 1,233 digits; 10**64 has 213)
MAX_SIZE = 65536  # size (characters plus items, see above) of any value a step may produce
MAX_FORMAT_WIDTH = 1000  # width or precision of one %-format field (``'%.3f'``, ``'%08d'``)
# CPU time one condition, or one op's templates, may take (the thread's CPU clock, read between steps: a busy machine
# does not make a template that fits its budget run out of it, as a wall clock would)
MAX_SECONDS = 0.5

_SEQUENCES = (str, bytes, list, tuple)
_FORMAT_FIELD = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[#0\- +]*(?P<width>\*|\d+)?(?:\.(?P<precision>\*|\d+))?[hlL]?(?P<kind>.)", re.S)


class ValueTooLarge(ValueError):
    """A step would build, or built, a value past a bound; the message says which."""


class OutOfTime(ValueError):
    """The time budget ran out between two steps."""


class Deadline:
    """A budget of ``seconds`` of the calling thread's CPU time from now, checked between steps (a bound, not a
    decision). The work it bounds is synchronous, on one thread (rendering an op's templates, a condition)."""

    def __init__(self, seconds: float = MAX_SECONDS) -> None:
        self.seconds = seconds
        self.at = time.thread_time() + seconds

    def check(self) -> None:
        if time.thread_time() > self.at:
            raise OutOfTime(f"took longer than the time budget of {self.seconds:g} s")


def size(value: Any, limit: int = MAX_SIZE) -> int:
    """The size of ``value`` (see the module); stops counting once past ``limit`` (iterative: any depth)."""
    total, stack = 0, [value]
    while stack and total <= limit:
        v = stack.pop()
        if isinstance(v, (str, bytes)):
            total += len(v)
        elif isinstance(v, int) and not isinstance(v, bool):
            total += v.bit_length() // 64 if v.bit_length() <= MAX_INT_BITS else limit + 1
        elif isinstance(v, dict):
            total += len(v)
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += len(v)
            stack.extend(v)
        elif isinstance(v, range):
            total += len(v)
    return total


def check_value(value: Any, what: str) -> Any:
    """``value`` if it is within the bounds; ValueTooLarge naming ``what`` built it otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > MAX_INT_BITS:
            raise ValueTooLarge(f"value too large: {what} is an integer of {value.bit_length()} bits "
                                f"(at most {MAX_INT_BITS})")
        return value
    n = size(value)
    if n > MAX_SIZE:
        raise ValueTooLarge(f"value too large: {what} has more than {MAX_SIZE} characters and items")
    return value


def _too_large(what: str, predicted: int, unit: str, bound: int) -> ValueTooLarge:
    return ValueTooLarge(f"value too large: {what} would have {predicted} {unit} (at most {bound})")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_repeat(a: Any, b: Any, what: str) -> None:
    for seq, times in ((a, b), (b, a)):
        if isinstance(seq, _SEQUENCES) and isinstance(times, int) and times > 0:
            predicted = size(seq) * times
            if predicted > MAX_SIZE:
                raise _too_large(what, predicted, "characters and items", MAX_SIZE)
    if _is_int(a) and _is_int(b) and a.bit_length() + b.bit_length() > MAX_INT_BITS + 1:
        raise _too_large(what, a.bit_length() + b.bit_length(), "bits", MAX_INT_BITS)


def _check_power(a: Any, b: Any, what: str) -> None:
    if _is_int(a) and _is_int(b) and b > 0 and abs(a) > 1:
        if b > MAX_INT_BITS or (abs(a).bit_length() - 1) * b + 1 > MAX_INT_BITS:
            raise _too_large(what, (abs(a).bit_length() - 1) * b + 1, "bits", MAX_INT_BITS)


def _check_shift(a: Any, b: Any, what: str) -> None:
    if _is_int(a) and _is_int(b) and a != 0 and b > 0 and a.bit_length() + b > MAX_INT_BITS:
        raise _too_large(what, a.bit_length() + b, "bits", MAX_INT_BITS)


def _check_add(a: Any, b: Any, what: str) -> None:
    if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
        predicted = size(a) + size(b)
        if predicted > MAX_SIZE:
            raise _too_large(what, predicted, "characters and items", MAX_SIZE)


def _check_modulo(a: Any, b: Any, what: str) -> None:
    if isinstance(a, bytes):
        raise ValueTooLarge(f"{what}: formatting bytes with % is not allowed")
    if isinstance(a, str):
        check_format(a, b, what)


def check_format(fmt: str, args: Any, what: str) -> None:
    """Refuse a ``%`` format whose output could pass the bounds: a ``*`` width, a width or precision over
    ``MAX_FORMAT_WIDTH``, or fields that, filled, would pass ``MAX_SIZE``."""
    seq = list(args) if isinstance(args, tuple) else [args]
    predicted, position = len(fmt), 0
    for field in _FORMAT_FIELD.finditer(fmt):
        if field["kind"] == "%":
            continue
        for part in ("width", "precision"):
            if field[part] == "*":
                raise ValueTooLarge(f"{what}: a '*' {part} is not allowed in a % format")
            if field[part] and int(field[part]) > MAX_FORMAT_WIDTH:
                raise _too_large(f"{what}: the {part} of {field[0]!r}", int(field[part]), "characters",
                                 MAX_FORMAT_WIDTH)
        if field["key"] is not None and isinstance(args, dict):
            arg = args.get(field["key"], "")
        else:
            arg, position = (seq[position] if position < len(seq) else ""), position + 1
        predicted += int(field["width"] or 0) + int(field["precision"] or 0) + 24 + 2 * size(arg)
        if predicted > MAX_SIZE:
            raise _too_large(what, predicted, "characters", MAX_SIZE)


_PRECHECKS: dict[str, Callable[[Any, Any, str], None]] = {
    "*": _check_repeat, "**": _check_power, "<<": _check_shift, "+": _check_add, "%": _check_modulo}
OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "<<": operator.lshift}


def binop(symbol: str, a: Any, b: Any) -> Any:
    """``a <symbol> b``, refused before it runs if its result would pass a bound, and checked after."""
    what = f"{describe(a)} {symbol} {describe(b)}"
    check = _PRECHECKS.get(symbol)
    if check is not None:
        check(a, b, what)
    return check_value(OPERATORS[symbol](a, b), what)


def describe(value: Any) -> str:
    """A value for a message: ``'aaaa…' (100000 characters)`` rather than the whole of it."""
    if _is_int(value) and value.bit_length() > 64:
        return f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)) and size(value, 32) > 32:
        return f"<a {type(value).__name__} of length {len(value)}>"
    return repr(value)
