"""A handler loop's window: the messages it fetched are handled concurrently, up to ``size`` at once, and the
messages of one op one after the other, in the order they were delivered (``key_of``: the op a subject names).

Handling one message costs a few round trips to NATS (publish and wait for the stream's ack, a key-value read
or write, a pod create), so one message at a time leaves the process idle most of the time; a window of N
keeps N of those round trips in flight. The order between two ops was never promised (replicas of a service
already handle them in any order); the order of one op's messages is kept, as one replica alone would.

A service whose handlers must see every message in stream order (admission: its fold and its cycles decide
on that order) runs with a window of 1: the loop handles each message before it takes the next."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from opsched.proto import subjects

Work = Callable[[], Awaitable[None]]


def key_of(subject: str) -> str:
    """The op an op event's subject names; another subject is its own key (its messages in order)."""
    return subjects.op_of(subject) or subject


class Window:
    """Up to ``size`` works at once; works of one key in the order they were added."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._slots = asyncio.Semaphore(size)
        self._tails: dict[str, asyncio.Task[None]] = {}  # the last work added per key
        self._running: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None  # what escaped a work: raised by the next ``add``/``drain``

    async def add(self, key: str, work: Work) -> None:
        """Start ``work`` once a slot is free (after the work of ``key`` added before it, if any)."""
        self._raise_failure()
        if self.size == 1:
            await work()
            return
        await self._slots.acquire()
        task = asyncio.create_task(self._run(self._tails.get(key), work))
        self._tails[key] = task
        self._running.add(task)
        task.add_done_callback(lambda done: self._done(key, done))

    async def drain(self) -> None:
        """Wait for every work started (a stopping loop finishes what it holds)."""
        while self._running:
            await asyncio.wait(set(self._running))
        self._raise_failure()

    def cancel(self) -> None:
        for task in self._running:
            task.cancel()

    async def _run(self, before: asyncio.Task[None] | None, work: Work) -> None:
        try:
            if before is not None:
                await asyncio.wait({before})  # its outcome is its own
            await work()
        finally:
            self._slots.release()

    def _done(self, key: str, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._tails.get(key) is task:
            del self._tails[key]
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
