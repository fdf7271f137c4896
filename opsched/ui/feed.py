"""The web view's live state, with no I/O of its own: every op's row (the CLI's fold, ``opsched.view``) and its
timeline of events, and the latest answers of the queries the CLI asks (queues, cost, why). Each change goes to
every open page as one message; a page that cannot keep up is dropped, and its browser reconnects to a fresh
snapshot (``EventSource`` does so by itself)."""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import msgspec

from opsched.output import full
from opsched.proto import codec
from opsched.proto.events import CostRecorded, ErrorRaised, Event, Money, OperationAdmitted
from opsched.proto.summaries import OpSummary
from opsched.view import OpRow, OpsView, item

TIMELINE_LIMIT = 200  # events kept per op (an op retried many times shows its last ones)
ERRORS_KEPT = 20  # bad input seen on the bus, newest last
SUBSCRIBER_BUFFER = 2000  # messages a page may fall behind before it is dropped
_DETAIL_FIELDS = ("node", "pod_name", "reason", "message", "outputs_warning", "preemptor", "retry_after_s", "approved_by",
                  "comment")


def row_json(row: OpRow) -> dict[str, Any]:
    """An op's row as the page gets it: the ``OpItem`` `opsched ops -o json` prints (``opsched.output``), without
    its history (the timeline tells the story), and whether it is active or ended."""
    out = full(item(row))
    del out["history"]
    out["terminal"], out["active"] = row.terminal, row.active
    return out


def timeline_entry(event: Event) -> dict[str, Any]:
    """An event as one line of an op's timeline: when, what, which attempt, and its telling fields."""
    detail = {f: getattr(event, f) for f in _DETAIL_FIELDS if getattr(event, f, None) not in (None, "", [])}
    estimate = getattr(event, "estimate", None)
    if isinstance(estimate, Money):  # cost_estimated's
        detail["estimate"] = f"{estimate.amount:.2f} {estimate.currency}"
    elif isinstance(event, OperationAdmitted) and event.estimate is not None:  # on the flavor it was admitted to
        detail["estimate"] = f"{event.estimate:.2f}" + (f" (pool {event.pool})" if event.pool else "")
    if isinstance(event, CostRecorded):
        detail["cost"] = f"{event.amount:.4f} {event.currency} for {event.seconds:.0f}s"
    return {"at": event.at.isoformat(), "event": codec.type_of(event), "attempt": event.attempt, "detail": detail}


class Feed:
    def __init__(self, buffer: int = SUBSCRIBER_BUFFER) -> None:
        self.view = OpsView()
        self.timelines: dict[str, deque[dict[str, Any]]] = {}
        self.errors: deque[dict[str, Any]] = deque(maxlen=ERRORS_KEPT)
        self.answers: dict[str, Any] = {"queues": None, "cost": None, "health": None}
        self.unavailable: dict[str, str] = {}  # query -> why its last answer did not come
        self.why: dict[str, Any] = {}  # op id -> its last `why` answer (ops still waiting)
        self.buffer = buffer
        self._pages: set[asyncio.Queue[dict[str, Any] | None]] = set()

    # -- what the bus says ---------------------------------------------------------------------------------
    def fold(self, event: Event) -> None:
        if isinstance(event, ErrorRaised):
            entry = {**timeline_entry(event), "op_id": event.op_id, "service": event.service}
            self.errors.append(entry)
            self._send({"kind": "error", "error": entry})
        row = self.view.fold(event)
        if row is None or row.op_id in self.view.summarized:
            return
        entry = timeline_entry(event)
        self.timelines.setdefault(row.op_id, deque(maxlen=TIMELINE_LIMIT)).append(entry)
        message: dict[str, Any] = {"kind": "op", "row": row_json(row), "event": entry}
        if (row.active or row.terminal) and self.why.pop(row.op_id, None) is not None:
            message["why"] = None  # it stopped waiting: its position means nothing now
        self._send(message)

    def add_summary(self, summary: OpSummary) -> None:
        """An op that ended and left admission's memory: its summary, no events."""
        row = self.view.add_summary(summary)
        self._send({"kind": "op", "row": row_json(row)})

    def answered(self, query: str, answer: msgspec.Struct) -> None:
        """The answer of ``queues`` or ``cost``."""
        value = msgspec.to_builtins(answer)
        self.unavailable.pop(query, None)
        if value != self.answers.get(query):
            self.answers[query] = value
            self._send({"kind": query, query: value})

    def answered_health(self, answers: dict[str, msgspec.Struct | None]) -> None:
        """Each service's health answer (``proto.health``), None for one that did not answer."""
        value = {service: None if answer is None else msgspec.to_builtins(answer) for service, answer in answers.items()}
        if value != self.answers.get("health"):
            self.answers["health"] = value
            self._send({"kind": "health", "health": value})

    def not_answered(self, query: str, why: str) -> None:
        if self.unavailable.get(query) != why:
            self.unavailable[query] = why
            self._send({"kind": "unavailable", "query": query, "why": why})

    def answered_why(self, op_id: str, answer: msgspec.Struct) -> None:
        value = msgspec.to_builtins(answer)
        if self.why.get(op_id) != value:
            self.why[op_id] = value
            self._send({"kind": "why", "op_id": op_id, "why": value})

    def waiting(self) -> list[str]:
        """The ops that wait for something (not admitted, not ended): those `why` is asked about."""
        return [r.op_id for r in self.view.rows.values() if not (r.active or r.terminal)]

    # -- what pages read -----------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {"ops": [row_json(r) for r in self.view.rows.values()], "why": dict(self.why),
                "errors": list(self.errors), "unavailable": dict(self.unavailable), **self.answers}

    def op(self, op_id: str) -> dict[str, Any] | None:
        row = self.view.rows.get(op_id)
        if row is None:
            return None
        return {"row": row_json(row), "timeline": list(self.timelines.get(op_id, ())),
                "summarized": op_id in self.view.summarized, "why": self.why.get(op_id)}

    def subscribe(self) -> asyncio.Queue[dict[str, Any] | None]:
        page: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=self.buffer)
        self._pages.add(page)
        return page

    def unsubscribe(self, page: asyncio.Queue[dict[str, Any] | None]) -> None:
        self._pages.discard(page)

    @property
    def pages(self) -> int:
        return len(self._pages)

    def close(self) -> None:
        """Every page's stream ends (``None``)."""
        for page in list(self._pages):
            self._drop(page)

    def _send(self, message: dict[str, Any]) -> None:
        for page in list(self._pages):
            if page.full():
                self._drop(page)  # too slow: it reconnects and starts from a snapshot
            else:
                page.put_nowait(message)

    def _drop(self, page: asyncio.Queue[dict[str, Any] | None]) -> None:
        self._pages.discard(page)
        while not page.empty():
            page.get_nowait()
        page.put_nowait(None)
