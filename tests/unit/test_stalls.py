"""What keeps a live service from progressing (``services.runtime.stalls``): a refused publish keeps /readyz 503,
naming the subject, for a window after the last refusal; a task failing again and again from its third failure
until it succeeds once. /healthz stays 200: a restart would meet the same refusal."""
from __future__ import annotations

from services.runtime.health import HealthServer
from services.runtime.runner import report
from services.runtime.stalls import Stalls
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
