"""Typed state in a JetStream key-value bucket, changed only by compare-and-set, so replicas of a
service (and redeliveries) never lose each other's updates."""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

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

    async def _mutate(self, key: str, type_: type[T], change: Callable[[T | None], T | None]) -> T | None:
        """Apply ``change`` to the current value and write it back unless someone wrote in between
        (then read again and retry). Returns the new value (unchanged: nothing is written)."""
        for _ in range(CAS_ATTEMPTS):
            current, revision = await self._read(key, type_)
            new = change(current)
            if new is None or new == current:
                return new
            data = msgspec.json.encode(new)
            try:
                if revision:
                    await self.kv.update(key, data, last=revision)
                else:
                    await self.kv.create(key, data)
                return new
            except Exception as exc:
                if not is_conflict(exc):
                    raise
        raise RuntimeError(f"{self.name} key {key}: too many concurrent changes")
