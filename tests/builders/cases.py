"""Table tests: ``case("a sentence", **args)`` rows, named by their sentence (``ids=case_name``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """One row of a table test; ``name`` is a sentence and becomes the test id."""

    name: str
    args: dict[str, Any]

    def __getattr__(self, key: str) -> Any:
        try:
            return self.args[key]
        except KeyError:
            raise AttributeError(key) from None


def case(name: str, **args: Any) -> Case:
    return Case(name, args)


def case_name(c: Case) -> str:
    return c.name
