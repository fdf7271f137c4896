"""The fault suite: every test here runs against real parts (nats-server, the control plane, the services as
processes) and is marked ``integration`` (so it may not skip in CI) and ``faults`` (both marks are given in
tests/conftest.py). It runs with the rest, a case per pytest-xdist worker at a time: its assertions are about
what was lost, duplicated or left over, never about how long it took."""
from __future__ import annotations

import pytest

from bench.faults.stage import Layout, Stage
from opsched.localcluster.controlplane import ControlPlane


@pytest.fixture
def own_control_plane(tmp_path):
    """A control plane of the test's own, for a fault that kills the API server: the session's goes on serving the
    worker's next tests, whose pods would otherwise wait on a kube-scheduler still backing off from the outage."""
    cp = ControlPlane(tmp_path / "control-plane").start()
    try:
        yield cp
    finally:
        cp.stop(grace=0)  # killed: its data goes with the test's directory (an orderly stop took 1 to 5 s)


@pytest.fixture
async def stage_for(control_plane, tmp_path):
    """``await stage_for(layout)``: a started ``Stage`` (NATS, simulated GPU nodes, the services as processes) on
    the session's control plane, or on ``await stage_for(layout, own)``, closed after the test."""
    stages: list[Stage] = []

    async def start(layout: Layout, on: ControlPlane | None = None) -> Stage:
        stage = Stage(tmp_path / f"stage-{len(stages)}", on or control_plane, layout)
        stages.append(stage)
        return await stage.start()

    yield start
    for stage in stages:
        await stage.close()
