"""The YAML source of a polyaxonfile: reading a file, loading its text safely (at most ``MAX_CHARS``
characters; a duplicate key is an error), and locating problems at their line and column.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from opsched.polyaxonfile.errors import FieldError, Problem, SpecError

MAX_CHARS = 1_000_000


def read_file(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(path), [FieldError("", f"cannot read the file: {exc}")]) from None


# libyaml's parser when PyYAML was built with it (the wheels are): the same documents, events and marks as the
# pure-Python one, several times faster; the constructor stays PyYAML's safe one, in Python
_SafeBase: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SafeBase):
    """Safe YAML that rejects duplicate keys instead of silently keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)):
                continue  # unhashable keys are reported by the base constructor
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, source: str) -> Any:
    if len(text) > MAX_CHARS:
        raise SpecError(source, [FieldError("", f"file too large (> {MAX_CHARS} characters)")])
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        where = f" at line {line}, column {column}" if mark else ""
        detail = ": ".join(p for p in (exc.context, exc.problem) if p)
        raise SpecError(source, [FieldError("", f"YAML syntax error{where}: {detail}",
                                            line, column)]) from None
    except yaml.YAMLError as exc:
        raise SpecError(source, [FieldError("", f"YAML error: {exc}")]) from None


def locate(text: str, problems: list[Problem]) -> list[FieldError]:
    """Turn problems into FieldErrors with the line/column of the deepest existing YAML node."""
    root = compose(text)
    errors = [FieldError(".".join(str(p) for p in loc), msg, *position(root, loc)) for loc, msg in problems]
    return sorted(errors, key=lambda e: (e.line is None, e.line or 0, e.column or 0))


def compose(text: str) -> Any:
    """The YAML node tree of ``text`` (None when it is not YAML), for ``position``."""
    try:
        return yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        return None


def position(root: Any, loc: tuple[str | int, ...]) -> tuple[int | None, int | None]:
    """The 1-based line and column of the deepest node of ``root`` on the path ``loc`` (None, None: none)."""
    mark, node = None, root
    for part in loc:
        found = _child(node, part)
        if found is None:
            break
        mark, node = found
    return (mark.line + 1, mark.column + 1) if mark else (None, None)


def _child(node: Any, part: str | int) -> tuple[Any, Any] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return key.start_mark, value
    elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        return node.value[part].start_mark, node.value[part]
    return None
