"""`opsched up`'s metrics port (opsched/embedded.py): 8090 by default as the docs say, off with 0, the default
taken by another process: off and said so; a port given that is taken: exit 2 before anything starts."""
from __future__ import annotations

import errno
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from opsched import embedded
from opsched.cli import parser
from opsched.natsserver import free_port
from tests.docs import manual_text


def up(tmp_path: Path, *options: str) -> embedded.Embedded:
    return embedded.Embedded(parser().parse_args(["--data-dir", str(tmp_path), "up", *options]))


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port another process listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_the_default_port_is_the_one_the_docs_document():
    assert embedded.METRICS_PORT == 8090 and embedded.METRICS_HOST == "127.0.0.1"
    assert "`http://127.0.0.1:8090/metrics`" in manual_text()


def test_by_default_the_services_serve_health_and_metrics_on_the_metrics_port(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch):
    port = free_port()
    monkeypatch.setattr(embedded, "METRICS_PORT", port)
    default = up(tmp_path)
    default.metrics_port = default._metrics_port()
    settings = default.settings()
    assert (settings.health_port, settings.health_host) == (port, "127.0.0.1")
    off = up(tmp_path, "--metrics-port", "0")
    assert off._metrics_port() is None


def test_the_default_port_taken_means_no_metrics_said_so(tmp_path: Path, taken: int, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]):
    monkeypatch.setattr(embedded, "METRICS_PORT", taken)
    assert up(tmp_path)._metrics_port() is None
    assert f"metrics port {taken} is taken" in capsys.readouterr().err


def test_a_port_given_that_is_taken_stops_opsched_up(tmp_path: Path, taken: int, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exited:
        up(tmp_path, "--metrics-port", str(taken))._metrics_port()
    assert exited.value.code == 2
    assert f"error: --metrics-port {taken}:" in capsys.readouterr().err


class _Services:
    """``ServicesInProcess`` as far as ``_start_services`` uses it: binding the health port fails while it is taken."""
    started: list[int | None] = []

    def __init__(self, settings, names=(), connect=None) -> None:
        self.port = settings.health_port

    async def start(self) -> "_Services":
        _Services.started.append(self.port)
        if self.port is not None:
            raise OSError(errno.EADDRINUSE, "Address already in use")
        return self


async def test_the_default_port_taken_between_the_probe_and_the_bind_means_no_metrics_said_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Another `opsched up` starting beside this one takes 8090 after this one probed it free."""
    monkeypatch.setattr(embedded, "ServicesInProcess", _Services)
    monkeypatch.setattr(_Services, "started", [])
    default = up(tmp_path)
    default.metrics_port = embedded.METRICS_PORT  # as the probe found it: free
    await embedded._start_services(default)
    assert _Services.started == [embedded.METRICS_PORT, None] and default.metrics_port is None
    assert f"metrics port {embedded.METRICS_PORT} was taken as the services started" in capsys.readouterr().err


async def test_a_port_given_taken_at_the_bind_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(embedded, "ServicesInProcess", _Services)
    monkeypatch.setattr(_Services, "started", [])
    given = up(tmp_path, "--metrics-port", "9123")
    given.metrics_port = 9123
    with pytest.raises(OSError):
        await embedded._start_services(given)
    assert _Services.started == [9123]
