"""The cache's state in the JetStream key-value bucket ``opsched_cache``, so it survives restarts.

Keys (all values msgspec JSON):
- ``run.<op_id>``: what the cache decided for an op (``Run``), so a redelivered event gets the same
  answer, and an end event knows the op's key;
- ``key.<fingerprint>``: the candidates of a key (``Candidates``: in processing, and the latest succeeded);
- ``wait.<op_id>``: the ops waiting for op ``op_id`` (``Waiters``); closed, with the outcome, once it ended.

Replicas of the cache service share one durable consumer, so two of them may change the same key at
once: every read-modify-write is a compare-and-set on the key's revision, retried on conflict. Values
are never deleted (a deleted key would need its tombstone's revision to be written again).

The store takes any object with the nats ``KeyValue`` methods ``get``, ``create`` and ``update``;
errors are told apart by their class names, so this module does not import ``nats``.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from opsched.services.cache.lookup import Candidate
from opsched.services.runtime.kvstore import KVStore

HIT, WAIT, MISS = "hit", "wait", "miss"


class Run(msgspec.Struct, kw_only=True):
    """The cache's record of one op."""

    op_id: str
    fingerprint: str
    kind: str
    runtime: str
    submitted_at: datetime
    attempt: int = 0
    ttl: int | None = None
    decision: str = MISS  # "hit", "wait" or "miss"
    reason: str = ""  # of a miss: "disabled", "not_found", "expired", "original_failed"
    original: str | None = None  # of a hit, or the op waited for
    outputs: dict[str, Any] = {}  # of a hit: the original's
    candidate: bool = False  # its result may be reused (it runs itself, and caching is not disabled)
    ended: str | None = None  # how it ended: its end's type, "succeeded", "failure_final", "stopped", ...

    def as_candidate(self) -> Candidate:
        return Candidate(op_id=self.op_id, submitted_at=self.submitted_at, kind=self.kind, runtime=self.runtime)


class Candidates(msgspec.Struct, kw_only=True):
    ops: list[Candidate] = []


class Waiter(msgspec.Struct, kw_only=True):
    op_id: str
    attempt: int = 0


class Waiters(msgspec.Struct, kw_only=True):
    waiters: list[Waiter] = []
    closed: bool = False  # the original ended; nobody is added any more
    outcome: Candidate | None = None  # the original, when it succeeded


T = TypeVar("T", bound=msgspec.Struct)


class CacheStore(KVStore):
    def __init__(self, kv) -> None:
        super().__init__(kv, "cache")

    # ---- runs ----
    async def run(self, op_id: str) -> Run | None:
        return (await self._read(f"run.{op_id}", Run))[0]

    async def put_run(self, run: Run) -> None:
        await self.kv.put(f"run.{run.op_id}", msgspec.json.encode(run))

    async def update_run(self, op_id: str, change: Callable[[Run], Run]) -> Run | None:
        """Compare-and-set a change of a known run (None if the run is unknown)."""
        def apply(run: Run | None) -> Run | None:
            return None if run is None else change(run)
        return await self._mutate(f"run.{op_id}", Run, apply)

    # ---- candidates ----
    async def candidates(self, fingerprint: str) -> list[Candidate]:
        found = (await self._read(f"key.{fingerprint}", Candidates))[0]
        return list(found.ops) if found else []

    async def change_candidates(self, fingerprint: str,
                                change: Callable[[list[Candidate]], list[Candidate]]) -> list[Candidate]:
        def apply(current: Candidates | None) -> Candidates:
            return Candidates(ops=change(list(current.ops) if current else []))
        return (await self._mutate(f"key.{fingerprint}", Candidates, apply)).ops  # type: ignore[union-attr]

    # ---- waiters ----
    async def waiters(self, original: str) -> Waiters | None:
        return (await self._read(f"wait.{original}", Waiters))[0]

    async def add_waiter(self, original: str, waiter: Waiter) -> Waiters:
        """Add ``waiter`` unless the original already ended (then the list comes back closed, unchanged)."""
        def apply(current: Waiters | None) -> Waiters:
            current = current or Waiters()
            if current.closed or any(w.op_id == waiter.op_id for w in current.waiters):
                return current
            return Waiters(waiters=[*current.waiters, waiter])
        return await self._mutate(f"wait.{original}", Waiters, apply)  # type: ignore[return-value]

    async def remove_waiter(self, original: str, op_id: str) -> None:
        def apply(current: Waiters | None) -> Waiters | None:
            if current is None or current.closed:
                return current
            return Waiters(waiters=[w for w in current.waiters if w.op_id != op_id])
        await self._mutate(f"wait.{original}", Waiters, apply)

    async def close_waiters(self, original: str, outcome: Candidate | None) -> list[Waiter]:
        """The original ended: close its list (the first close wins) and return who waited."""
        def apply(current: Waiters | None) -> Waiters:
            current = current or Waiters()
            if current.closed:
                return current
            return Waiters(waiters=current.waiters, closed=True, outcome=outcome)
        closed: Waiters = await self._mutate(f"wait.{original}", Waiters, apply)  # type: ignore[assignment]
        return list(closed.waiters)
