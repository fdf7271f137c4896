"""The repository stands on its own: no tracked text file refers to anything outside it (a sibling folder, a design
note kept elsewhere, a path on the machine it was written on), and the README's links lead to files it holds. The
manual is docs/ (built by `mkdocs build --strict` in scripts/test), the README its short version."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.docs import README, ROOT

# Spelled in pieces so that this file does not match itself.
OUTSIDE = re.compile("|".join([
    r"\.\./" + "shared",                      # a folder next to the repository
    r"\bDESIGN" + r"\.md\b",                  # a design note that is not in the repository
    r"(?<![\w.~-])/" + r"work/",              # the machine's work tree
    r"(?<![\w.~-])/" + r"home/(?!me/)\w",     # someone's home folder (/home/me/...: the docs' made-up example)
]))


def tracked_text_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    paths = [ROOT / name for name in listed.decode().split("\0") if name]
    texts = []
    for path in paths:
        if not path.is_file():
            continue  # deleted in the work tree, not yet committed
        data = path.read_bytes()
        if b"\0" not in data[:8192]:
            texts.append(path)
    return texts


def test_no_tracked_file_refers_to_anything_outside_the_repository():
    files = tracked_text_files()
    assert len(files) > 100, "git ls-files lists the repository"
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
            for path in files for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
            if OUTSIDE.search(line)]
    assert not hits, "refer to what the repository holds (docs/...), not to outside it:\n" + "\n".join(hits)


@pytest.mark.parametrize("line, outside", [
    ("see ../" "shared/DESIGN" ".md", True), ("the design (DESIGN" ".md)", True), ("cd /" "work/main", True),
    ("/" "home/alice/proj", True), ('"/' 'home/me/proj/.opsched"', False), ("docs/architecture.md", False),
    ("~/.cache/opsched", False), ("network/workload", False),
])
def test_what_counts_as_outside(line: str, outside: bool):
    assert bool(OUTSIDE.search(line)) is outside


def test_the_readme_links_to_files_the_repository_holds_and_stays_short():
    text = README.read_text()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    assert targets, "the README links to the manual"
    missing = sorted({t for t in targets if t and not (ROOT / t).exists()})
    assert not missing, f"README links to files that do not exist: {missing}"
    assert len(text.splitlines()) <= 250, "the README is the short version; the manual is docs/"


def _nav_pages(entries) -> list[str]:
    out: list[str] = []
    for entry in entries:
        for value in (entry.values() if isinstance(entry, dict) else [entry]):
            out.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return out


def test_every_page_of_the_manual_is_in_the_nav_and_every_nav_entry_is_a_page():
    """What `mkdocs build --strict` (scripts/test) also refuses, checked without MkDocs."""
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(nav) == pages


def test_every_docs_page_a_file_names_exists():
    """Messages, docstrings and manifests point to the manual by page (``docs/security.md``): each such page exists."""
    named = {(path, page) for path in tracked_text_files()
             for page in re.findall(r"(?<![\w/.])docs/([\w./-]+?\.(?:md|png))", path.read_text(errors="replace"))}
    assert len(named) > 10, "the scan finds the pages named"
    missing = sorted(f"{path.relative_to(ROOT)}: docs/{page}" for path, page in named if not (ROOT / "docs" / page).is_file())
    assert not missing, f"pages that do not exist: {missing}"
