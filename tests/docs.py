"""The code blocks of the README and the manual (docs/) that tests run. Every ``bash``, ``python``, ``yaml`` and
``json`` block of any of these pages carries a marker on the line before its opening fence (an HTML comment, invisible on the
rendered page); a name marks one block across all the pages:

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


def manual_text() -> str:
    """The README and every page of the manual, as one text: what "documented" means to a test."""
    return "\n".join(page.read_text() for page in pages())


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


def _as_pages(where: Path | list[Path] | None) -> list[Path]:
    return pages() if where is None else [where] if isinstance(where, Path) else where


def snippets(where: Path | list[Path] | None = None) -> dict[str, str]:
    """Every marked block of ``where`` (a page, a list of pages; default: ``pages()``, the README and every page of
    docs/), by name. A name marked twice, on one page or on two, is an error: a test would run one of them."""
    found: dict[str, str] = {}
    seen: dict[str, Path] = {}
    for page in _as_pages(where):
        text = page.read_text()
        for match in _MARKED.finditer(text):
            if match["name"] in found:
                raise ValueError(f"{page}: doc-test {match['name']!r} marks two blocks (also in {seen[match['name']]})")
            found[match["name"]], seen[match["name"]] = match["code"], page
        markers = re.findall(r"^<!-- doc-test: ([^ ]+) -->", text, re.MULTILINE)  # a line of its own
        unmatched = [name for name in markers if seen.get(name) != page]
        if unmatched:
            raise ValueError(f"{page}: doc-test {', '.join(unmatched)} not right before a fenced code block")
    return found


def snippet(name: str, where: Path | list[Path] | None = None) -> str:
    """The code of the block marked ``<!-- doc-test: NAME -->``, on whichever page (README.md, docs/) holds it."""
    blocks = snippets(where)
    if name not in blocks:
        pages_ = "README.md and docs/" if where is None else ", ".join(str(page) for page in _as_pages(where))
        raise KeyError(f"{pages_} has no block marked <!-- doc-test: {name} --> (marked: {', '.join(blocks)})")
    return blocks[name]
