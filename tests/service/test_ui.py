"""The web view over HTTP against running services (``opsched.ui``): a page's event stream starts with a snapshot
and then carries every change of an op until it ends; ``/api/state`` and ``/api/ops/<id>`` answer from what the
bus said; a service that does not answer is named, not waited for; the view writes nothing to the bus."""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from datetime import datetime, timezone
from typing import Any

import pytest

from opsched.proto import subjects
from opsched.proto.events import (
    ErrorRaised,
    OperationAdmitted,
    OperationDispatched,
    OperationRunning,
    OperationSucceeded,
)
from opsched.rules.version import version
from opsched.ui.server import WebView
from tests.builders import op

BUSES = ["memory"]  # service logic, not about the bus: on the in-memory bus alone (tests/service/conftest.py)


class EventStream:
    """A page's ``/api/events``, read as a browser's EventSource does (HTTP/1.1, chunked)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.buffer = reader, writer, b""

    @classmethod
    async def open(cls, view: WebView) -> "EventStream":
        reader, writer = await asyncio.open_connection("127.0.0.1", view.port)
        writer.write(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{view.port}\r\n"
                     "Accept: text/event-stream\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head, head
        return cls(reader, writer)

    async def next(self, timeout: float = 10.0) -> tuple[str, dict[str, Any]]:
        while b"\n\n" not in self.buffer:
            size = int((await asyncio.wait_for(self.reader.readline(), timeout)).strip(), 16)
            self.buffer += (await self.reader.readexactly(size + 2))[:-2]
        message, self.buffer = self.buffer.split(b"\n\n", 1)
        fields = dict(line.split(b": ", 1) for line in message.split(b"\n") if not line.startswith(b":"))
        return fields[b"event"].decode(), json.loads(fields[b"data"])

    async def until(self, done, timeout: float = 10.0) -> list[tuple[str, dict[str, Any]]]:
        seen = []
        while not seen or not done(*seen[-1]):
            seen.append(await self.next(timeout))
        return seen

    def close(self) -> None:
        self.writer.close()


async def get(view: WebView, path: str) -> tuple[int, Any]:
    def fetch() -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(view.url.rstrip("/") + path, timeout=10) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
    status, body = await asyncio.to_thread(fetch)
    return status, json.loads(body) if body.startswith((b"{", b"[")) else body.decode()


@pytest.fixture
async def view(client):
    started = await WebView(client, port=0, interval=60.0).start()
    yield started
    await started.close()


async def test_a_page_gets_a_snapshot_then_every_change_of_an_op_until_it_succeeds(bus, client, stack_factory, events, view):
    await stack_factory(dispatcher_mode="null")
    stream = await EventStream.open(view)
    kind, snapshot = await stream.next()
    assert kind == "snapshot" and snapshot["ops"] == []
    op_id = await client.submit(op("shown").gpus(1).build())
    dispatched = await events.expect(OperationDispatched, op_id)
    now = datetime.now(timezone.utc)
    await bus.publish(OperationRunning(op_id=op_id, at=now, pod_name=dispatched.pod_name, node="gpu-ui"))
    await bus.publish(OperationSucceeded(op_id=op_id, at=now, pod_name=dispatched.pod_name, node="gpu-ui"))
    seen = await stream.until(lambda kind, m: kind == "op" and m["row"]["status"] == "succeeded")
    stream.close()
    statuses = [m["row"]["status"] for kind, m in seen if kind == "op"]
    assert statuses[0] == "pending" and statuses[-1] == "succeeded" and "running" in statuses
    assert [m["event"]["event"] for kind, m in seen if kind == "op"][-2:] == ["running", "succeeded"]

    status, state = await get(view, "/api/state")
    assert status == 200 and [r["opId"] for r in state["ops"]] == [op_id]
    assert state["ops"][0]["node"] == "gpu-ui" and state["ops"][0]["name"] == "shown"
    status, detail = await get(view, f"/api/ops/{op_id}")
    assert status == 200 and detail["timeline"][0]["event"] == "submitted"
    # its history, as `why` answers it (admission folded its submit before admitting it), in the CLI's words
    assert detail["why"]["name"] == "shown" and detail["history"][0]["text"].startswith("submitted to ")
    ended = next(t for t in detail["timeline"] if t["event"] == "succeeded")
    assert ended == {"at": now.isoformat(), "event": "succeeded", "attempt": 0,
                                      "detail": {"node": "gpu-ui", "pod_name": dispatched.pod_name,
                                                 "reason": "Completed"}}


async def test_queues_cost_and_health_come_from_the_services_and_a_silent_one_is_named(bus, stack_factory, view):
    await stack_factory(names=("cost", "cache"), dispatcher_mode="null")  # no admission to answer `queues`
    view.sources.query_timeout = 0.5
    await view.sources.refresh()
    _, state = await get(view, "/api/state")
    assert state["queues"] is None and state["unavailable"]["queues"].startswith("no answer from admission")
    assert state["cost"]["type"] == "cost_answer" and "cost" not in state["unavailable"]
    health = state["health"]  # each service's own account of itself; one that does not answer: None
    assert health["admission"] is None and health["dispatcher"] is None
    assert health["cost"] == {"type": "health_answer", "service": "cost", "instance": health["cost"]["instance"],
                              "version": version()}
    assert "problems" not in health["cache"]  # as sent: the wire leaves defaults out (none: fine)
    await stack_factory(names=("admission",), dispatcher_mode="null")
    await view.sources.refresh()
    _, state = await get(view, "/api/state")
    assert state["queues"]["defaultQueue"] == "default" and state["unavailable"] == {}
    assert state["health"]["admission"]["service"] == "admission"  # leader or standby yet: it answers


async def test_waiting_ops_get_their_position_and_reasons_and_lose_them_when_admitted(
        bus, client, stack_factory, events, view, tmp_path):
    queues = tmp_path / "queues.yaml"
    queues.write_text("defaultQueue: default\nqueues:\n  - {name: default, concurrency: 1}\n")
    await stack_factory(queues_file=queues, dispatcher_mode="null")
    ids = [await client.submit(op(f"w{i}").build(), op_id=f"w{i}") for i in range(3)]
    await events.expect(OperationAdmitted, "w0")
    stream = await EventStream.open(view)
    await stream.until(lambda kind, m: {"w1", "w2"} <= set(view.feed.waiting()))
    await view.sources.refresh()
    _, state = await get(view, "/api/state")
    assert sorted(state["why"]) == ["w1", "w2"]
    assert [(state["why"][i]["position"], state["why"][i]["queuedTotal"]) for i in ("w1", "w2")] == [(1, 2), (2, 2)]
    assert state["why"]["w1"]["reasons"][0]["code"] == "queue_concurrency"
    now = datetime.now(timezone.utc)
    await bus.publish(OperationSucceeded(op_id="w0", at=now, pod_name="op-w0-0"))
    seen = await stream.until(lambda kind, m: kind == "op" and m["row"]["opId"] == "w1" and m["row"]["active"])
    stream.close()
    assert seen[-1][1]["why"] is None  # admitted: its position is gone from the page
    assert ids == ["w0", "w1", "w2"]


async def test_bad_input_is_listed_and_unknown_ops_and_paths_are_404(bus, stack_factory, events, view):
    await stack_factory(dispatcher_mode="null")
    await bus.publish_raw(subjects.submit(None), b"{not json", {"Nats-Msg-Id": "ui-garbage"})
    await events.expect(ErrorRaised, "-")
    stream = await EventStream.open(view)
    await stream.until(lambda kind, m: kind == "snapshot" and m["errors"] or kind == "error")
    stream.close()
    status, body = await get(view, "/api/ops/nobody")
    assert status == 404 and body == {"error": "no operation 'nobody' on the bus"}
    status, _ = await get(view, "/api/nothing")
    assert status == 404
    status, page = await get(view, "/")
    assert status == 200 and "<title>opsched</title>" in page
    status, script = await get(view, "/static/app.js")
    assert status == 200 and "EventSource" in script


async def test_a_port_taken_is_a_clear_error(client, view):
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{view.port}"):
        await WebView(client, port=view.port).start()


async def raw_get(view: WebView, host: str | None) -> bytes:
    """GET /api/state with ``host`` as its Host header (None: none): the status line the view answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", view.port)
    head = "GET /api/state HTTP/1.1\r\n" + (f"Host: {host}\r\n" if host is not None else "") + "\r\n"
    writer.write(head.encode())
    answer = await asyncio.wait_for(reader.readuntil(b"\r\n"), 10)
    writer.close()
    return answer


async def test_the_view_answers_only_its_own_address_a_rebound_name_gets_421(view):
    port = view.port
    for own in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST.:{port}"):
        assert (await raw_get(view, own)).startswith(b"HTTP/1.1 200"), own
    for other in (f"evil.example:{port}", "127.0.0.1:1", f"127.0.0.2:{port}", "localhost"):  # 80: not its port
        assert (await raw_get(view, other)).startswith(b"HTTP/1.1 421"), other
    assert (await raw_get(view, f"user@localhost:{port}")).startswith(b"HTTP/1.1 400")
    assert (await get(view, "/api/state"))[0] == 200  # what its URL says is its own
