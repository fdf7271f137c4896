"""Service tests run the real services in this process (no Kubernetes: the dispatcher in null mode), each
case twice: on the in-memory bus (``tests.builders.bus``: no server, fast) and on a real nats-server
(marked ``integration``). A test that needs the server itself (a service in its own process, the CLI)
asks for ``nats_server`` instead of ``bus`` and runs on it alone."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsched.embedded import ServicesInProcess
from tests.builders.bus import MemoryBroker

_HERE = Path(__file__).resolve().parent
BUSES = ["memory", "nats"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE not in Path(str(item.path)).resolve().parents:
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("bus_kind") != "memory":
            item.add_marker(pytest.mark.integration)


@pytest.fixture(params=BUSES)
def bus_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def bus_url(bus_kind: str, request: pytest.FixtureRequest) -> str:
    """The services' NATS_URL (a test nats-server's; unused on the in-memory bus)."""
    return "memory://" if bus_kind == "memory" else request.getfixturevalue("nats_server").url


@pytest.fixture
def connect(bus_kind: str):
    """``await connect(url, name)``: a new connection to this test's bus, as each service opens one."""
    if bus_kind == "nats":
        from services.runtime.bus import Bus

        return Bus.connect
    broker = MemoryBroker()

    async def to_memory(url: str, name: str):
        return broker.connect(name)
    return to_memory


@pytest.fixture
async def bus(connect, bus_url):
    b = await connect(bus_url, "test")
    await b.ensure_streams()
    yield b
    await b.close()


@pytest.fixture
async def stack_factory(connect, bus_url):
    from services.runtime.settings import Settings

    stacks: list[ServicesInProcess] = []

    async def make(names=("admission", "cost", "cache", "dispatcher"), **overrides) -> ServicesInProcess:
        settings = Settings(nats_url=bus_url, log_format="console", **overrides)
        stack = await ServicesInProcess(settings, tuple(names), connect).start()
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        await stack.close()
