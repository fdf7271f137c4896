"""The fault suite: every test here runs against real parts (nats-server, the control plane, the services as
processes) and is marked ``integration`` (so it may not skip in CI) and ``faults`` (``-m "not faults"`` leaves
it out of a quick run; both marks are given in tests/conftest.py). Under pytest-xdist its cases are
``FAULT_WORKERS`` groups (``--dist loadgroup``): each group's cases run one after another on one worker, so at most
that many stages run at once (each is its own NATS, nodes and service processes, on the worker's control plane)."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.faults.stage import Layout, Stage

_HERE = Path(__file__).resolve().parent
FAULT_WORKERS = 2  # about 9 minutes of cases on one worker would be the suite's critical path


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mine = [item for item in items if _HERE in Path(str(item.path)).resolve().parents]
    for n, item in enumerate(mine):
        item.add_marker(pytest.mark.xdist_group(f"faults-{n % FAULT_WORKERS}"))


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
