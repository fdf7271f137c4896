"""The README's blocks marked for tests (tests/docs.py): found by name, and a marker astray is an error."""
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


def test_the_readme_sdk_block_is_marked():
    assert "Client.from_context()" in snippet("sdk")
