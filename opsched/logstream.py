"""Reading an op's logs over the bus (`opsched logs`, ``Client.logs``): a ``LogsRequest`` on ``subjects.QUERY_LOGS``,
its answer's ``LogsChunk``s taken from an inbox of the connection's own, in order, until the chunk marked ``end``;
an answer cut short by its bounds (``more``) is continued by a next request after its last line (``continued``),
so a follow goes on for as long as the container runs, and a long log is read whole. A refusal raises
``LogsRefused`` with its reason and message; no dispatcher answering raises ``LogsUnanswered``."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from opsched.proto import codec, subjects
from opsched.proto.queries import LOGS_FOLLOW_S, LogsChunk, LogsRequest

ANSWER_TIMEOUT_S = 10.0  # the longest wait for a chunk, besides a follow's silence (its window, then its end)
NO_RESPONDERS = "503"


class LogsRefused(Exception):
    """The dispatcher answered a logs request with no lines: ``reason`` (``proto.reasons.LogsRefusal``, or
    ``Reason.UNKNOWN_OP``) and its message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class LogsUnanswered(Exception):
    """No dispatcher answered (none runs with a cluster, or it did not answer in time)."""


def continued(request: LogsRequest, end: LogsChunk) -> LogsRequest | None:
    """The request that reads on after an answer's ``end`` chunk (None: the answer was the whole of it)."""
    if not end.more:
        return None
    return msgspec.structs.replace(request, after=end.last_at or request.after, tail=None,
                                   attempt=end.attempt if request.attempt is None else request.attempt)


async def chunks(nc: Any, request: LogsRequest) -> AsyncIterator[LogsChunk]:
    """Every chunk with lines of the whole answer (continued as ``continued`` says); ``LogsRefused`` on a refusal."""
    current: LogsRequest | None = codec.checked(request)
    while current is not None:
        end = None
        async for chunk in _answer(nc, current):
            if chunk.reason:
                raise LogsRefused(chunk.reason, chunk.message)
            if chunk.lines:
                yield chunk
            if chunk.end:
                end = chunk
        current = continued(current, end) if end is not None else None


async def _answer(nc: Any, request: LogsRequest) -> AsyncIterator[LogsChunk]:
    """One request's chunks, in ``seq`` order, up to its end."""
    inbox = nc.new_inbox()
    answers: asyncio.Queue[Any] = asyncio.Queue()

    async def on_answer(msg: Any) -> None:
        answers.put_nowait(msg)
    sub = await nc.subscribe(inbox, cb=on_answer)
    wait = LOGS_FOLLOW_S + ANSWER_TIMEOUT_S if request.follow else ANSWER_TIMEOUT_S
    try:
        await nc.publish(subjects.QUERY_LOGS, codec.encode(request), reply=inbox)
        while True:
            try:
                async with asyncio.timeout(wait):
                    msg = await answers.get()
            except TimeoutError:
                raise LogsUnanswered(f"no answer from the dispatcher in {wait:g} s") from None
            if msg.headers and msg.headers.get("Status") == NO_RESPONDERS and not msg.data:
                raise LogsUnanswered("no dispatcher answers logs requests (none runs with a cluster)")
            chunk = codec.decode_logs_chunk(msg.data)
            yield chunk
            if chunk.end:
                return
    finally:
        await sub.unsubscribe()
