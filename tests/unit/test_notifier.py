"""The notifier's pure parts: triggers and matching, the connections file, the signature, each sink's
request — the last against a real HTTP receiver on loopback that verifies the signature and parses the
CloudEvent with the ``cloudevents`` SDK."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cloudevents.v1.http import from_http

from opsched.services.notifier import connections, signature, sinks, triggers
from opsched.services.notifier.post import post_blocking
from opsched.services.notifier.triggers import OpNotification

T0 = datetime(2026, 11, 28, 21, 0, tzinfo=UTC)


# --- triggers and matching ---------------------------------------------------------------------------

@pytest.mark.parametrize(("trigger", "event", "fires"), [
    ("succeeded", "succeeded", True), ("succeeded", "failed", False), ("failed", "timed_out", True),
    ("done", "rejected", False), ("rejected", "rejected", True), ("done", "skipped", True), ("done", "stopped", True), ("done", "preempted", False),
    ("stopped", "stopped", True), ("preempted", "preempted", True), ("budget_exceeded", "succeeded", False),
])
def test_fires(trigger: str, event: str, fires: bool) -> None:
    assert triggers.fires(trigger, event) is fires


def test_polyaxonfile_notifications_are_validated() -> None:
    from pydantic import ValidationError

    from opsched.polyaxonfile.models_operation import PluginsModel
    ok = PluginsModel.model_validate({"notifications": [{"connections": ["ops"]},
                                                        {"connections": ["ce"], "trigger": "failed"}]})
    assert [(n.trigger, n.connections) for n in ok.notifications] == [("done", ["ops"]), ("failed", ["ce"])]
    for bad, named in (({"connections": ["ops"], "trigger": "finished"}, "'finished'"),
                       ({"connections": "ops"}, "connections"), ({"connections": []}, "connections"),
                       ({"connections": ["ops"], "url": "http://x"}, "url")):
        with pytest.raises(ValidationError, match=named):
            PluginsModel.model_validate({"notifications": [bad]})


def test_connections_for_merges_own_and_subscriptions_once() -> None:
    cf = connections.parse({
        "connections": [{"name": "ops", "kind": "slack", "url": "http://127.0.0.1:9/x"},
                        {"name": "ce", "kind": "cloudevents", "url": "http://127.0.0.1:9/ce"}],
        "subscriptions": [{"queues": ["gpu"], "on": ["failed", "preempted"], "connections": ["ops", "ce"]},
                          {"queues": "all", "on": ["done"], "connections": ["ops"]}],
    })
    own = [OpNotification("failed", ("ops",)), OpNotification("succeeded", ("mine",))]
    assert triggers.connections_for("timed_out", "gpu", own, cf.subscriptions) == ["ops", "ce"]
    assert triggers.connections_for("succeeded", "cpu", own, cf.subscriptions) == ["mine", "ops"]
    assert triggers.connections_for("preempted", "cpu", own, cf.subscriptions) == []
    assert triggers.connections_for("running", "gpu", own, cf.subscriptions) == []


def test_delivery_id_is_deterministic_per_trigger_and_connection() -> None:
    a = triggers.delivery_id("evt-1", "ops")
    assert a == triggers.delivery_id("evt-1", "ops")
    assert a != triggers.delivery_id("evt-1", "ce") and a != triggers.delivery_id("evt-2", "ops")


# --- the connections file ----------------------------------------------------------------------------

@pytest.mark.parametrize(("data", "named"), [
    ({"connections": [{"name": "a", "kind": "email", "url": "http://h/"}]}, "kind"),
    ({"connections": [{"name": "a", "kind": "slack", "url": "ftp://h/x"}]}, "url"),
    ({"connections": [{"name": "a", "kind": "slack", "url": "http://h/", "token": "x"}]}, "token"),
    ({"connections": [{"name": "a", "kind": "webhook", "url": "http://h/"}]}, "secretFile"),
    ({"connections": [{"name": "a", "kind": "slack", "url": "http://h/"}] * 2}, "twice"),
    ({"subscriptions": [{"on": ["failed"], "connections": ["nope"]}]}, "'nope'"),
    ({"connections": [{"name": "a", "kind": "slack", "url": "http://h/"}],
      "subscriptions": [{"on": ["exploded"], "connections": ["a"]}]}, "'exploded'"),
    ({"bogus": []}, "bogus"),
])
def test_connections_file_refusals_name_the_field(data: object, named: str) -> None:
    with pytest.raises(connections.ConnectionsError, match=named):
        connections.parse(data)


def test_connections_file_loads(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("s3cret\n")
    (tmp_path / "c.yaml").write_text(
        f"connections:\n- name: hook\n  kind: webhook\n  url: https://127.0.0.1/h\n  secretFile: {tmp_path}/secret\n")
    cf = connections.load(tmp_path / "c.yaml")
    assert cf.by_name()["hook"].secret() == b"s3cret"


# --- the signature -----------------------------------------------------------------------------------

def test_signature_round_trip_and_refusals() -> None:
    body = b'{"x":1}'
    h = signature.sign(b"k", body, 1000)
    assert signature.verify(b"k", body, h, now_unix=1299) == 1000
    with pytest.raises(signature.SignatureError, match="replay window"):
        signature.verify(b"k", body, h, now_unix=1301)
    with pytest.raises(signature.SignatureError, match="no v1 signature matches"):
        signature.verify(b"other", body, h, now_unix=1000)
    with pytest.raises(signature.SignatureError, match="no v1 signature matches"):
        signature.verify(b"k", b'{"x":2}', h, now_unix=1000)
    with pytest.raises(signature.SignatureError, match="no Opsched-Signature"):
        signature.verify(b"k", body, None, now_unix=1000)
    with pytest.raises(signature.SignatureError, match="no integer t="):
        signature.verify(b"k", body, "v1=ab", now_unix=1000)


# --- each sink's request, at a real receiver ---------------------------------------------------------

class _Receiver:
    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, str], bytes]] = []
        self.status = 200
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.got.append((self.path, dict(self.headers.items()), body))
                self.send_response(outer.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    r = _Receiver()
    t = threading.Thread(target=r.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


def _delivery(conn: str) -> sinks.Delivery:
    return sinks.Delivery(triggers.delivery_id("evt-9", conn), conn, "succeeded", "op-1", T0,
                          {"id": "op-1", "status": "succeeded", "queue": "gpu"})


def test_webhook_arrives_signed(receiver: _Receiver, tmp_path: Path) -> None:
    (tmp_path / "s").write_text("whsec")
    conn = connections.Connection(name="hook", kind="webhook", url=receiver.url + "/hook",
                                  secret_file=tmp_path / "s", headers={"X-Team": "ml"})
    out = post_blocking(sinks.request(conn, _delivery("hook")), timeout_s=5)
    assert out.delivered and out.status == 200
    [(path, headers, body)] = receiver.got
    assert path == "/hook" and headers["X-Team"] == "ml"
    assert headers["Opsched-Delivery"] == triggers.delivery_id("evt-9", "hook")
    assert headers["Opsched-Event"] == "succeeded"
    assert signature.verify(b"whsec", body, headers["Opsched-Signature"], now_unix=T0.timestamp() + 10)
    doc = json.loads(body)
    assert doc["op"] == "op-1" and doc["data"]["status"] == "succeeded"


def test_cloudevent_arrives_structured(receiver: _Receiver) -> None:
    conn = connections.Connection(name="ce", kind="cloudevents", url=receiver.url + "/ce")
    assert post_blocking(sinks.request(conn, _delivery("ce")), timeout_s=5).delivered
    [(_, headers, body)] = receiver.got
    assert headers["Content-Type"] == "application/cloudevents+json"
    event = from_http(headers, body)
    assert event["id"] == triggers.delivery_id("evt-9", "ce")
    assert event["type"] == "io.opsched.operation.succeeded"
    assert event["subject"] == "op-1"
    assert event.data == {"id": "op-1", "status": "succeeded", "queue": "gpu"}


def test_slack_message(receiver: _Receiver) -> None:
    conn = connections.Connection(name="ops", kind="slack", url=receiver.url + "/services/T/B/X")
    assert post_blocking(sinks.request(conn, _delivery("ops")), timeout_s=5).delivered
    assert json.loads(receiver.got[0][2]) == {"text": "opsched: operation op-1 succeeded"}


def test_failed_attempts_are_outcomes_not_exceptions(receiver: _Receiver) -> None:
    conn = connections.Connection(name="ops", kind="slack", url=receiver.url + "/x")
    receiver.status = 503
    out = post_blocking(sinks.request(conn, _delivery("ops")), timeout_s=5)
    assert out.status == 503 and not out.delivered
    receiver.status = 302
    assert not post_blocking(sinks.request(conn, _delivery("ops")), timeout_s=5).delivered
    closed = connections.Connection(name="ops", kind="slack", url="http://127.0.0.1:1/x")
    out = post_blocking(sinks.request(closed, _delivery("ops")), timeout_s=5)
    assert out.status is None and out.error


# --- retries and the dead letter ---------------------------------------------------------------------

def test_retry_schedule_is_capped_and_bounded() -> None:
    from datetime import timedelta

    from opsched.services.notifier.retrying import Retrying
    from opsched.services.runtime.backoff import Backoff
    r = Retrying(Backoff(base_s=1, cap_s=8, jitter=0, rand=lambda: 0.0), give_up_after=timedelta(seconds=30))
    now, delays = T0, []
    for failures in range(1, 20):
        delay = r.next_try(T0, failures, now)
        if delay is None:
            break
        delays.append(delay)
        now += timedelta(seconds=delay)
    assert delays == [1, 2, 4, 8, 8]  # 23 s in; one more 8 s wait would end past 30 s: dead letter
    assert r.next_try(T0, 1, T0 + timedelta(seconds=31)) is None


# --- the manual's blocks (docs/notifications.md) ---------------------------------------------------------

def test_the_manuals_blocks_are_what_the_code_takes() -> None:
    import time

    import yaml

    from opsched.polyaxonfile.models_operation import PluginsModel
    from tests.docs import snippet
    plugins = PluginsModel.model_validate(yaml.safe_load(snippet("notify-op"))["plugins"])
    assert plugins.notifications[0].trigger == "failed"
    cf = connections.parse(yaml.safe_load(snippet("notify-connections")))
    assert [c.kind for c in cf.connections] == ["webhook", "cloudevents"]
    scope: dict[str, object] = {}
    exec(snippet("notify-verify"), scope)  # noqa: S102 - the manual's receiver-side check, run as written
    body = b'{"event":"succeeded"}'
    now = int(time.time())
    scope["verify"](b"k", body, signature.sign(b"k", body, now))  # type: ignore[operator]
    with pytest.raises(ValueError, match="bad signature"):
        scope["verify"](b"other", body, signature.sign(b"k", body, now))  # type: ignore[operator]
    with pytest.raises(ValueError, match="too old"):
        scope["verify"](b"k", body, signature.sign(b"k", body, now - 600))  # type: ignore[operator]


def test_a_hanging_receiver_is_a_timed_out_attempt_off_the_event_loop() -> None:
    import asyncio
    import socket

    from opsched.services.notifier.post import post
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # accepts the connection, never answers
    conn = connections.Connection(name="ops", kind="slack", url=f"http://127.0.0.1:{listener.getsockname()[1]}/x")

    async def main() -> tuple[object, int]:
        ticks = 0
        attempt = asyncio.ensure_future(post(sinks.request(conn, _delivery("ops")), timeout_s=0.3))
        while not attempt.done():  # the loop keeps running while the attempt hangs
            ticks += 1
            await asyncio.sleep(0)
        return attempt.result(), ticks

    try:
        outcome, ticks = asyncio.run(asyncio.wait_for(main(), timeout=10))
    finally:
        listener.close()
    assert not outcome.delivered and outcome.status is None and "timed out" in outcome.error  # type: ignore[attr-defined]
    assert ticks > 1


def test_an_ops_notifications_are_carried_on_its_spec_the_operations_over_the_components() -> None:
    from opsched.polyaxonfile import parse_polyaxonfile
    component = ("kind: component\nname: c\nplugins: {notifications: [{connections: [comp-hook]}]}\n"
                 "run: {kind: job, container: {image: python:3.11-slim}}\n")
    spec = parse_polyaxonfile("version: 1.1\n" + component)
    assert [(n.trigger, n.connections) for n in spec.notifications] == [("done", ["comp-hook"])]
    assert "plugins.notifications" not in spec.ignored  # honoured, no longer warned
    op_file = ("version: 1.1\nkind: operation\nname: o\nplugins: {notifications: [{connections: [a, b], "
               "trigger: failed}]}\ncomponent:\n" + "".join("  " + line + "\n" for line in component.splitlines()))
    spec = parse_polyaxonfile(op_file)
    assert [(n.trigger, n.connections) for n in spec.notifications] == [("failed", ["a", "b"])]
