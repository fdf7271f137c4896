"""The blocks marked for tests (tests/docs.py) on the README and the manual's pages: found by name on whichever page
holds them, and a marker astray, or one name on two pages, is an error."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs import snippet, snippets

PAGE = """# Title

<!-- doc-test: hello -->
```python
print("hello")
```

```python
print("not marked")
```
"""


def test_a_marked_block_is_its_code(tmp_path: Path):
    (tmp_path / "README.md").write_text(PAGE)
    assert snippets(tmp_path / "README.md") == {"hello": 'print("hello")\n'}
    with pytest.raises(KeyError, match="no block marked <!-- doc-test: bye -->"):
        snippet("bye", tmp_path / "README.md")


@pytest.mark.parametrize("page, error", [
    (PAGE + "\n<!-- doc-test: hello -->\n```\nagain\n```\n", "marks two blocks"),
    (PAGE + "\n<!-- doc-test: loose -->\ntext\n```\ncode\n```\n", "loose not right before a fenced code block"),
])
def test_a_marker_astray_is_refused(tmp_path: Path, page: str, error: str):
    (tmp_path / "README.md").write_text(page)
    with pytest.raises(ValueError, match=error):
        snippets(tmp_path / "README.md")


def test_a_name_marks_one_block_across_the_pages(tmp_path: Path):
    (tmp_path / "README.md").write_text(PAGE)
    (tmp_path / "page.md").write_text("# Page\n\n<!-- doc-test: bye -->\n```bash\necho bye\n```\n")
    pages = [tmp_path / "README.md", tmp_path / "page.md"]
    assert snippet("bye", pages) == "echo bye\n" and snippet("hello", pages) == 'print("hello")\n'
    (tmp_path / "page.md").write_text(PAGE)
    with pytest.raises(ValueError, match="marks two blocks"):
        snippets(pages)


def test_the_blocks_are_found_on_every_page_of_the_manual():
    assert "Client.from_context()" in snippet("sdk")  # docs/sdk.md
    assert snippet("up").startswith("opsched up")       # README.md
    assert {"two-commands", "up", "tour", "using-it", "sweep", "sdk", "prices", "context-file"} <= set(snippets())
