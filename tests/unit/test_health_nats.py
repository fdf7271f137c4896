"""NATS away is weather, not death: while the connection reconnects, /healthz stays 200 (a restart would not
bring NATS back) and /readyz is 503; a connection that gave up reconnecting is for good, so /healthz is 503."""
from __future__ import annotations

from opsched.services.runtime.health import HealthServer
from opsched.services.runtime.runner import report
from tests.unit.test_runtime_metrics import fake


def answers(connected: bool, closed: bool) -> tuple[str, str]:
    service = fake("cost")
    service.liveness, service.waits = dict, None
    server = HealthServer(lambda: report([service], [connected], [closed]))
    return server._answer("/healthz")[0], server._answer("/readyz")[0]


def test_reconnecting_is_alive_and_not_ready():
    assert answers(connected=False, closed=False) == ("200 OK", "503 Service Unavailable")


def test_a_connection_that_gave_up_is_not_alive():
    assert answers(connected=False, closed=True) == ("503 Service Unavailable", "503 Service Unavailable")


def test_connected_is_alive_and_ready():
    assert answers(connected=True, closed=False) == ("200 OK", "200 OK")
