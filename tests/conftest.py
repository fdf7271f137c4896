"""Shared fixtures: a real nats-server per test, the services running in process, an event log.

The nats-server is secured as `opsched up` runs it by default (``tests.securebus``): TLS, a NATS user per
service with its subject permissions, ``admin`` for clients; the test's own ``bus`` is the test-only harness
user. ``open_nats_server`` is a plain, open one, for the tests about that configuration (``--no-auth``).

CI sets OPSCHED_REQUIRE_INTEGRATION=1: then the run fails if any integration test was skipped
(tests marked ``docker`` may skip: this machine has no Docker engine).
Every admission cycle in the tests checks its tracked snapshot against one built afresh.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("OPSCHED_VERIFY_SNAPSHOT", "1")  # before services are imported

import pytest
import structlog

from opsched.embedded import ServicesInProcess
from opsched.localcluster.controlplane import ControlPlane, ControlPlaneError, ensure_built
from opsched.natsserver import NatsServer
from tests.builders import identities
from tests.builders.identities import HARNESS
from tests.eventlog import EventLog
from tests.securebus import SecureNats, open_server

_skipped_integration: list[str] = []


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """A test that runs the CLI in process reconfigures logging (its level, and the stderr of that moment,
    which pytest's capture then closes): every test leaves logging as it found it."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture
def spans() -> Iterator[object]:
    """Tracing on for this test (``bus.tracing``, every service built from now), its spans kept in
    memory: the fixture is the ``InMemorySpanExporter``."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from opsched.bus import tracing

    exporter = InMemorySpanExporter()
    tracing.install(lambda: [SimpleSpanProcessor(exporter)])
    yield exporter
    tracing.shutdown()


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[SecureNats]:
    """A nats-server with TLS and the generated users (``tests.securebus.SecureNats``: ``url``, ``connect``,
    ``client``, ``env``, ``settings``)."""
    server = SecureNats(tmp_path / "secure-nats").start()
    try:
        yield server
    finally:
        server.discard()


@pytest.fixture
def open_nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A plain nats-server without users (``opsched up --no-tls --no-auth``): only for tests about that."""
    server = open_server(tmp_path / "open-nats").start()
    try:
        yield server
    finally:
        server.kill()  # its store goes with the test: no orderly shutdown to wait for


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[SecureNats]:
    """Three nats-server processes on loopback forming one JetStream cluster, secured as ``nats_server`` (its
    ``server`` is the ``NatsCluster``: kill and restart nodes there)."""
    cluster = SecureNats(tmp_path / "secure-nats", nodes=3).start()
    try:
        yield cluster
    finally:
        cluster.discard()


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A running control plane (etcd, kube-apiserver, kube-scheduler) for the whole session, shared by the
    integration tests and the fault suite (skips if the binaries are unavailable)."""
    try:
        ensure_built()
    except ControlPlaneError as e:
        pytest.skip(f"local Kubernetes control plane unavailable: {e}")
    cp = ControlPlane(tmp_path_factory.mktemp("control-plane"))
    cp.start()
    try:
        yield cp
    finally:
        cp.stop(grace=0)  # killed: its data goes with the session's directory (an orderly stop took 1 to 5 s)


@pytest.fixture
async def bus(nats_server: SecureNats):
    """The test's own connection: the harness user (it may forge any event; read what it published)."""
    b = await nats_server.connect(nats_server.url, "test", HARNESS)
    await b.ensure_streams()
    yield b
    await b.close()


@pytest.fixture
async def client(nats_server: SecureNats, bus):
    """The SDK as ``admin`` (what the CLI of `opsched up` is), on a connection of its own."""
    c = await nats_server.client()
    yield c
    await c.close()


@pytest.fixture
async def client_as(nats_server: SecureNats, bus):
    """``await client_as("alice")``: the SDK as one of the test users (``identities.USERS``: its role's
    permissions, its name the requester of its commands), on a connection of its own."""
    made = []

    async def make(user: str):
        made.append(await nats_server.client(identities.user(user), f"test-{user}"))
        return made[-1]
    yield make
    for c in made:
        await c.close()


@pytest.fixture
async def events(bus):
    log = await EventLog(bus).start()
    yield log
    await log.stop()


Stack = ServicesInProcess  # the four services in this process, as `opsched up` runs them


@pytest.fixture
async def stack_factory(nats_server: SecureNats):
    stacks: list[Stack] = []

    async def make(names=("admission", "cost", "cache", "dispatcher"), **overrides) -> Stack:
        """Services in this process, each as its own NATS user."""
        stack = await Stack(nats_server.settings(**overrides), tuple(names), nats_server.connect).start()
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        await stack.close()


_TESTS = Path(__file__).resolve().parent


@functools.cache
def folders_of(path: Path) -> frozenset[Path]:
    """The folders a test file is in (resolved): once per file, not once per test (6,000 tests, 100 files)."""
    return frozenset(path.resolve().parents)

# What runs against real parts (nats-server, the control plane): a skip there fails CI (below).
MARKS = {_TESTS / "integration": ("integration",), _TESTS / "faults": ("integration", "faults"),
         _TESTS / "security": ("integration",)}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--alone", choices=("with", "skip", "only"), default="with",
                     help="the tests marked alone (each bounds a time in seconds, a claim for an otherwise idle "
                          "machine): run with the rest (default), leave them out, or run them alone; scripts/test "
                          "runs the rest in parallel (pytest-xdist), then these alone and serially")


def pytest_configure(config: pytest.Config) -> None:
    # The local API server has a self-signed certificate on 127.0.0.1 (insecure-skip-tls-verify).
    config.addinivalue_line("filterwarnings", "ignore::urllib3.exceptions.InsecureRequestWarning")


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    """The test uses a fixture set up once per module (a second cluster, manifests applied once)."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (``--dist loadgroup``)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parents = folders_of(item.path)
        for folder, marks in MARKS.items():
            if folder in parents:
                for mark in marks:
                    item.add_marker(getattr(pytest.mark, mark))
        if _shares_a_module_fixture(item) and item.get_closest_marker("xdist_group") is None:
            # under pytest-xdist a module's tests that share such a fixture run on one worker: set up once, as serially
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    alone = config.getoption("alone", "with")
    if alone != "with":
        chosen = {item: (item.get_closest_marker("alone") is not None) == (alone == "only") for item in items}
        config.hook.pytest_deselected(items=[item for item in items if not chosen[item]])
        items[:] = [item for item in items if chosen[item]]


def _on_worker(config: pytest.Config) -> bool:
    """A pytest-xdist worker: its reports reach the controller, which keeps the account (below)."""
    return hasattr(config, "workerinput")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if (report.skipped and not hasattr(report, "wasxfail") and "integration" in report.keywords
            and "docker" not in report.keywords):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr or "")
        _skipped_integration.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under pytest-xdist the controller receives every worker's reports (``pytest_runtest_logreport`` runs there
    for each), so the account is the whole run's; a worker does not judge its share."""
    if (os.environ.get("OPSCHED_REQUIRE_INTEGRATION") == "1" and _skipped_integration
            and not _on_worker(session.config)):
        print("\nOPSCHED_REQUIRE_INTEGRATION=1 but integration tests were skipped:")
        for line in _skipped_integration:
            print(f"  {line}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
