"""The README's code blocks that tests run: a block is marked by the HTML comment ``<!-- doc-test: NAME -->`` on
the line before its opening fence (invisible on the rendered page). ``snippet("sdk")`` is that block's code."""
from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
_MARKED = re.compile(r"^<!-- doc-test: (?P<name>[a-z0-9-]+) -->\n```(?P<lang>\w*)\n(?P<code>.*?)^```$",
                     re.MULTILINE | re.DOTALL)


def snippets(readme: Path = README) -> dict[str, str]:
    """Every marked block of ``readme``, by name (a name marked twice: an error, a test would run one of them)."""
    found: dict[str, str] = {}
    for match in _MARKED.finditer(readme.read_text()):
        if match["name"] in found:
            raise ValueError(f"{readme}: doc-test {match['name']!r} marks two blocks")
        found[match["name"]] = match["code"]
    markers = re.findall(r"<!-- doc-test: ([^ ]+) -->", readme.read_text())
    unmatched = [name for name in markers if name not in found]
    if unmatched:
        raise ValueError(f"{readme}: doc-test {', '.join(unmatched)} not right before a fenced code block")
    return found


def snippet(name: str, readme: Path = README) -> str:
    blocks = snippets(readme)
    if name not in blocks:
        raise KeyError(f"{readme} has no block marked <!-- doc-test: {name} --> (marked: {', '.join(blocks)})")
    return blocks[name]
