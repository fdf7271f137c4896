"""The errors of a polyaxonfile: ``FieldError`` (one problem, located), ``SpecError`` (all of them),
``SpecWarning`` (a Polyaxon feature accepted but ignored), and ``Problems``, which carries the
problems found on the way (``Problem`` = (path in Polyaxon names, message)) until they are located.

A problem in a file other than the one submitted (a component a ``pathRef``/``hubRef`` names, a later ``-f``
file) names that file (``FieldError.file``) and how it was reached (``FieldError.via``: "the pathRef at op.yaml
line 3"); its ``line`` is in that file.
"""
from __future__ import annotations

from dataclasses import dataclass

Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]  # (path in Polyaxon names, message)


@dataclass(frozen=True)
class FieldError:
    loc: str  # dotted path in Polyaxon's names, e.g. "termination.maxRetries"; "" is the document
    msg: str
    line: int | None = None  # 1-based, when the path exists in the YAML
    column: int | None = None
    file: str | None = None  # the file the line is in, when it is not the SpecError's source
    via: str = ""  # how that file was reached: "the pathRef at op.yaml line 3" ("" when given directly)

    def where(self) -> str:
        """`` (line 3)``, `` (components/train.yaml line 7, by the pathRef at op.yaml line 3)``, or ""."""
        parts = [p for p in (self.file, f"line {self.line}" if self.line else "") if p]
        text = " ".join(parts)
        if self.via:
            text = f"{text or 'in the file'}, by {self.via}"
        return f" ({text})" if text else ""


class SpecError(Exception):
    """An invalid polyaxonfile; ``errors`` lists every problem found."""

    def __init__(self, source: str, errors: list[FieldError]):
        self.source = source
        self.errors = list(errors)
        super().__init__(self._render())

    def _render(self) -> str:
        count = len(self.errors)
        lines = [f"{self.source}: invalid polyaxonfile ({count} error{'s' if count != 1 else ''})"]
        for err in self.errors:
            lines.append(f"  {err.loc or '<document>'}{err.where()}: {err.msg}")
        return "\n".join(lines)


class SpecWarning(UserWarning):
    """A polyaxonfile uses a Polyaxon feature that opsched accepts but ignores."""


class Problems(Exception):
    def __init__(self, problems: list[Problem]):
        super().__init__(problems)
        self.problems = problems
