"""Wire the cache to the bus: answer every submitted op with a hit or a miss; learn from successes."""
from __future__ import annotations

from proto import subjects
from proto.events import CacheHit, CacheMissed, OperationSubmitted, OperationSucceeded
from services.cache.fingerprint import caching_enabled, fingerprint
from services.cache.store import CacheStore, Entry
from services.runtime.bus import Bus
from services.runtime.service import Context, Service
from services.runtime.settings import Settings

CACHE_HIT_REASON = "cache_hit"


def build(settings: Settings, clock=None) -> Service:
    service = Service("cache", settings, clock)
    holder: dict[str, CacheStore] = {}

    async def open_store(bus: Bus) -> None:
        holder["store"] = CacheStore(await bus.ensure_cache_bucket(subjects.CACHE_BUCKET))

    service.on_start.append(open_store)
    sub = service.consume(subjects.CACHE_LOOKUP, subjects.OPS_STREAM,
                          [subjects.events_of("submitted"), subjects.events_of("succeeded")])

    @service.on(sub, OperationSubmitted)
    async def on_submitted(event: OperationSubmitted, ctx: Context) -> CacheHit | CacheMissed:
        fp = fingerprint(event.spec)
        base = dict(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt, fingerprint=fp)
        if not caching_enabled(event.spec):
            return CacheMissed(**base, reason="disabled")
        store = holder["store"]
        await store.remember_op(event.op_id, fp)
        hit = await store.lookup(fp, ctx.clock.now(), event.spec.cache.ttl)
        if hit is None or hit.op_id == event.op_id:
            return CacheMissed(**base, reason="not_found")
        ctx.log.info("cache_hit", original=hit.op_id)
        return CacheHit(**base, original_op_id=hit.op_id, outputs=hit.outputs)

    @service.on(sub, OperationSucceeded)
    async def on_succeeded(event: OperationSucceeded, ctx: Context) -> None:
        if event.reason == CACHE_HIT_REASON:
            return None
        store = holder["store"]
        fp = await store.fingerprint_of(event.op_id)
        if fp is not None:
            await store.record(fp, Entry(op_id=event.op_id, ended_at=event.at, outputs=event.outputs))
        return None

    return service
