"""Docs that run: every code block of the README and docs/ is run by a test or says why not
(tests/docs.py); the configuration blocks load as admission and cost load them; the two commands are CI's and the
demo's; the context file example is one the CLI and SDK read. The command blocks run on `opsched up` as it starts
by default in tests/e2e/test_docs.py, the SDK block in tests/integration/test_up_clients.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsched import context
from opsched.rules.queues_file import load_queues
from opsched.services.admission.model.queues import compile_book
from opsched.services.cost.prices import load_prices
from tests.docs import CODE, ROOT, blocks, snippet

TESTS = ROOT / "tests"


def _referenced(name: str) -> bool:
    quoted = (f'"{name}"', f"'{name}'")
    return any(q in path.read_text() for path in TESTS.rglob("*.py") if path.name != "docs.py" for q in quoted)


def test_every_code_block_is_run_by_a_test_or_says_why_not():
    code = [b for b in blocks() if b.lang in CODE]
    assert len(code) >= 20, "the scan finds the blocks of the README and docs/"
    unmarked = [str(b) for b in code if not b.name and not b.not_run]
    assert not unmarked, f"mark each with <!-- doc-test: NAME --> (and run it) or <!-- not-run: REASON -->: {unmarked}"
    vague = [str(b) for b in code if b.not_run and len(b.not_run) < 30]
    assert not vague, f"a not-run block says why, and what runs the same in its place: {vague}"
    unrun = [f"{b} {b.name}" for b in code if b.name and not _referenced(b.name)]
    assert not unrun, f"blocks marked doc-test that no test names: {unrun}"


QUEUE_BLOCKS = ["queues-example", "queues-agents", "queues-priorities", "queues-topology", "queues-budgets",
                "queues-access", "queues-pod-security", "queues-connections", "queues-services", "queues-nested-cohorts",
                "queues-pools"]


@pytest.mark.parametrize("name", QUEUE_BLOCKS)
def test_a_queue_configuration_block_loads_and_compiles_as_admission_takes_it(name, tmp_path: Path):
    path = tmp_path / f"{name}.yaml"
    path.write_text(snippet(name))
    book = compile_book(load_queues(path))
    assert book is not None


def test_the_price_catalogue_block_loads_as_cost_takes_it(tmp_path: Path):
    path = tmp_path / "prices.yaml"
    path.write_text(snippet("prices"))
    prices = load_prices(path)
    assert prices is not None and prices.history_floor_seconds == 600.0


def test_the_context_file_block_is_one_the_cli_and_sdk_read(tmp_path: Path):
    path = tmp_path / "context.json"
    path.write_text(snippet("context-file"))
    read = context.read(path)
    assert read.url == "tls://127.0.0.1:4222" and read.user == "admin" and read.password_file is not None


def test_the_two_commands_are_the_demo_and_what_ci_runs():
    commands = [line.split("#")[0].strip() for line in snippet("two-commands").splitlines() if line.strip()]
    assert commands == ["./scripts/demo", "./scripts/test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test" in ci.split("set -euo pipefail", 1)[1]
    assert "up --demo" in (ROOT / "scripts" / "demo").read_text()  # tests/e2e/test_demo.py runs the same
