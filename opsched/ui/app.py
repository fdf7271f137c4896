"""The web view's ASGI app (Starlette), read-only: the page and its static files, ``/api/state`` (everything, as
the page starts from), ``/api/ops/<id>`` (an op's row, the timeline of events this view saw, and `why` asked
then: its history, each entry also in words as ``opsched why`` prints it, ``history``), ``/api/ops/<id>/logs`` (the
last ``LOG_LINES`` lines its main container printed, as ``opsched logs --tail`` reads them: ``lines``, or ``error`` and
``reason`` when there are none to read), ``/api/events`` (Server-Sent Events:
a ``snapshot``, then one message per change) and ``/healthz``. Nothing here writes to the bus."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from opsched.proto.queries import WhyAnswer
from opsched.proto.reasons import Reason
from opsched.tables import entry_text
from opsched.ui.feed import Feed

STATIC = Path(__file__).resolve().parent / "static"
LOG_LINES = 50  # the last lines an op's page shows
KEEPALIVE_S = 15.0  # a comment line on a quiet stream, so proxies and browsers keep it open
HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
PAGE_HEADERS = {**HEADERS, "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
                "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}


def _json(value: Any, status: int = 200) -> Response:
    return Response(msgspec.json.encode(value), status_code=status, media_type="application/json", headers=HEADERS)


def sse(kind: str, data: Any) -> bytes:
    """One Server-Sent Event (its JSON on one ``data:`` line: msgspec escapes newlines)."""
    return b"event: " + kind.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"


def with_history(found: dict[str, Any], answer: WhyAnswer) -> dict[str, Any]:
    """An op's page data with its `why` answer (the history is the authority on what happened to it), and the
    history's entries in words (``opsched.tables.entry_text``: the page shows what the CLI prints)."""
    return {**found, "why": msgspec.to_builtins(answer), "historyDropped": answer.history_dropped,
            "history": [{**msgspec.to_builtins(e), "text": entry_text(e)} for e in answer.history]}


def build_app(feed: Feed, keepalive: float = KEEPALIVE_S,
              why: Callable[[str], Awaitable[WhyAnswer]] | None = None,
              logs: Callable[[str, int], Awaitable[list[str]]] | None = None) -> Starlette:
    """``why``: asks `why` of an op (``Sources.why``) for its page; None: the page shows the feed's last answer.
    ``logs``: the last lines of an op's main container (``Sources.logs``); None: the page shows none."""
    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    async def state(request: Request) -> Response:
        return _json(feed.snapshot())

    async def one_op(request: Request) -> Response:
        op_id = request.path_params["op_id"]
        found = feed.op(op_id)
        if not found:
            return _json({"error": f"no operation {op_id!r} on the bus"}, 404)
        if why is not None:
            try:
                found = with_history(found, await why(op_id))
            except Exception:  # noqa: BLE001 - admission not answering is weather: the events seen still show
                pass
        return _json(found)

    async def events(request: Request) -> Response:
        return StreamingResponse(_stream(feed, keepalive), media_type="text/event-stream",
                                 headers={**HEADERS, "X-Accel-Buffering": "no"})

    async def healthz(request: Request) -> Response:
        return _json({"ok": True, "ops": len(feed.view.rows), "pages": feed.pages})

    return Starlette(routes=[
        Route("/", page), Route("/api/state", state), Route("/api/ops/{op_id}", one_op),
        Route("/api/ops/{op_id}/logs", _logs_endpoint(feed, logs)),
        Route("/api/events", events), Route("/healthz", healthz),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ])


def _logs_endpoint(feed: Feed, logs: Callable[[str, int], Awaitable[list[str]]] | None
                   ) -> Callable[[Request], Awaitable[Response]]:
    async def op_logs(request: Request) -> Response:
        op_id = request.path_params["op_id"]
        if logs is None or not feed.op(op_id):
            return _json({"error": f"no operation {op_id!r} on the bus", "reason": Reason.UNKNOWN_OP}, 404)
        try:
            return _json({"lines": await logs(op_id, LOG_LINES)})
        except Exception as exc:  # noqa: BLE001 - no pod yet, pod gone, no dispatcher: the page says why
            return _json({"error": str(exc) or exc.__class__.__name__, "reason": getattr(exc, "reason", "")})
    return op_logs


async def _stream(feed: Feed, keepalive: float) -> AsyncIterator[bytes]:
    page = feed.subscribe()  # before the snapshot: no change falls between the two
    try:
        yield sse("snapshot", feed.snapshot())
        while True:
            try:
                message = await asyncio.wait_for(page.get(), timeout=keepalive)
            except asyncio.TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if message is None:  # dropped (too slow) or the view is closing: the browser reconnects
                return
            yield sse(message["kind"], message)
    finally:
        feed.unsubscribe(page)
