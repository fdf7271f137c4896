"""Cache entries in a JetStream key-value bucket, so they survive restarts.

Keys: ``op.<op_id>`` -> fingerprint of a cacheable op; ``fp.<fingerprint>`` -> the succeeded original.
"""
from __future__ import annotations

from datetime import datetime, timedelta

import msgspec


class Entry(msgspec.Struct, kw_only=True):
    op_id: str
    ended_at: datetime
    outputs: dict[str, str] = {}


class CacheStore:
    def __init__(self, kv) -> None:
        self.kv = kv

    async def remember_op(self, op_id: str, fp: str) -> None:
        await self.kv.put(f"op.{op_id}", fp.encode())

    async def fingerprint_of(self, op_id: str) -> str | None:
        return await self._get(f"op.{op_id}")

    async def record(self, fp: str, entry: Entry) -> None:
        await self.kv.put(f"fp.{fp}", msgspec.json.encode(entry))

    async def lookup(self, fp: str, now: datetime, ttl_s: int | None) -> Entry | None:
        raw = await self._get(f"fp.{fp}")
        if raw is None:
            return None
        entry = msgspec.json.decode(raw, type=Entry)
        if ttl_s is not None and entry.ended_at + timedelta(seconds=ttl_s) < now:
            return None
        return entry

    async def _get(self, key: str) -> str | None:
        try:
            got = await self.kv.get(key)
        except Exception as exc:  # nats KeyNotFoundError / KeyDeletedError
            if type(exc).__name__ in ("KeyNotFoundError", "KeyDeletedError", "NotFoundError"):
                return None
            raise
        return got.value.decode() if got and got.value is not None else None
