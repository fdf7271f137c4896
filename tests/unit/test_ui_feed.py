"""The web view's live state (``opsched.ui.feed``): rows and timelines folded from events, answers kept once per
change, and pages that fall behind dropped rather than waited for; an op's page (``opsched.ui.app``) with its
history as `why` answers it."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from opsched.proto.events import ErrorRaised
from opsched.proto.history import HistoryEntry
from opsched.proto.queries import PendingReason, QueuesAnswer, QueueStatus, WhyAnswer
from opsched.proto.summaries import OpSummary
from opsched.ui.app import build_app
from opsched.ui.feed import TIMELINE_LIMIT, Feed
from tests.builders import op
from tests.builders.events import admitted, failed, gates_cleared, running, submitted, succeeded


def drain(page) -> list:
    out = []
    while not page.empty():
        out.append(page.get_nowait())
    return out


def test_an_op_s_events_become_its_row_and_its_timeline_and_each_goes_to_every_page():
    feed = Feed()
    pages = [feed.subscribe(), feed.subscribe()]
    sub = submitted(op("train").gpus(2).build(), op_id="a")
    for event in [sub, *gates_cleared("a"), admitted(sub), running("a", node="gpu-1"), succeeded("a", node="gpu-1")]:
        feed.fold(event)
    for page in pages:
        messages = drain(page)
        assert [m["event"]["event"] for m in messages] == [
            "submitted", "cost_estimated", "admitted", "running", "succeeded"]  # caching off: no cache answer
        assert messages[-1]["row"]["status"] == "succeeded" and messages[-1]["row"]["terminal"]
    detail = feed.op("a")
    assert detail["row"]["name"] == "train" and detail["row"]["gpus"] == 2 and detail["row"]["node"] == "gpu-1"
    assert detail["timeline"][3]["detail"] == {"node": "gpu-1", "pod_name": "op-a-0"}
    assert detail["timeline"][1]["detail"] == {"estimate": "1.00 USD"}
    assert feed.op("nobody") is None


def test_an_op_s_why_is_kept_while_it_waits_and_forgotten_when_it_is_admitted():
    feed = Feed()
    sub = submitted(op("wait").build(), op_id="w")
    for event in [sub, *gates_cleared("w")]:
        feed.fold(event)
    assert feed.waiting() == ["w"]
    answer = WhyAnswer(op_id="w", found=True, status="queued", queue="default", position=2, queued_total=3,
                       reasons=[PendingReason(code="no_capacity", message="no node has 1 free GPU")])
    page = feed.subscribe()
    feed.answered_why("w", answer)
    feed.answered_why("w", answer)  # the same answer again: nothing new to send
    assert [m["kind"] for m in drain(page)] == ["why"]
    assert feed.snapshot()["why"]["w"]["queuedTotal"] == 3
    feed.fold(admitted(sub))
    (message,) = drain(page)
    assert message["why"] is None and "w" not in feed.snapshot()["why"] and feed.waiting() == []


def test_a_page_that_falls_behind_is_dropped_and_the_others_keep_receiving():
    feed = Feed(buffer=3)
    slow, fast = feed.subscribe(), feed.subscribe()
    for i in range(5):
        feed.fold(submitted(op(f"o{i}").build(), op_id=f"o{i}"))
        drain(fast)
    assert drain(slow) == [None]  # its stream ends: the browser reconnects to a fresh snapshot
    assert feed.pages == 1
    feed.fold(succeeded("o0"))
    assert [m["row"]["opId"] for m in drain(fast)] == ["o0"]


def test_closing_ends_every_page_s_stream():
    feed = Feed()
    page = feed.subscribe()
    feed.fold(submitted(op("x").build(), op_id="x"))
    feed.close()
    assert drain(page) == [None] and feed.pages == 0


def test_a_timeline_keeps_an_op_s_last_events():
    feed = Feed()
    feed.fold(submitted(op("retried").build(), op_id="r"))
    for attempt in range(TIMELINE_LIMIT):
        feed.fold(failed("r", attempt=attempt))
    timeline = feed.op("r")["timeline"]
    assert len(timeline) == TIMELINE_LIMIT and timeline[-1]["attempt"] == TIMELINE_LIMIT - 1
    assert timeline[0]["event"] == "failed"


def test_an_answer_is_sent_when_it_changes_and_a_missing_one_says_which_service():
    feed = Feed()
    page = feed.subscribe()
    one = QueuesAnswer(queues=[QueueStatus(name="default", running=1)], default_queue="default")
    feed.answered("queues", one)
    feed.answered("queues", one)
    feed.not_answered("queues", "no answer from admission (TimeoutError)")
    feed.not_answered("queues", "no answer from admission (TimeoutError)")
    assert [m["kind"] for m in drain(page)] == ["queues", "unavailable"]
    assert feed.snapshot()["unavailable"] == {"queues": "no answer from admission (TimeoutError)"}
    assert feed.snapshot()["queues"]["queues"] == [{"name": "default", "running": 1}]  # as the wire has it
    feed.answered("queues", QueuesAnswer(queues=[QueueStatus(name="default", running=2)]))
    assert feed.snapshot()["unavailable"] == {}


def test_an_op_that_left_admission_s_memory_shows_from_its_summary_and_no_event_moves_it():
    feed = Feed()
    feed.add_summary(OpSummary(op_id="old", status="succeeded", name="old-train", queue="default", node="gpu-1"))
    feed.fold(running("old"))
    detail = feed.op("old")
    assert detail["summarized"] and detail["timeline"] == []
    assert detail["row"]["status"] == "succeeded" and detail["row"]["name"] == "old-train"


def test_bad_input_on_the_bus_is_listed_and_makes_no_op_row():
    feed = Feed()
    page = feed.subscribe()
    feed.fold(ErrorRaised(op_id="-", at=datetime(2026, 1, 1, tzinfo=timezone.utc), service="admission",
                          subject="cmd.submit", reason="malformed_message", message="not JSON"))
    (message,) = drain(page)
    assert message["kind"] == "error" and message["error"]["service"] == "admission"
    assert message["error"]["detail"] == {"reason": "malformed_message", "message": "not JSON"}
    assert feed.snapshot()["ops"] == [] and len(feed.snapshot()["errors"]) == 1


# ---- an op's page: its history, as `why` answers it (issue 32 §1) ----------------------------------------

async def _get(app, path: str) -> tuple[int, dict]:
    """One GET through the ASGI app (no server, no client library)."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"", "headers": [],
             "server": ("127.0.0.1", 8089), "client": ("127.0.0.1", 50000)}
    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body)


