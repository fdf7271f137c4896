"""A polyaxonfile document made of one or more YAML files, every value knowing the file and path it was written at.

An operation may take its component from another file (``pathRef``, ``hubRef``: ``references``) and later files
(``-f``) patch it (``overlays``, ``patching``): what the models validate is one document, ``Document.data()``.
Each of its values is a ``Node`` that keeps its ``Source`` (the file) and its path in that file, so a problem found
anywhere in the document is located (``Document.locate``) in the file where the value was written, at its line,
under its path in that file, and names how that file was reached ("by the pathRef at op.yaml line 3"). A value made
by a merge keeps the node of the side it came from; a mapping merged from both sides is the original's.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from opsched.polyaxonfile.errors import FieldError, Loc, Problem, SpecError
from opsched.polyaxonfile.yaml_source import compose, load_yaml, position


@dataclass(frozen=True)
class Boundary:
    """The folder the ``pathRef``s of a file must stay in, and how a message names it."""

    path: Path  # resolved
    name: str  # "examples/polyaxon/ (the folder of examples/polyaxon/op.yaml)", "the hub examples/polyaxon/hub"


@dataclass(frozen=True, eq=False)
class Source:
    """One YAML file of a document: ``name`` as the user wrote it (the path given, or a reference joined to the
    folder of the file that has it), ``path`` on disk (None for a text given without a file), ``via`` how it was
    reached ("" for a file given directly) and the ``boundary`` its own references stay in."""

    name: str
    text: str
    path: Path | None = None
    via: str = ""
    boundary: Boundary | None = None

    @cached_property
    def tree(self) -> Any:
        return compose(self.text)

    def line_of(self, at: Loc) -> int | None:
        return position(self.tree, at)[0]


@dataclass(eq=False)
class Node:
    """A value of the document: a scalar, ``dict[str, Node]`` or ``list[Node]``, written in ``source`` at ``at``."""

    value: Any
    source: Source
    at: Loc = ()

    def get(self, key: str) -> Node | None:
        """The child ``key`` of a mapping (None when absent, or when this is no mapping)."""
        return self.value.get(key) if isinstance(self.value, dict) else None

    def is_set(self, key: str) -> bool:
        child = self.get(key)
        return child is not None and child.value is not None


def wrap(data: Any, source: Source, at: Loc = ()) -> Node:
    """``data`` (as loaded from ``source``'s YAML) as nodes."""
    if isinstance(data, dict):
        return Node({k: wrap(v, source, at + (k,)) for k, v in data.items()}, source, at)
    if isinstance(data, list):
        return Node([wrap(v, source, at + (i,)) for i, v in enumerate(data)], source, at)
    return Node(data, source, at)


def plain(node: Node | None) -> Any:
    """The plain data of ``node`` (what the models validate)."""
    if node is None:
        return None
    if isinstance(node.value, dict):
        return {k: plain(v) for k, v in node.value.items()}
    if isinstance(node.value, list):
        return [plain(v) for v in node.value]
    return node.value


@dataclass(eq=False)
class Document:
    """The document being read: its ``root`` node and every file it was read from, the first one given first."""

    sources: list[Source]
    root: Node | None = None

    @property
    def main(self) -> Source:
        return self.sources[0]

    def read(self, source: Source) -> Node:
        """The nodes of ``source``'s YAML, adding it to the sources; ``SpecError`` if it is no YAML (located in that
        file, which is named, with how it was reached, when it is not the main one)."""
        if source not in self.sources:
            self.sources.append(source)
        try:
            return wrap(load_yaml(source.text, source.name), source)
        except SpecError as exc:
            other = source is not self.main
            raise SpecError(self.main.name, [replace(e, file=source.name if other else None,
                                                     via=source.via if other else "") for e in exc.errors]) from None

    def data(self) -> Any:
        return plain(self.root)

    def fingerprint(self) -> str:
        """What identifies the content read: the text of a single file, else every file's name and text."""
        if len(self.sources) == 1:
            return self.main.text
        return "\n".join(f"--- {s.name}\n{s.text}" for s in self.sources)

    def error_at(self, node: Node, msg: str, rest: Loc = ()) -> FieldError:
        """A problem with ``node`` (or, ``rest`` given, with a path under it that does not exist): located in
        the file the node was written in, under its path there."""
        at = node.at + rest
        line, column = position(node.source.tree, at)
        other = node.source is not self.main
        return FieldError(".".join(str(p) for p in at), msg, line, column,
                          file=node.source.name if other else None, via=node.source.via if other else "")

    def locate(self, problems: list[Problem]) -> list[FieldError]:
        """FieldErrors for problems found in ``data()`` (paths of the document), each at the deepest node of its
        path, in that node's file."""
        errors = []
        for loc, msg in problems:
            node, depth = self.root or Node(None, self.main), 0
            for part in loc:
                child = _child(node, part)
                if child is None:
                    break
                node, depth = child, depth + 1
            errors.append(self.error_at(node, msg, tuple(loc[depth:])))
        return self.sorted(errors)

    def sorted(self, errors: list[FieldError]) -> list[FieldError]:
        """File by file (in the order read), then by line."""
        order = {s.name: i for i, s in reversed(list(enumerate(self.sources)))}
        return sorted(errors, key=lambda e: (order.get(e.file, 0) if e.file else 0, e.line is None, e.line or 0,
                                             e.column or 0))


def _child(node: Node, part: str | int) -> Node | None:
    if isinstance(node.value, dict) and isinstance(part, str):
        return node.value.get(part)
    if isinstance(node.value, list) and isinstance(part, int) and 0 <= part < len(node.value):
        return node.value[part]
    return None
