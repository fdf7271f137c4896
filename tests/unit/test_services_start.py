"""`ServicesInProcess.start` (opsched/embedded.py): returns once every service is ready; one that is not ready in
time makes it fail naming that service and the startup step it is stuck in; a service that fails while starting
raises its own error at once (no wait for the timeout)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from opsched import embedded


class FakeService:
    def __init__(self, name: str, stuck_at: str | None = None, fails: bool = False) -> None:
        self.name, self.stuck_at, self.fails = name, stuck_at, fails
        self.ready = asyncio.Event()
        self.starting = "not started"

    async def run(self, bus, stop: asyncio.Event) -> None:
        if self.fails:
            raise ValueError(f"{self.name} cannot start")
        if self.stuck_at is not None:
            self.starting = self.stuck_at
            await stop.wait()
            return
        self.starting = "ready"
        self.ready.set()
        await stop.wait()


class FakeBus:
    async def close(self) -> None:
        pass


async def connect(url: str, name: str) -> FakeBus:
    return FakeBus()


def stack(*services: FakeService) -> embedded.ServicesInProcess:
    running = embedded.ServicesInProcess.__new__(embedded.ServicesInProcess)
    running.settings = SimpleNamespace(health_port=None, nats_url="nats://127.0.0.1:4222")
    running.connect, running.services, running.stop, running.task = connect, list(services), asyncio.Event(), None
    return running


async def test_it_returns_once_every_service_is_ready():
    running = await stack(FakeService("admission"), FakeService("cost")).start(timeout=5)
    assert all(s.ready.is_set() for s in running.services)
    await running.close()


async def test_a_service_not_ready_in_time_is_named_with_the_step_it_is_stuck_in():
    running = stack(FakeService("admission"), FakeService("cost", stuck_at="creating its consumers"))
    with pytest.raises(TimeoutError, match=r"not ready after 0 s \(cost: creating its consumers\)"):
        await running.start(timeout=0.2)
    await running.close()


async def test_a_service_failing_to_start_raises_its_error_without_waiting_for_the_timeout():
    running = stack(FakeService("admission", stuck_at="rebuilding"), FakeService("cost", fails=True))
    with pytest.raises(ValueError, match="cost cannot start"):
        await asyncio.wait_for(running.start(timeout=60), 5)
