"""The cache service's handlers on an in-memory key-value bucket with the nats semantics (revisions,
compare-and-set): hits, waiting for an original in processing, restarts, redeliveries and races."""
from __future__ import annotations

from datetime import timedelta

import msgspec
import pytest
import structlog

from opsched.proto.events import (
    CacheHit,
    CacheMissed,
    FailureFinal,
    OperationFailed,
    OperationStopped,
    OperationSubmitted,
    OperationSucceeded,
)
from opsched.proto.spec import OpSpec, Termination
from opsched.services.cache.decide import Decider
from opsched.services.cache.service import Cache, consumed_subjects
from opsched.services.cache.store import CacheStore, Run, Waiter, Waiters
from opsched.services.runtime.service import Context
from tests.builders import T0, failed, failure_final, op, retry_scheduled, stopped, submitted, succeeded
from tests.builders.clock import FakeClock
from tests.builders.kv import Entry, MemoryKV


class Harness:
    """One cache service replica: ``await h.submit(spec, "b")``, ``await h.end(succeeded("a"))``."""

    def __init__(self, kv: MemoryKV | None = None, clock: FakeClock | None = None,
                 stream: dict[str, OperationSubmitted] | None = None) -> None:
        self.kv = kv or MemoryKV()
        self.clock = clock or FakeClock(T0)
        self.ctx = Context("cache", self.clock, None, structlog.get_logger())
        self.stream = {} if stream is None else stream  # the submitted events, as the op stream keeps them

    def restarted(self) -> Harness:
        return Harness(self.kv, self.clock, self.stream)

    @property
    def cache(self) -> Decider:
        async def submitted_of(op_id: str) -> OperationSubmitted | None:
            return self.stream.get(op_id)
        return Decider(CacheStore(self.kv), self.ctx, submitted_of)

    async def submit(self, spec: OpSpec, op_id: str, **kw):
        event = submitted(spec, op_id=op_id, at=self.clock.now(), **kw)
        self.stream[op_id] = event
        return await self.cache.submitted(event)

    async def end(self, event):
        return await self.cache.ended(event)

    async def run(self, op_id: str) -> Run | None:
        return await CacheStore(self.kv).run(op_id)


def cacheable(name: str = "train", **kw) -> OpSpec:
    return op(name).image("pytorch:2").runs("python train.py").cache(disable=False, **kw).build()


def only(events, kind):
    assert len(events) == 1 and isinstance(events[0], kind), events
    return events[0]


def done(op_id: str, *, at=T0, attempt: int = 0, **outputs: str) -> OperationSucceeded:
    return msgspec.structs.replace(succeeded(op_id, at=at, attempt=attempt), outputs=outputs)


def test_the_cache_consumes_submitted_ops_and_every_way_an_op_ends():
    assert consumed_subjects() == ["ops.submitted.>", "ops.succeeded.>", "ops.failure_final.>", "ops.stopped.>",
                                   "ops.timed_out.>", "ops.skipped.>", "ops.rejected.>"]


def test_the_cache_does_not_take_a_failed_attempt_for_an_end():
    """Admission decides whether a failure ends the op (``failure_final``): the cache neither consumes ``failed`` nor
    handles one (a ``failed`` delivered from an older consumer's filter is acked unhandled)."""
    assert "ops.failed.>" not in consumed_subjects()
    assert OperationFailed not in Cache.ops.methods and FailureFinal in Cache.ops.methods


async def test_the_same_op_after_its_original_succeeded_is_a_hit_with_the_originals_outputs():
    h = Harness()
    first = only(await h.submit(cacheable(), "a"), CacheMissed)
    assert first.reason == "not_found"
    assert await h.end(done("a", model="s3://m")) == []
    hit = only(await h.submit(cacheable(), "b"), CacheHit)
    assert (hit.original_op_id, hit.outputs, hit.fingerprint) == ("a", {"model": "s3://m"}, first.fingerprint)


async def test_an_op_of_another_content_misses():
    h = Harness()
    await h.submit(cacheable(), "a")
    await h.end(done("a"))
    other = op("train").image("pytorch:2").runs("python eval.py").cache(disable=False).build()
    assert only(await h.submit(other, "b"), CacheMissed).reason == "not_found"


async def test_a_result_older_than_the_ttl_is_not_reused_and_the_new_op_runs():
    h = Harness()
    await h.submit(cacheable(), "a")
    await h.end(done("a", at=T0))
    h.clock.advance(120)
    assert only(await h.submit(cacheable(ttl=60), "b"), CacheMissed).reason == "expired"
    assert only(await h.submit(cacheable(ttl=600), "c"), CacheHit).original_op_id == "a"


