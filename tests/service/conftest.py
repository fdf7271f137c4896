"""Service tests run the real services in this process (no Kubernetes: the dispatcher in null mode), each
case twice: on the in-memory bus (``tests.builders.bus``: no server, fast) and on a real nats-server
(marked ``integration``); a module of service logic that is not about the bus says ``BUSES = ["memory"]`` and runs
on the in-memory bus alone. A test that needs the server itself (a service in its own process, the CLI)
asks for ``nats_server`` instead of ``bus`` and runs on it alone.

Both enforce the subject permissions `opsched up` configures (``proto.permissions``; the server is TLS as well,
``tests.securebus``): each service connects as its own user, ``client`` is the SDK as ``admin``, and ``bus`` is
the test's own connection, the test-only harness user that may publish anything (forged events)."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsched.client import Client
from opsched.embedded import ServicesInProcess
from tests.builders import identities
from tests.builders.bus import MemoryBroker
from tests.builders.identities import HARNESS, Identity

_HERE = Path(__file__).resolve().parent
BUSES = ["memory", "nats"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE not in Path(str(item.path)).resolve().parents:
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("bus_kind") != "memory":
            item.add_marker(pytest.mark.integration)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each case on both buses, unless its module says ``BUSES = ["memory"]``: service logic that is not about the
    bus (what differs on a real server: bus semantics, leases, redelivery, sizes, permissions stays on both)."""
    if "bus_kind" in metafunc.fixturenames:
        metafunc.parametrize("bus_kind", getattr(metafunc.module, "BUSES", BUSES), indirect=True)


@pytest.fixture
def bus_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def bus_url(bus_kind: str, request: pytest.FixtureRequest) -> str:
    """The services' NATS_URL (a test nats-server's; unused on the in-memory bus)."""
    return "memory://" if bus_kind == "memory" else request.getfixturevalue("nats_server").url


@pytest.fixture
def connect(bus_kind: str, request: pytest.FixtureRequest):
    """``await connect(url, name, identity=None)``: a new connection to this test's bus, as each service opens
    one: as ``identity``, by default the service of ``opsched-<service>``, else the ``admin`` client."""
    if bus_kind == "nats":
        return request.getfixturevalue("nats_server").connect
    broker = MemoryBroker()

    async def to_memory(url: str, name: str, identity: Identity | None = None):
        return broker.connect(name, identity)
    return to_memory


@pytest.fixture
async def bus(connect, bus_url):
    """The test's own connection: the harness user (it may forge any event; read what it published)."""
    b = await connect(bus_url, "test", HARNESS)
    await b.ensure_streams()
    yield b
    await b.close()


@pytest.fixture
async def client(connect, bus_url, bus):
    """The SDK as ``admin`` (what the CLI of `opsched up` is), on a connection of its own."""
    c = Client(await connect(bus_url, "test-client"))
    yield c
    await c.close()


@pytest.fixture
async def client_as(connect, bus_url, bus):
    """``await client_as("ann")``: the SDK as one of the test users (``identities.USERS``: its role's
    permissions, its name the requester of its commands), on a connection of its own."""
    made: list[Client] = []

    async def make(user: str) -> Client:
        made.append(Client(await connect(bus_url, f"test-{user}", identities.user(user))))
        return made[-1]
    yield make
    for c in made:
        await c.close()


@pytest.fixture
async def stack_factory(bus_kind, connect, bus_url, request: pytest.FixtureRequest):
    from opsched.services.runtime.settings import Settings

    stacks: list[ServicesInProcess] = []
    server = request.getfixturevalue("nats_server") if bus_kind == "nats" else None
    secured = {"nats_ca_file": server.ca, "env_key_file": server.env_key} if server else {}  # as `opsched up`

    async def make(names=("admission", "cost", "cache", "dispatcher"), **overrides) -> ServicesInProcess:
        """Services in this process, each as its own NATS user."""
        # json, as deployed: structlog's console renderer cost a third of these tests' CPU (most of it in system time)
        settings = Settings(**{"nats_url": bus_url, **secured, "log_format": "json", **overrides})
        stack = await ServicesInProcess(settings, tuple(names), connect).start()
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        await stack.close()
