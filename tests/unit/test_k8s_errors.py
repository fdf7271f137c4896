"""The Kubernetes API's failures sorted: an outage of the API server (waited out, never dead-lettered)
versus an answer (404, 409, a refusal) or a bug; every call carries the request timeout; a dispatch that
meets an outage says so about its op once."""
from __future__ import annotations

import pytest
import urllib3
from kubernetes.client.rest import ApiException

from opsched.bus import logging as oplog
from opsched.bus.errors import DependencyUnavailable
from opsched.proto.events import DispatchDelayed, OperationDispatched
from opsched.services.dispatcher.dispatch import dispatch
from opsched.services.dispatcher.k8s import KUBERNETES, Kube, unavailable
from opsched.services.dispatcher.metrics import PodMeasures
from opsched.services.dispatcher.preempt import Releaser
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, admitted, op
from tests.builders.clock import FakeClock

REFUSED = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] refused")


@pytest.mark.parametrize("error", [
    pytest.param(ApiException(status=503, reason="Service Unavailable"), id="503 from the API server"),
    pytest.param(ApiException(status=500, reason="Internal Server Error"), id="500"),
    pytest.param(ApiException(status=504, reason="Gateway Timeout"), id="504 from a load balancer"),
    pytest.param(ApiException(status=429, reason="Too Many Requests"), id="429 throttled"),
    pytest.param(ApiException(status=0, reason="SSL handshake failed"), id="no HTTP answer at all (status 0)"),
    pytest.param(urllib3.exceptions.MaxRetryError(None, "/api/v1/pods", REFUSED), id="MaxRetryError, refused"),
    pytest.param(urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError()), id="reset"),
    pytest.param(urllib3.exceptions.ReadTimeoutError(None, "/api/v1/pods", "Read timed out."), id="read timeout"),
    pytest.param(ConnectionRefusedError(111, "Connection refused"), id="connection refused"),
    pytest.param(TimeoutError("timed out"), id="a socket timeout"),
])
def test_an_api_server_that_cannot_take_the_call_now_is_unavailable(error):
    outage = unavailable(error)
    assert isinstance(outage, DependencyUnavailable) and outage.dependency == KUBERNETES and outage.detail


@pytest.mark.parametrize("error", [
    pytest.param(ApiException(status=404, reason="Not Found"), id="404 is an answer"),
    pytest.param(ApiException(status=409, reason="Conflict"), id="409 is an answer"),
    pytest.param(ApiException(status=403, reason="Forbidden"), id="403 refuses for good"),
    pytest.param(ApiException(status=422, reason="Unprocessable Entity"), id="422 refuses for good"),
    pytest.param(KeyError("metadata"), id="a bug"),
])
def test_answers_and_bugs_are_not_outages(error):
    assert unavailable(error) is None


class Core:
    """CoreV1Api's calls the dispatcher makes: each records its keyword arguments, then raises ``error``."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error, self.calls = error, []

    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            self.calls.append((name, kwargs))
            if self.error is not None:
                raise self.error
            return type("Answer", (), {"data": b'{"items": []}', "items": []})()
        return call


def kube(core: Core, timeout: float = 7.0) -> Kube:
    k = Kube.__new__(Kube)
    k.core, k.request_timeout_s = core, timeout  # type: ignore[assignment]
    k.measures = PodMeasures()
    return k


async def test_every_kubernetes_call_carries_the_request_timeout():
    core = Core()
    k = kube(core, timeout=7.0)
    await k.create_pod({"metadata": {"namespace": "ns", "name": "p"}})
    await k.annotate_pod("p", "ns", {"a": "b"})
    await k.list_pods("app=x")
    await k.pod_names("ns", "app=x")
    await k.delete_pod("p", "ns", 5)
    assert len(core.calls) == 5
    assert all(kwargs["_request_timeout"] == 7.0 for _, kwargs in core.calls)


def test_the_request_timeout_is_a_setting_with_a_sane_default():
    assert 0 < Settings().kube_request_timeout_s <= 60


def context(clock: FakeClock) -> Context:
    return Context("dispatcher", clock, Settings(), oplog.get("dispatcher"))


async def test_a_dispatch_that_meets_an_outage_waits_and_says_so_about_its_op():
    k = kube(Core(urllib3.exceptions.MaxRetryError(None, "/api/v1/namespaces/ns/pods", REFUSED)))
    event = admitted(op("train").build(), op_id="op-1")
    with pytest.raises(DependencyUnavailable) as raised:
        await dispatch(event, context(FakeClock(T0)), k, Releaser(k, Settings(), oplog.get("test")))
    [delayed] = raised.value.events
    assert isinstance(delayed, DispatchDelayed)
    assert (delayed.op_id, delayed.attempt, delayed.dependency) == ("op-1", event.attempt, KUBERNETES)
    assert "MaxRetryError" in delayed.message


async def test_a_dispatch_once_the_api_server_answers_is_dispatched():
    k = kube(Core())
    event = admitted(op("train").build(), op_id="op-1")
    result = await dispatch(event, context(FakeClock(T0)), k, Releaser(k, Settings(), oplog.get("test")))
    assert isinstance(result, OperationDispatched)


async def test_pod_creates_are_timed_and_their_errors_counted_by_status():
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    ok, refused, away = kube(Core()), kube(Core(ApiException(status=422, reason="Invalid"))), \
        kube(Core(ConnectionRefusedError(111, "Connection refused")))
    away.measures = refused.measures = ok.measures
    await ok.create_pod({"metadata": {"namespace": "ns", "name": "p"}})
    for k in (refused, away):
        with pytest.raises(Exception):  # noqa: B017 - any: what is counted is the point
            await k.create_pod({"metadata": {"namespace": "ns", "name": "q"}})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(type("C", (), {"collect": lambda self: ok.measures.families()})())  # type: ignore[arg-type]
    got = {(s.name, tuple(s.labels.items())): s.value
           for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}
    assert got[("opsched_pod_create_duration_seconds_count", (("result", "created"),))] == 1
    assert got[("opsched_pod_create_errors_total", (("code", "422"),))] == 1
    assert got[("opsched_pod_create_errors_total", (("code", "unavailable"),))] == 1
