"""Waiting for a condition that no event announces (a query answer, an API-server object, a KV
entry): ask again until it holds, and fail with what was last seen after ``timeout`` seconds; and
``advance_until``: a fake clock moved on in small steps until a condition holds."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T]], what: str, timeout: float = 10.0,
                     interval: float = 0.1) -> T:
    """The first truthy result of ``check``; AssertionError after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last seen: {value!r})")
        await asyncio.sleep(interval)


async def queued(client: Any, op_id: str, timeout: float = 20.0) -> Any:
    """The op's `why` answer once a cycle has queued it: its gates answered (its estimate stored) is not yet a
    cycle of admission's having seen them."""
    async def check() -> Any:
        answer = await client.why(op_id)
        return answer if answer.status == "queued" else None
    return await eventually(check, f"{op_id} queued", timeout)


async def waiting_on(client: Any, op_id: str, code: str) -> Any:
    """The op's `why` answer once its first reason is ``code``, else None (for ``eventually``)."""
    answer = await client.why(op_id)
    return answer if answer.reasons and answer.reasons[0].code == code else None


async def advance_until(clock: Any, done: Callable[[], bool], what: str, limit_s: float = 30.0,
                        step: float = 0.05) -> float:
    """Move the fake clock (``tests.builders.clock.FakeClock``) on ``step`` seconds at a time until ``done()``;
    returns the fake seconds it took. Code that sleeps on that clock runs what falls due after each step."""
    start = clock.now()
    while not done():
        if clock.now() - start > timedelta(seconds=limit_s):
            raise AssertionError(f"{what}: not within {limit_s} fake seconds")
        clock.advance(step)
        await asyncio.sleep(0.002)  # a turn for the code the step woke (real time; the fake one is measured)
    return (clock.now() - start).total_seconds()
