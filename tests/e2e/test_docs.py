"""The commands of the README and the manual (docs/), run as written: each command block marked ``doc-test`` runs in
bash, from the repository's root, beside `opsched up` as it starts by default (``default_up``: TLS, users, permissions), found as a
user finds it after the line `opsched up` prints (``export OPSCHED_CONTEXT=...``). A command that fails as written
fails the block (``set -euo pipefail``). The configuration blocks load in tests/unit/test_doc_blocks.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs import ROOT, snippet
from tests.e2e.firstday import User, clean_env


def run_block(name: str, up: User, timeout: float = 300) -> subprocess.CompletedProcess:
    env = clean_env() | {"OPSCHED_CONTEXT": str(up.data_dir / "context.json"),
                         "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", snippet(name)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_the_up_block_is_how_the_tests_start_opsched():
    assert snippet("up").split("#")[0].split() == ["opsched", "up"]  # tests/e2e/firstday.py: opsched up (+ its files)


@pytest.mark.parametrize("name", ["using-it", "sweep", "tour", "polyaxon-files"])
def test_a_readme_command_block_runs_as_written(default_up: User, name: str):
    done = run_block(name, default_up)
    assert done.returncode == 0, f"doc block {name} exited {done.returncode}:\n{done.stderr}\n{done.stdout}"
    assert "Traceback" not in done.stderr
