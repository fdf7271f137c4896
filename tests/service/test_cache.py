"""The cache on the bus with admission and cost (dispatcher in null mode: the test publishes
the originals' ends itself): hits, waiting for an original in processing, restarts, and ops with caching off,
which the cache does not answer and admission does not wait for (issue 36)."""
from __future__ import annotations

from datetime import datetime, timezone

import msgspec

from opsched.proto import codec, subjects
from opsched.proto.events import (
    CacheHit,
    CacheMissed,
    CostEstimated,
    OperationAdmitted,
    OperationFailed,
    OperationSucceeded,
)
from opsched.services.cache.store import CacheStore
from tests.builders import cache_missed, cost_estimated, op, submitted
from tests.waiting import eventually, waiting_on

OUTPUTS = {"model": "s3://bucket/model.pt", "accuracy": "0.93"}


def cached(name: str = "train"):
    return op(name).gpus(1).runs("python train.py --epochs 3").cache(disable=False).build()


def ended_ok(op_id: str, outputs: dict[str, str] | None = None) -> OperationSucceeded:
    return OperationSucceeded(op_id=op_id, at=datetime.now(timezone.utc), pod_name=f"op-{op_id}-0",
                              outputs=dict(outputs or {}))


def ended_failed(op_id: str) -> OperationFailed:
    return OperationFailed(op_id=op_id, at=datetime.now(timezone.utc), pod_name=f"op-{op_id}-0", reason="Error",
                           message="exit 1", exit_code=1)


async def waiting_for(bus, original: str, op_id: str, timeout: float = 10.0) -> None:
    """Until the cache has recorded ``op_id`` as waiting for ``original`` (in its key-value bucket)."""
    store = CacheStore(await bus.ensure_cache_bucket(subjects.CACHE_BUCKET))
    async def recorded() -> bool:
        found = await store.waiters(original)
        return bool(found and any(w.op_id == op_id for w in found.waiters))
    await eventually(recorded, f"{op_id} recorded as waiting for {original}", timeout, interval=0.05)


async def cache_hit_of(events, original: str, op_id: str) -> OperationSucceeded:
    hit = await events.expect(CacheHit, op_id)
    assert hit.original_op_id == original and hit.outputs == OUTPUTS
    done = await events.expect(OperationSucceeded, op_id)
    assert done.reason == "cache_hit"
    assert done.outputs == OUTPUTS  # the original's outputs, passed on by admission
    assert not events.of(op_id, OperationAdmitted)  # no GPU, no pod: never admitted
    return done


async def test_the_same_op_twice_the_second_is_a_cache_hit_and_never_admitted(stack_factory, bus, client, events):
    await stack_factory(names=("admission", "cost", "cache", "dispatcher"), dispatcher_mode="null")
    first = await client.submit(cached())
    assert (await events.expect(CacheMissed, first)).reason == "not_found"
    await events.expect(OperationAdmitted, first)
    await bus.publish(ended_ok(first, OUTPUTS))
    second = await client.submit(cached())
    await cache_hit_of(events, first, second)


async def test_an_op_waits_for_its_running_original_and_takes_its_result(stack_factory, bus, client, events):
    await stack_factory(names=("admission", "cost", "cache", "dispatcher"), dispatcher_mode="null")
    first = await client.submit(cached())
    await events.expect(OperationAdmitted, first)
    second = await client.submit(cached())
    await waiting_for(bus, first, second)
    assert not events.of(second, CacheHit) and not events.of(second, CacheMissed)
    assert not events.of(second, OperationAdmitted)
    await bus.publish(ended_ok(first, OUTPUTS))
    await cache_hit_of(events, first, second)


async def test_an_op_waiting_for_an_original_that_fails_is_scheduled_normally(stack_factory, bus, client, events):
    await stack_factory(names=("admission", "cost", "cache", "dispatcher"), dispatcher_mode="null")
    first = await client.submit(cached())
    await events.expect(OperationAdmitted, first)
    second = await client.submit(cached())
    await waiting_for(bus, first, second)
    await bus.publish(ended_failed(first))
    missed = await events.expect(CacheMissed, second)
    assert missed.reason == "original_failed"
    await events.expect(OperationAdmitted, second)
    assert not events.of(second, CacheHit)


