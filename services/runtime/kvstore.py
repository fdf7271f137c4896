"""Typed state in a JetStream key-value bucket, changed only by compare-and-set, so replicas of a
service (and redeliveries) never lose each other's updates.

Changes of one key made at once in this process (a handler loop's window handles several ops at once, and
many may change one key: the cache's candidates of a popular fingerprint) are written together: while one
write of a key is in flight, the changes that arrive wait and are then applied in order to one read and
written with one compare-and-set (a group commit), instead of each losing the race to the others and
reading again. Each caller gets the value as its own change left it."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")
CAS_ATTEMPTS = 20
_MISSING = ("KeyNotFoundError", "KeyDeletedError", "NotFoundError")
_CONFLICT = ("KeyWrongLastSequenceError",)


def is_conflict(exc: BaseException) -> bool:
    """A compare-and-set lost: the key was created or written by someone else since it was read."""
    return type(exc).__name__ in _CONFLICT


class KVStore:
    def __init__(self, kv, name: str) -> None:
        self.kv = kv
        self.name = name
        self._queued: dict[str, list[tuple[Callable[[Any], Any], asyncio.Future[Any]]]] = {}  # key -> waiting
        self._writers: set[asyncio.Task[None]] = set()

    async def _read(self, key: str, type_: type[T]) -> tuple[T | None, int]:
        """The value (None when absent or unreadable) and its revision (0 when absent)."""
        try:
            entry = await self.kv.get(key)
        except Exception as exc:  # nats KeyNotFoundError / KeyDeletedError
            if type(exc).__name__ in _MISSING:
                return None, 0
            raise
        if entry is None or not entry.value:
            return None, getattr(entry, "revision", 0) or 0
        try:
            return msgspec.json.decode(entry.value, type=type_), entry.revision
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None, entry.revision  # written by an older version: overwritten by the next change

    async def _mutate(self, key: str, type_: type[T], change: Callable[[T | None], T | None], *,
                      likely_new: bool = False) -> T | None:
        """Apply ``change`` to the current value and write it back unless someone wrote in between
        (then read again and retry). Returns the new value (unchanged: nothing is written). ``likely_new``:
        the key is probably absent (say, an op's first event): created without reading it first (if it
        exists after all, read and retried as usual)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        queued = self._queued.get(key)
        if queued is not None:  # a write of the key is in flight here: join the next one
            queued.append((change, future))
            return await future
        self._queued[key] = [(change, future)]
        writer = asyncio.get_running_loop().create_task(self._write_rounds(key, type_, likely_new))
        self._writers.add(writer)
        writer.add_done_callback(self._writers.discard)
        return await future

    async def _write_rounds(self, key: str, type_: type[T], likely_new: bool) -> None:
        """Write the changes queued for ``key``, all that wait at once in one compare-and-set, until none waits."""
        queue = self._queued[key]
        try:
            while queue:
                batch = list(queue)
                queue.clear()
                try:
                    results = await self._write_batch(key, type_, [c for c, _ in batch], likely_new)
                except Exception as exc:  # noqa: BLE001 - each caller gets it
                    results = [exc] * len(batch)
                likely_new = False
                for (_, future), result in zip(batch, results):
                    if not future.done():
                        (future.set_exception if isinstance(result, Exception) else future.set_result)(result)
        finally:
            del self._queued[key]

    async def _write_batch(self, key: str, type_: type[T], changes: list[Callable[[Any], Any]],
                           likely_new: bool) -> list[Any]:
        for attempt in range(CAS_ATTEMPTS):
            current, revision = (None, 0) if likely_new and attempt == 0 else await self._read(key, type_)
            value, results = current, []
            for change in changes:
                new = change(value)
                results.append(new)
                if new is not None:
                    value = new
            if value is None or value == current:
                return results
            data = msgspec.json.encode(value)
            try:
                if revision:
                    await self.kv.update(key, data, last=revision)
                else:
                    await self.kv.create(key, data)
                return results
            except Exception as exc:
                if not is_conflict(exc):
                    raise
        raise RuntimeError(f"{self.name} key {key}: too many concurrent changes")
