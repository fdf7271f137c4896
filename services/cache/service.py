"""The cache service (Polyaxon's cache semantics; the answers are ``decide``'s, see ``lookup`` and
``fingerprint``). Consumes ``submitted`` and every way an op ends (durable ``cache-lookup``):

- ``submitted`` of an op that uses the cache (``rules.caching``: by default an op of a batch, or any op with
  ``cache.disable: false``): answer with ``cache_hit`` (a succeeded original, fresh for the op's ``cache.ttl``:
  admission ends the op ``succeeded``, reason ``cache_hit``, with the original's outputs, using no
  GPU), with ``cache_missed`` (not found, expired: scheduled normally), or with nothing yet
  when the original is still in processing: the op waits for it (remembered in the key-value bucket).
  Of any other op: nothing (admission, by the same rule, does not wait for the cache's answer).
- ``succeeded``: the op's result becomes its key's (caching off too, unless ``cache.disable: true``); every op
  waiting for it gets ``cache_hit``.
- ``failure_final`` (admission's decision that a failure is not retried; a ``failed`` alone is not consumed:
  admission may retry it), ``stopped``, ``timed_out``, ``skipped``, ``rejected``: the op is no candidate any
  more; every op waiting for it gets ``cache_missed`` (``original_failed``), unless another fresh result of the
  key exists.

Every handler is idempotent: a redelivered event finds the op's record and gives the same answer.
"""
from __future__ import annotations

from opsched.bus.bus import Bus
from opsched.proto import subjects
from opsched.proto.events import Event, OperationSubmitted, event_type
from opsched.proto.lifecycle import OP_ENDS
from opsched.services.cache.decide import Decider
from opsched.services.cache.store import CacheStore
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.op_events import last_of
from opsched.services.runtime.service import Consumer, Context, Service
from opsched.services.runtime.settings import Settings

ENDS = OP_ENDS


def consumed_subjects() -> list[str]:
    """The cache's durable consumer: submitted ops, and every way an op ends."""
    types: tuple[type[Event], ...] = (OperationSubmitted, *ENDS)
    return [subjects.events_of(event_type(t)) for t in types]


class Cache(Service):
    name = "cache"
    ops = Consumer(subjects.CACHE_LOOKUP, subjects.OPS_STREAM, consumed_subjects())
    store: CacheStore  # set in start: the runs, candidates and waiters are a key-value bucket

    async def start(self, bus: Bus) -> None:
        self.store = CacheStore(await bus.ensure_cache_bucket(subjects.CACHE_BUCKET))

    @ops.handles(OperationSubmitted)
    async def on_submitted(self, event: OperationSubmitted, ctx: Context) -> list[Event]:
        return await Decider(self.store, ctx).submitted(event)

    @ops.handles(*ENDS)
    async def on_ended(self, event: Event, ctx: Context) -> list[Event]:
        return await Decider(self.store, ctx, self.submitted_of).ended(event)

    async def submitted_of(self, op_id: str) -> OperationSubmitted | None:
        """The op's ``submitted`` event, read back from the op stream (None: no longer stored)."""
        assert self.bus is not None
        return await last_of(self.bus, OperationSubmitted, op_id)


def build(settings: Settings, clock: Clock | None = None) -> Cache:
    return Cache(settings, clock)
