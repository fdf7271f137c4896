"""One in-memory stand-in for a JetStream key-value bucket, with its compare-and-set semantics (the calls
``services.runtime.kvstore`` makes): ``create`` fails if the key exists, ``update`` if the revision moved.
``interfere(key, value)`` makes the next write of ``key`` lose a race against another replica."""
from __future__ import annotations


class KeyNotFoundError(Exception):
    """Named as nats names it: the store tells errors apart by class name."""


class KeyWrongLastSequenceError(Exception):
    pass


class Entry:
    def __init__(self, value: bytes, revision: int) -> None:
        self.value, self.revision = value, revision


class MemoryKV:
    """The nats KeyValue calls the store uses. ``interfere(key, value)`` makes the next write of ``key``
    lose a race against another replica that writes ``value`` first."""

    def __init__(self) -> None:
        self.data: dict[str, Entry] = {}
        self.seq = 0
        self.writes = 0
        self._interfere: dict[str, bytes] = {}

    async def get(self, key: str) -> Entry:
        if key not in self.data:
            raise KeyNotFoundError(key)
        return self.data[key]

    async def put(self, key: str, value: bytes) -> int:
        return self._write(key, value)

    async def create(self, key: str, value: bytes) -> int:
        self._race(key)
        if key in self.data:
            raise KeyWrongLastSequenceError(key)
        return self._write(key, value)

    async def update(self, key: str, value: bytes, last: int | None = None) -> int:
        self._race(key)
        if key not in self.data or self.data[key].revision != last:
            raise KeyWrongLastSequenceError(key)
        return self._write(key, value)

    async def delete(self, key: str) -> bool:
        self.writes += 1
        self.data.pop(key, None)
        return True

    def interfere(self, key: str, value: bytes) -> None:
        self._interfere[key] = value

    def _race(self, key: str) -> None:
        if key in self._interfere:
            self._write(key, self._interfere.pop(key))

    def _write(self, key: str, value: bytes) -> int:
        self.seq += 1
        self.writes += 1
        self.data[key] = Entry(value, self.seq)
        return self.seq