async def test_an_op_waits_for_an_original_in_processing_and_takes_its_result():
    h = Harness()
    await h.submit(cacheable(), "a")
    assert await h.submit(cacheable(), "b") == []  # waiting: nothing published yet
    assert await h.submit(cacheable(), "c") == []
    hits = await h.end(done("a", model="s3://m"))
    assert sorted((e.op_id, e.original_op_id, e.outputs["model"]) for e in hits) == [
        ("b", "a", "s3://m"), ("c", "a", "s3://m")]
    assert all(isinstance(e, CacheHit) for e in hits)


@pytest.mark.parametrize("ending", [
    failure_final("a", reason="Error"),
    stopped("a"),
    failure_final("a", reason="PodRejected", max_retries=3),
], ids=["failed", "stopped", "pod rejected"])
async def test_a_waiter_is_scheduled_normally_when_its_original_ends_without_a_result(ending):
    h = Harness()
    await h.submit(cacheable(), "a")
    assert await h.submit(cacheable(), "b") == []
    missed = only(await h.end(ending), CacheMissed)
    assert (missed.op_id, missed.reason) == ("b", "original_failed")
    # b now runs itself: the next op with the same key waits for b, not for the failed a
    assert await h.submit(cacheable(), "c") == []
    assert (await h.run("c")).original == "b"


async def test_a_failed_attempt_admission_retries_keeps_the_original_in_processing():
    h = Harness()
    await h.submit(msgspec.structs.replace(cacheable(), termination=Termination(max_retries=1)), "a")
    assert await h.submit(cacheable(), "b") == []
    assert await h.end(failed("a", reason="Error", attempt=0)) == []  # not an end: no decision yet
    assert await h.end(retry_scheduled("a", attempt=0)) == []  # admission retries it
    hit = only(await h.end(done("a", attempt=1, model="s3://m2")), CacheHit)
    assert (hit.op_id, hit.outputs) == ("b", {"model": "s3://m2"})


@pytest.mark.parametrize("max_retries", [None, 0, 1, 5])
async def test_a_failure_ends_the_original_only_by_admissions_final_decision_whatever_maxretries_says(max_retries):
    """No counting in the cache: a ``failed`` (even the attempt's last by maxRetries) keeps the waiters waiting; the
    ``failure_final`` that follows releases them, whatever maxRetries was."""
    h = Harness()
    await h.submit(msgspec.structs.replace(cacheable(), termination=Termination(max_retries=max_retries)), "a")
    assert await h.submit(cacheable(), "b") == []
    assert await h.end(failed("a", reason="Error", attempt=1)) == []
    assert (await h.run("a")).ended is None and (await h.run("b")).decision == "wait"
    missed = only(await h.end(failure_final("a", attempt=1, max_retries=max_retries)), CacheMissed)
    assert (missed.op_id, missed.reason) == ("b", "original_failed")
    assert (await h.run("a")).ended == "failure_final"
    again = await h.end(failure_final("a", attempt=1, max_retries=max_retries))  # redelivered: the same answer
    assert [(e.op_id, e.reason) for e in again] == [("b", "original_failed")]


async def test_state_survives_a_restart_of_the_cache_service():
    h = Harness()
    await h.submit(cacheable(), "a")
    assert await h.submit(cacheable(), "b") == []
    again = h.restarted()  # a new process: only the bucket is left
    assert only(await again.end(done("a", model="s3://m")), CacheHit).op_id == "b"
    assert only(await again.restarted().submit(cacheable(), "c"), CacheHit).original_op_id == "a"


async def test_redelivered_events_get_the_same_answers():
    h = Harness()
    assert only(await h.submit(cacheable(), "a"), CacheMissed) == only(await h.submit(cacheable(), "a"),
                                                                       CacheMissed)
    assert await h.submit(cacheable(), "b") == []
    assert await h.submit(cacheable(), "b") == []
    first = await h.end(done("a", model="s3://m"))
    h.clock.advance(5)
    again = await h.end(done("a", model="s3://m"))
    assert [(e.op_id, e.original_op_id) for e in again] == [(e.op_id, e.original_op_id) for e in first] == [
        ("b", "a")]
    assert (await h.submit(cacheable(), "b"))[0].original_op_id == "a"  # b's submitted again: the same hit


