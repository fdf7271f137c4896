"""The cache's decisions as pure functions of what it knows (no bus, no store, no clock).

Per key the cache keeps its *candidates*: ops with that key that are in processing (submitted,
queued, admitted, running) and the latest that succeeded. Failed, stopped, timed-out, skipped and
rejected ops are dropped as candidates when they end so; ops answered from the cache (hits) are never
candidates themselves (Polyaxon follows a hit to its original).

A lookup (``choose``) needs the same key (the caller reads the candidates of that key), kind and
runtime, and gives:
- ``Hit``: a succeeded candidate whose end is less than ``ttl`` seconds ago (``now - ended_at >= ttl``
  is too old, as in Polyaxon). A result in hand is preferred to waiting for a newer run of the same
  key: same key, same result, and no waiting.
- ``Wait``: otherwise the latest candidate still in processing; the new op waits for it and takes its
  result when it succeeds (``settle``).
- ``Miss``: nothing usable (``not_found`` or ``expired``); the op is scheduled normally.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from opsched.proto.reasons import CacheMiss

PROCESSING = "processing"
SUCCEEDED = "succeeded"
MAX_PROCESSING = 8  # candidates in processing kept per key (the newest); waiting needs only one

NOT_FOUND = CacheMiss.NOT_FOUND
EXPIRED = CacheMiss.EXPIRED
ORIGINAL_FAILED = CacheMiss.ORIGINAL_FAILED


class Candidate(msgspec.Struct, kw_only=True):
    """An op whose result may be reused: in processing, or succeeded (with its end and outputs)."""

    op_id: str
    submitted_at: datetime
    kind: str
    runtime: str
    state: str = PROCESSING
    ended_at: datetime | None = None
    outputs: dict[str, Any] = {}


class Hit(msgspec.Struct, frozen=True):
    original: Candidate


class Wait(msgspec.Struct, frozen=True):
    original: Candidate


class Miss(msgspec.Struct, frozen=True):
    reason: str


Decision = Hit | Wait | Miss


def expired(ended_at: datetime, now: datetime, ttl_s: float | None) -> bool:
    """Polyaxon: a result is too old when ``now - finished_at >= ttl``; no ttl means it never is."""
    return ttl_s is not None and (now - ended_at).total_seconds() >= ttl_s


def choose(candidates: list[Candidate], *, op_id: str, kind: str, runtime: str, now: datetime,
           ttl_s: float | None, wait: bool = True) -> Decision:
    """The answer for op ``op_id`` among the candidates of its key. ``wait=False``: never wait."""
    same = [c for c in candidates if c.op_id != op_id and c.kind == kind and c.runtime == runtime]
    done = [c for c in same if c.state == SUCCEEDED and c.ended_at is not None]
    fresh = [c for c in done if not expired(c.ended_at, now, ttl_s)]  # type: ignore[arg-type]
    if fresh:
        return Hit(max(fresh, key=lambda c: (c.ended_at, c.submitted_at, c.op_id)))
    running = [c for c in same if c.state == PROCESSING]
    if wait and running and (ttl_s is None or ttl_s > 0):  # a ttl of 0 could never use the result
        return Wait(max(running, key=lambda c: (c.submitted_at, c.op_id)))
    return Miss(EXPIRED if done else NOT_FOUND)


def remember(candidates: list[Candidate], candidate: Candidate) -> list[Candidate]:
    """Add an op in processing (idempotent; an op already known keeps what is known of it). Only the
    newest ``MAX_PROCESSING`` in processing are kept."""
    if any(c.op_id == candidate.op_id for c in candidates):
        return candidates
    done = [c for c in candidates if c.state == SUCCEEDED]
    running = sorted([c for c in candidates if c.state == PROCESSING] + [candidate],
                     key=lambda c: (c.submitted_at, c.op_id), reverse=True)[:MAX_PROCESSING]
    return done + running


def succeed(candidates: list[Candidate], candidate: Candidate) -> list[Candidate]:
    """The op succeeded: it becomes the key's result unless a result that ended later is known."""
    others = [c for c in candidates if c.op_id != candidate.op_id]
    done = [c for c in others if c.state == SUCCEEDED] + [candidate]
    latest = max(done, key=lambda c: (c.ended_at, c.submitted_at, c.op_id))
    return [latest] + [c for c in others if c.state == PROCESSING]


def forget(candidates: list[Candidate], op_id: str) -> list[Candidate]:
    """The op ended without a result (failed, stopped, timed out, skipped, rejected)."""
    return [c for c in candidates if c.op_id != op_id]


def settle(original: Candidate | None, candidates: list[Candidate], *, op_id: str, kind: str, runtime: str,
           now: datetime, ttl_s: float | None) -> Hit | Miss:
    """The answer for an op that waited, once its original ended: the original's result if it succeeded
    (and is not too old for this op's ttl); else another succeeded candidate of the key, if one is
    fresh; else a miss (``original_failed``), and the op is scheduled normally."""
    if original is not None and original.state == SUCCEEDED and original.ended_at is not None:
        if not expired(original.ended_at, now, ttl_s):
            return Hit(original)
        return Miss(EXPIRED)
    found = choose(candidates, op_id=op_id, kind=kind, runtime=runtime, now=now, ttl_s=ttl_s, wait=False)
    return found if isinstance(found, Hit) else Miss(ORIGINAL_FAILED)
