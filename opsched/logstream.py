"""Reading an op's logs over the bus (`opsched logs`, ``Client.logs``): a ``LogsRequest`` on ``subjects.QUERY_LOGS``,
its answer's ``LogsChunk``s taken from an inbox of the connection's own, in order, until the chunk marked ``end``;
an answer cut short by its bounds (``more``) is continued by a next request after its last line (``continued``),
so a follow goes on for as long as the container runs, and a long log is read whole. A follow of an op whose pod
does not exist yet or whose container has not started (``no_pod_yet``, ``not_started``) asks again every
``WAIT_POLL_S`` until it has lines, as long as ``ended()`` says the op has not ended, and an op unknown for its first
``UNKNOWN_GRACE_S`` (`opsched logs -f $(opsched submit ...)` follows an op from its start). A refusal raises ``LogsRefused`` with its reason and message; no
dispatcher answering raises ``LogsUnanswered``."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec

from opsched.proto import codec, subjects
from opsched.proto.queries import LOGS_FOLLOW_S, LogsChunk, LogsRequest
from opsched.proto.reasons import LogsRefusal, Reason

ANSWER_TIMEOUT_S = 10.0  # the longest wait for a chunk, besides a follow's silence (its window, then its end)
NO_RESPONDERS = "503"
WAIT_POLL_S = 0.5
NOT_YET = (LogsRefusal.NO_POD_YET, LogsRefusal.NOT_STARTED)  # what a follow waits out
UNKNOWN_GRACE_S = 5.0  # ... and an op unknown for this long (one just submitted: admission has yet to take it)


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


async def chunks(nc: Any, request: LogsRequest,
                 ended: Callable[[], Awaitable[bool]] | None = None) -> AsyncIterator[LogsChunk]:
    """Every chunk with lines of the whole answer (continued as ``continued`` says); ``LogsRefused`` on a refusal
    (a follow waits out ``NOT_YET`` while ``ended`` says no)."""
    current: LogsRequest | None = codec.checked(request)
    began = asyncio.get_running_loop().time()
    while current is not None:
        end = None
        async with contextlib.aclosing(_answer(nc, current)) as answer:
            async for chunk in answer:
                if current.follow and not current.after and await _waits(chunk.reason, began, ended):
                    await asyncio.sleep(WAIT_POLL_S)
                    break  # asked again: the loop below
                if chunk.reason:
                    raise LogsRefused(chunk.reason, chunk.message)
                if chunk.lines:
                    yield chunk
                if chunk.end:
                    end = chunk
        if end is None:
            continue  # waiting for its pod
        current = continued(current, end)


async def _waits(reason: str, began: float, ended: Callable[[], Awaitable[bool]] | None) -> bool:
    """Whether a follow waits out a refusal and asks again (the module docstring says when)."""
    if reason == Reason.UNKNOWN_OP:
        return asyncio.get_running_loop().time() - began < UNKNOWN_GRACE_S
    return reason in NOT_YET and ended is not None and not await ended()


async def _answer(nc: Any, request: LogsRequest) -> AsyncGenerator[LogsChunk, None]:
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