async def test_an_op_that_starts_waiting_just_after_its_original_ended_gets_the_result():
    """Replica 1 read the candidates while the original ran; replica 2 then saw it end (and closed its
    waiters) before replica 1 added its waiter: replica 1 settles the op itself."""
    h = Harness()
    await h.submit(cacheable(), "a")
    stale = dict(h.kv.data)  # what replica 1 read
    await h.end(done("a", model="s3://m"))
    key = next(k for k in h.kv.data if k.startswith("key."))
    h.kv.data[key] = stale[key]  # replica 1's view: a still in processing
    hit = only(await h.submit(cacheable(), "b"), CacheHit)
    assert (hit.original_op_id, hit.outputs) == ("a", {"model": "s3://m"})


async def test_a_change_that_loses_a_race_is_retried_on_the_new_value():
    h = Harness()
    await h.submit(cacheable(), "a")
    await h.submit(cacheable(), "b")
    await h.submit(cacheable(), "c")
    both = h.kv.data["wait.a"].value
    h.kv.data["wait.a"] = Entry(msgspec.json.encode(Waiters(waiters=[Waiter(op_id="b")])), h.kv.seq + 1)
    h.kv.seq += 1
    # another replica adds waiter c between our read of a's list and our write (closing it)
    h.kv.interfere("wait.a", both)
    hits = await h.end(done("a"))
    assert sorted(e.op_id for e in hits) == ["b", "c"]  # c was not lost


async def test_a_waiter_that_ends_while_it_waits_gets_nothing_later():
    h = Harness()
    await h.submit(cacheable(), "a")
    await h.submit(cacheable(), "b")
    assert await h.end(OperationStopped(op_id="b", at=T0)) == []
    assert await h.end(done("a")) == []


async def test_an_independent_op_is_not_looked_up_but_its_result_serves_a_later_cached_op():
    h = Harness()
    plain = op("train").image("pytorch:2").runs("python train.py").build()
    assert await h.submit(plain, "a") == []  # no answer: admission knows from the spec there is none to wait for
    assert await h.submit(plain, "b") == []
    await h.end(done("a", model="s3://m"))
    assert only(await h.submit(cacheable(), "c"), CacheHit).original_op_id == "a"


async def test_ops_of_a_batch_use_the_cache_by_default():
    h = Harness()
    swept = msgspec.structs.replace(op("train").runs("python train.py").build(), batch="sweep-1")
    assert only(await h.submit(swept, "a"), CacheMissed).reason == "not_found"
    await h.end(done("a"))
    assert only(await h.submit(swept, "b"), CacheHit).original_op_id == "a"


async def test_disable_true_is_never_looked_up_never_reused_and_writes_nothing():
    h = Harness()
    off = op("train").runs("python train.py").cache(disable=True).build()
    off_batch = msgspec.structs.replace(off, batch="sweep-1")
    assert await h.submit(off_batch, "a") == []
    assert h.kv.writes == 0
    assert await h.end(done("a")) == []
    same_but_cached = msgspec.structs.replace(off, cache=cacheable().cache)
    assert only(await h.submit(same_but_cached, "b"), CacheMissed).reason == "not_found"


async def test_a_restart_of_an_op_is_not_looked_up_by_default():
    h = Harness()
    swept = msgspec.structs.replace(op("train").runs("python train.py").build(), batch="sweep-1")
    await h.submit(swept, "a")
    await h.end(done("a"))
    event = submitted(swept, op_id="b")
    event.original_op_id, event.relation = "a", "restart"
    assert await h.cache.submitted(event) == [] and await h.run("b") is None


async def test_a_hit_is_never_a_candidate_itself():
    h = Harness()
    await h.submit(cacheable(), "a")
    await h.end(done("a", at=T0))
    await h.submit(cacheable(), "b")
    await h.end(msgspec.structs.replace(done("b", at=T0 + timedelta(seconds=50)), reason="cache_hit"))
    h.clock.advance(100)
    # b "ended" later, but it is a copy of a: a ttl from a's end applies
    assert only(await h.submit(cacheable(ttl=60), "c"), CacheMissed).reason == "expired"


async def test_an_op_with_caching_off_costs_the_cache_nothing_until_it_succeeds():
    h = Harness()
    plain = op("train").image("pytorch:2").runs("python train.py").build()
    assert await h.submit(plain, "a") == []
    assert h.kv.writes == 0 and await h.run("a") is None  # no record, no candidate: nothing to wait for
    assert only(await h.submit(cacheable(), "b"), CacheMissed).reason == "not_found"  # runs, does not wait
    await h.end(done("a", model="s3://a"))  # its result is kept when it succeeds
    assert only(await h.submit(cacheable(), "c"), CacheHit).original_op_id == "a"


async def test_a_redelivered_submitted_of_an_op_with_caching_off_gets_no_answer_either():
    h = Harness()
    h.ctx.num_delivered = 2
    assert await h.submit(op("train").build(), "a") == [] and h.kv.writes == 0
