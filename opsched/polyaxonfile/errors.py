"""The errors of a polyaxonfile: ``FieldError`` (one problem, located), ``SpecError`` (all of them),
``SpecWarning`` (a Polyaxon feature accepted but ignored), and ``Problems``, which carries the
problems found on the way (``Problem`` = (path in Polyaxon names, message)) until they are located.
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
            where = f" (line {err.line})" if err.line else ""
            lines.append(f"  {err.loc or '<document>'}{where}: {err.msg}")
        return "\n".join(lines)


class SpecWarning(UserWarning):
    """A polyaxonfile uses a Polyaxon feature that opsched accepts but ignores."""


class Problems(Exception):
    def __init__(self, problems: list[Problem]):
        super().__init__(problems)
        self.problems = problems
