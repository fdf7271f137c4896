"""What keeps a live service from progressing (``services.runtime.stalls``): a refused publish keeps /readyz 503,
naming the subject, for a window after the last refusal; a task failing again and again from its third failure
until it succeeds once. /healthz stays 200: a restart would meet the same refusal."""
from __future__ import annotations

from opsched.services.runtime.health import HealthServer
from opsched.services.runtime.runner import report
from opsched.services.runtime.stalls import Stalls
from tests.builders.clock import T0, t
from tests.unit.test_runtime_metrics import fake


def test_a_refused_publish_is_reported_for_the_window_after_the_last_refusal():
    stalls = Stalls(window_s=60)
    stalls.refused("ops.succeeded.a", "refused", T0)
    stalls.refused("ops.succeeded.a", "refused again", t(50))
    (entry,) = stalls.report(t(100)).values()
    assert entry["count"] == 2 and entry["detail"] == "refused again" and entry["since"] == T0.isoformat()
    assert stalls.report(t(111)) == {}


def test_a_failing_task_is_reported_from_its_third_failure_in_a_row_until_it_succeeds():
    stalls = Stalls(threshold=3)
    stalls.failed("cycle", "boom", T0)
    stalls.failed("cycle", "boom", t(1))
    assert stalls.report(t(1)) == {}
    stalls.failed("cycle", "boom", t(2))
    assert list(stalls.report(t(2))) == ["cycle"]
    stalls.succeeded("cycle")
    assert stalls.report(t(3)) == {}


def test_readiness_names_what_does_not_progress_and_liveness_stays():
    service = fake("admission")
    service.liveness = dict
    service.clock.now = lambda: T0
    service.stalls.refused("ops.succeeded.a", "the NATS server refused user 'admission'", T0)
    server = HealthServer(lambda: report([service], [True], [False]))
    assert server._answer("/healthz")[0] == "200 OK"
    status, body = server._answer("/readyz")
    assert status == "503 Service Unavailable"
    assert list(body["not_progressing"]["admission"]) == ["publish ops.succeeded.a"]


def test_a_full_stream_is_reported_until_a_publish_to_it_goes_through():
    stalls = Stalls(window_s=60)
    stalls.full("OPSCHED_OPS", "OPSCHED_OPS is full: maximum bytes exceeded", T0)
    stalls.full("OPSCHED_OPS", "OPSCHED_OPS is full: maximum bytes exceeded", t(5))
    (what,) = stalls.report(t(10))
    assert what == "stream OPSCHED_OPS full" and stalls.report(t(10))[what]["count"] == 2
    stalls.stored("OPSCHED_OPS")
    assert stalls.report(t(11)) == {}


def test_a_stream_at_its_limit_is_told_from_an_outage():
    """nats-server answers a store refused at a limit with 503 / 10077: nats-py's ServiceUnavailableError, which
    also means "no leader"; the description tells them apart (``bus.stream_full``)."""
    import nats.js.errors

    from opsched.bus.bus import as_unavailable, stream_full
    from opsched.proto import subjects

    def refusal(description: str) -> nats.js.errors.APIError:
        return nats.js.errors.ServiceUnavailableError(code=503, err_code=10077, description=description)
    full = stream_full(refusal("maximum messages per subject exceeded"), subjects.submit(None, "ann"))
    assert full is not None and full.per_subject and full.stream == subjects.CMD_STREAM
    assert "OPSCHED_CMD_BACKLOG_PER_SUBJECT" in str(full) and as_unavailable(full) is None
    bytes_full = stream_full(refusal("maximum bytes exceeded"), subjects.event("submitted", "a"))
    assert bytes_full is not None and not bytes_full.per_subject and bytes_full.stream == subjects.OPS_STREAM
    assert stream_full(nats.js.errors.ServiceUnavailableError(), subjects.event("submitted", "a")) is None
