"""The list+watch loop reads the API's raw JSON: a list's items and version, then watch lines however the
stream chunks them, decoded with msgspec. It resumes each watch from the last version it saw (bookmarks
included), re-lists after an ERROR event, and is ``synced`` only from a list through the watch after it."""
from __future__ import annotations

import asyncio
import json
from typing import Any

from opsched.bus.logging import get as get_log
from opsched.services.dispatcher.kobjects import PODS, Pod
from opsched.services.dispatcher.listwatch import ListWatch
from tests.builders import T0
from tests.builders.clock import FakeClock


def pod_json(name: str, rv: str, phase: str = "Pending") -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv,
                                        "labels": {"opsched.io/op-id": name}, "managedFields": [{"x": 1}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "i"}]},
            "status": {"phase": phase, "conditions": [{"type": "PodScheduled", "status": "True"}]}}


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


class Streamed:
    """A watch's raw answer: the given bytes in chunks of ``size`` (lines cut anywhere)."""

    def __init__(self, body: bytes, size: int = 7) -> None:
        self.chunks = [body[i:i + size] for i in range(0, len(body), size)]
        self.closed = False

    def stream(self, amt: Any = None, decode_content: bool = False):
        yield from self.chunks

    def close(self) -> None:
        self.closed = True


class Listed:
    def __init__(self, items: list[dict[str, Any]], rv: str) -> None:
        self.data = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": rv}, "items": items}).encode()


class Recorder(ListWatch):
    """A list+watch of pods that records what it observes; its API answers from ``answers`` in turn, and
    the loop is stopped once they run out."""

    decoders = PODS

    def __init__(self, answers: list[Any]) -> None:
        super().__init__(get_log("test"), FakeClock(T0))
        self.answers = answers
        self.calls: list[tuple[str, str | None, bool]] = []  # (list or watch, resource version, synced then)
        self.seen: list[tuple[str, str]] = []

    def list_call(self):
        return self._answer

    def _answer(self, **kwargs: Any) -> Any:
        assert kwargs["_preload_content"] is False
        self.calls.append(("watch" if kwargs.get("watch") else "list", kwargs.get("resource_version"), self.synced))
        if not self.answers:
            self.stop()
            raise ConnectionError("the test's API server is done")
        return self.answers.pop(0)

    def observe(self, kind: str, obj: Pod) -> None:
        assert isinstance(obj, Pod)
        phase = obj.status.phase if obj.status else None
        self.seen.append((kind, f"{obj.metadata.name}/{phase}"))


async def run(watcher: Recorder) -> Recorder:
    watcher.start()
    await asyncio.to_thread(watcher._thread.join, 10)  # type: ignore[union-attr]
    assert watcher._died is None
    return watcher


async def test_watch_lines_cut_anywhere_are_decoded_and_each_watch_resumes_from_the_last_version_seen():
    first = Streamed(event("ADDED", pod_json("b", "6")) + b"\n" + event("MODIFIED", pod_json("a", "7", "Running"))
                     + event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "9"}}))
    second = Streamed(event("DELETED", pod_json("b", "10", "Succeeded")))
    w = await run(Recorder([Listed([pod_json("a", "3")], "5"), first, second]))
    assert w.seen == [("MODIFIED", "a/Pending"), ("ADDED", "b/Pending"), ("MODIFIED", "a/Running"),
                      ("DELETED", "b/Succeeded")]  # a bookmark is no pod
    assert [(kind, rv) for kind, rv, _ in w.calls] == [("list", None), ("watch", "5"), ("watch", "9"),
                                                      ("watch", "10")]
    assert first.closed and second.closed


async def test_an_error_event_ends_the_watch_and_the_loop_lists_again():
    gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version: 5 (80)"}
    w = await run(Recorder([Listed([], "5"), Streamed(event("ERROR", gone) + event("ADDED", pod_json("a", "6"))),
                            Listed([pod_json("a", "81")], "81")]))
    assert [(kind, rv) for kind, rv, _ in w.calls] == [("list", None), ("watch", "5"), ("list", None),
                                                      ("watch", "81")]
    assert w.seen == [("MODIFIED", "a/Pending")]  # from the second list: nothing after the ERROR line


async def test_it_is_synced_from_a_list_through_its_watch_and_not_after_the_watch_failed():
    w = await run(Recorder([Listed([], "5"), Streamed(b"not json\n"), Listed([], "6")]))
    assert [(kind, synced) for kind, _, synced in w.calls] == [
        ("list", False), ("watch", True), ("list", False), ("watch", True)]
    assert not w.synced  # stopped