async def test_an_op_s_page_shows_its_history_from_why_each_entry_in_words():
    feed = Feed()
    feed.add_summary(OpSummary(op_id="old", status="failed", name="train", queue="default"))
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    asked: list[str] = []

    async def why(op_id: str) -> WhyAnswer:
        asked.append(op_id)
        return WhyAnswer(op_id=op_id, found=True, status="failed", history_dropped=2, history=[
            HistoryEntry(at=at, event="preempted", by="op-9", reason="reclaim", message="queue b reclaims 1 GPU"),
            HistoryEntry(at=at, attempt=1, event="preempted", reason="queue_drained")])
    status, body = await _get(build_app(feed, why=why), "/api/ops/old")
    assert status == 200 and asked == ["old"] and body["row"]["name"] == "train"
    assert [h["text"] for h in body["history"]] == ["preempted by op-9 (reclaim): queue b reclaims 1 GPU",
                                                    "preempted (queue_drained)"]
    assert body["history"][1]["attempt"] == 1 and body["historyDropped"] == 2 and body["why"]["historyDropped"] == 2


async def test_an_op_s_page_without_an_answer_from_admission_still_shows_what_the_feed_saw():
    feed = Feed()
    feed.fold(submitted(op("train").build(), op_id="a"))

    async def silent(op_id: str) -> WhyAnswer:
        raise TimeoutError("no answer")
    status, body = await _get(build_app(feed, why=silent), "/api/ops/a")
    assert status == 200 and body["timeline"][0]["event"] == "submitted" and "history" not in body
    assert (await _get(build_app(feed, why=silent), "/api/ops/nobody"))[0] == 404


async def test_an_op_s_page_shows_its_last_lines_or_why_there_are_none():
    from opsched.logstream import LogsRefused
    from opsched.proto.reasons import LogsRefusal
    from opsched.ui.app import LOG_LINES

    feed = Feed()
    feed.fold(submitted(op("train").build(), op_id="a"))
    asked = []

    async def logs(op_id: str, tail: int) -> list[str]:
        asked.append((op_id, tail))
        return ["training", "[sim] second 1"]

    async def gone(op_id: str, tail: int) -> list[str]:
        raise LogsRefused(LogsRefusal.POD_GONE, "the main pod of attempt 0 of op a is gone")
    assert await _get(build_app(feed, logs=logs), "/api/ops/a/logs") == (200, {"lines": ["training",
                                                                                         "[sim] second 1"]})
    assert asked == [("a", LOG_LINES)]
    status, body = await _get(build_app(feed, logs=gone), "/api/ops/a/logs")
    assert status == 200 and body == {"error": "the main pod of attempt 0 of op a is gone", "reason": "pod_gone"}
    assert (await _get(build_app(feed, logs=logs), "/api/ops/nobody/logs"))[0] == 404
