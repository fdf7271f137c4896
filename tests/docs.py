"""The code blocks of the README and docs/ that tests run. Every ``bash``, ``python``, ``yaml`` and ``json`` block
carries a marker on the line before its opening fence (an HTML comment, invisible on the rendered page):

- ``<!-- doc-test: NAME -->``: a test runs it (``snippet("NAME")`` is its code; tests/e2e/test_docs.py runs the
  commands on `opsched up` as it starts by default, tests/unit/test_doc_blocks.py loads the configurations);
- ``<!-- not-run: REASON -->``: no test runs it, and REASON says why (a benchmark of minutes, a cluster of yours)
  and which test runs the same thing in its place.

Blocks without a language (output, diagrams) are text, not code."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CODE = ("bash", "sh", "python", "yaml", "json")  # what a user runs or writes: each block is run or says why not
_MARKED = re.compile(r"^<!-- doc-test: (?P<name>[a-z0-9-]+) -->\n```(?P<lang>\w*)\n(?P<code>.*?)^```$",
                     re.MULTILINE | re.DOTALL)
_FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)
_MARKER = re.compile(r"<!-- (?:doc-test: (?P<name>[a-z0-9-]+)|not-run: (?P<reason>.+?)) -->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    code: str
    name: str | None  # doc-test: NAME
    not_run: str | None  # not-run: REASON

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} ({self.lang or 'text'})"


def pages() -> list[Path]:
    """The README and the manual (docs/**/*.md)."""
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(paths: list[Path] | None = None) -> list[Block]:
    """Every fenced block of ``paths`` (default: ``pages()``), with its marker if any."""
    found: list[Block] = []
    for path in paths or pages():
        text = path.read_text()
        for match in _FENCE.finditer(text):
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = _MARKER.match(before)
            found.append(Block(path, text.count("\n", 0, match.start()) + 1, match["lang"], match["code"],
                               marker["name"] if marker else None, marker["reason"] if marker else None))
    return found


def snippets(readme: Path = README) -> dict[str, str]:
    """Every marked block of ``readme``, by name (a name marked twice: an error, a test would run one of them)."""
    found: dict[str, str] = {}
    for match in _MARKED.finditer(readme.read_text()):
        if match["name"] in found:
            raise ValueError(f"{readme}: doc-test {match['name']!r} marks two blocks")
        found[match["name"]] = match["code"]
    markers = re.findall(r"^<!-- doc-test: ([^ ]+) -->", readme.read_text(), re.MULTILINE)  # a line of its own
    unmatched = [name for name in markers if name not in found]
    if unmatched:
        raise ValueError(f"{readme}: doc-test {', '.join(unmatched)} not right before a fenced code block")
    return found


def snippet(name: str, readme: Path = README) -> str:
    blocks = snippets(readme)
    if name not in blocks:
        raise KeyError(f"{readme} has no block marked <!-- doc-test: {name} --> (marked: {', '.join(blocks)})")
    return blocks[name]