async def test_waiters_and_results_survive_a_restart_of_the_cache_service(stack_factory, bus, client, events):
    await stack_factory(names=("admission", "cost", "dispatcher"), dispatcher_mode="null")
    cache = await stack_factory(names=("cache",), dispatcher_mode="null")
    first = await client.submit(cached())
    await events.expect(OperationAdmitted, first)
    second = await client.submit(cached())
    await waiting_for(bus, first, second)

    await cache.close()  # the cache is down when the original succeeds
    await bus.publish(ended_ok(first, OUTPUTS))
    await events.expect(OperationSucceeded, first)
    assert not events.of(second, CacheHit)

    await stack_factory(names=("cache",), dispatcher_mode="null")  # a new process: only the bucket is left
    await cache_hit_of(events, first, second)
    third = await client.submit(cached())
    await cache_hit_of(events, first, third)


async def op_stream_of(bus, op_id: str) -> list[str]:
    """The types of the events about ``op_id`` stored on the op stream, in order."""
    return [codec.type_of(codec.decode_event(data))
            for data in await bus.read_all(subjects.OPS_STREAM, subjects.events_for(op_id))]


async def test_an_op_with_caching_off_is_admitted_with_no_cache_event_on_the_op_stream(stack_factory, bus, client,
                                                                                       events):
    stack = await stack_factory(names=("admission", "cost", "cache", "dispatcher"), dispatcher_mode="null")
    cache = stack.service("cache")
    plain = await client.submit(op("train").gpus(1).runs("python train.py").build())  # independent: caching off
    await events.expect(OperationAdmitted, plain)

    async def taken() -> bool:  # the cache took its submitted (a handler's events are published before its ack)
        return cache.stats.handled >= 1
    await eventually(taken, "the cache took the op's submitted")
    stored = await op_stream_of(bus, plain)
    assert stored[:2] == ["submitted", "cost_estimated"] and "admitted" in stored
    assert not {"cache_hit", "cache_missed"} & set(stored)  # nothing to say: admission knows it from the spec
    assert cache.stats.published == 0


async def test_an_op_of_a_batch_uses_the_cache_and_waits_for_its_answer(stack_factory, bus, client, events):
    await stack_factory(names=("admission", "cost", "dispatcher"), dispatcher_mode="null")  # no cache yet
    swept = msgspec.structs.replace(op("trial").gpus(1).runs("python train.py --lr 0.1").build(), batch="sweep-1")
    op_id = await client.submit(swept)
    await events.expect(CostEstimated, op_id)
    why = await eventually(lambda: waiting_on(client, op_id, "waiting_cache"), "the op waiting for the cache")
    assert [r.code for r in why.reasons] == ["waiting_cache"]  # its estimate is in: only the cache holds it

    await stack_factory(names=("cache",), dispatcher_mode="null")
    assert (await events.expect(CacheMissed, op_id)).reason == "not_found"
    await events.expect(OperationAdmitted, op_id)
    assert (await op_stream_of(bus, op_id)).index("cache_missed") < (await op_stream_of(bus, op_id)).index("admitted")


async def test_an_op_stream_from_before_issue_36_with_a_miss_disabled_replays_and_its_op_is_admitted_once(
        stack_factory, bus, client, events):
    """Before issue 36 the cache answered an op with caching off with a miss ``disabled``: an admission that
    replays such a stream takes it harmlessly (the gate was answered at the op's ``submitted``)."""
    for event in (submitted(op("old").gpus(1).build(), op_id="old-1"), cache_missed("old-1", reason="disabled"),
                  cost_estimated("old-1")):
        await bus.publish(event)
    await stack_factory(names=("admission", "cost", "dispatcher"), dispatcher_mode="null")
    await events.expect(OperationAdmitted, "old-1")
    probe = await client.submit(op("probe").build())
    await events.expect(OperationAdmitted, probe)  # a later cycle ran
    assert len(events.of("old-1", OperationAdmitted)) == 1
