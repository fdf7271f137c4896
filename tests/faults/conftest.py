"""The fault suite: every test here runs against real parts (nats-server, the control plane, the services as
processes) and is marked ``integration`` (so it may not skip in CI) and ``faults`` (both marks are given in
tests/conftest.py). scripts/test runs the ``faults`` tests after the rest, in one process, one at a time: the
NATS-cluster case bounds a stall in seconds, a claim for a quiet machine (docs/getting-started.md).
Under pytest-xdist (scripts/test given arguments) they are one group (``--dist loadgroup``): one worker, in turn."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.faults.stage import Layout, Stage

_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.xdist_group("faults"))


@pytest.fixture
async def stage_for(control_plane, tmp_path):
    """``await stage_for(layout)``: a started ``Stage`` (NATS, simulated GPU nodes, the services as processes),
    closed after the test."""
    stages: list[Stage] = []

    async def start(layout: Layout) -> Stage:
        stage = Stage(tmp_path / f"stage-{len(stages)}", control_plane, layout)
        stages.append(stage)
        return await stage.start()

    yield start
    for stage in stages:
        await stage.close()
