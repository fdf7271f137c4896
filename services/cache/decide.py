"""What the cache answers, and what it remembers, when an op is submitted and when an op ends: the
lookup (``lookup.choose``) of a fresh succeeded original for the op's fingerprint, the waiters of an
original still in processing, and the candidates of each fingerprint, all kept in the key-value
bucket (``store``) so that a restarted or second replica gives the same answers. Every answer is
idempotent: a redelivered event finds the op's record and gives the same answer."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

import msgspec

from opsched.proto.events import (
    CacheHit,
    CacheMissed,
    Event,
    OperationSubmitted,
    OperationSucceeded,
    event_type,
)
from opsched.proto.lifecycle import CACHE_HIT_REASON, OP_ENDS
from opsched.rules.caching import uses_cache
from opsched.services.cache import lookup
from opsched.services.cache.fingerprint import fingerprint
from opsched.services.cache.lookup import Candidate, Hit, Miss, Wait
from opsched.services.cache.store import HIT, MISS, WAIT, CacheStore, Run, Waiter
from opsched.services.runtime.service import Context

SubmittedOf = Callable[[str], Awaitable["OperationSubmitted | None"]]  # an op's submitted event, from the stream


async def _unknown(op_id: str) -> OperationSubmitted | None:
    return None


class Decider:
    """The cache's answers, on its store, the handler's context (clock, log) and ``submitted_of`` (an op's
    ``submitted`` event read back from the stream, for an op it kept no record of)."""

    def __init__(self, store: CacheStore, ctx: Context, submitted_of: SubmittedOf = _unknown) -> None:
        self.store, self.ctx, self.submitted_of = store, ctx, submitted_of

    @property
    def now(self) -> datetime:
        return self.ctx.clock.now()

    # ---- a new op ----
    async def submitted(self, event: OperationSubmitted) -> list[Event]:
        if not uses_cache(event):
            # caching off (``rules.caching``: by default an independent op or a clone; ``cache.disable: true``): no
            # lookup, no record and no answer (admission knows from the spec that there is none to wait for); its
            # result still serves others unless disabled, recorded when it succeeds (``_succeeded_uncached``)
            return []
        known = await self.store.run(event.op_id) if self.ctx.num_delivered > 1 else None
        if known is not None:  # redelivered: the same answer (a first delivery has no record to find)
            return await self._carry_out(known)
        spec = event.spec
        run = Run(op_id=event.op_id, fingerprint=fingerprint(spec), kind=spec.run_kind, runtime=spec.run_kind,
                  submitted_at=event.submitted_at, attempt=event.attempt, ttl=spec.cache.ttl)
        found = lookup.choose(await self.store.candidates(run.fingerprint), op_id=run.op_id, kind=run.kind,
                              runtime=run.runtime, now=self.now, ttl_s=run.ttl)
        run = _decided(run, found)
        if run.decision == WAIT:  # settling a wait reads the run: it is stored first
            await self.store.put_run(run)
            return await self._carry_out(run)
        _, events = await asyncio.gather(self.store.put_run(run), self._carry_out(run))  # two keys at once
        return events

    async def _carry_out(self, run: Run) -> list[Event]:
        """Make the store agree with the decision (idempotent) and say it."""
        if run.decision == HIT:
            self.ctx.log.info("cache_hit", original=run.original)
            return [self._hit(run)]
        if run.decision == MISS:
            if run.candidate and run.ended is None:
                await self.store.change_candidates(run.fingerprint,
                                                   lambda cs: lookup.remember(cs, run.as_candidate()))
            return [self._missed(run)]
        assert run.original is not None
        waiting = await self.store.add_waiter(run.original, Waiter(op_id=run.op_id, attempt=run.attempt))
        if not waiting.closed:
            self.ctx.log.info("cache_waits_for_original", original=run.original)
            return []
        return await self._settle(run.op_id, waiting.outcome)  # the original ended meanwhile

    # ---- an op ended ----
    async def ended(self, event: Event) -> list[Event]:
        """``event`` ended the op (``proto.lifecycle.OP_ENDS``): a failure only by admission's ``failure_final``,
        never a ``failed`` (which admission may retry: the op is still in processing until its decision)."""
        if not isinstance(event, OP_ENDS):
            return []  # an attempt's end (``failed``): admission's decision on it follows
        run = await self.store.run(event.op_id)
        if run is None:  # caching off (its success may serve others), disabled, or unknown
            if isinstance(event, OperationSucceeded) and event.reason != CACHE_HIT_REASON:
                await self._succeeded_uncached(event)
            return []
        how = event_type(type(event))
        run = await self.store.update_run(run.op_id, lambda r: msgspec.structs.replace(r, ended=how)) or run
        if run.decision == WAIT and run.original is not None:
            await self.store.remove_waiter(run.original, run.op_id)  # it ended while it waited
        if run.decision == HIT:
            return []  # a copy of another op's result: never a candidate, nobody waits for it
        outcome = await self._candidate_ended(run, event)
        if not run.candidate:
            return []  # nobody could have chosen to wait for it
        events: list[Event] = []
        for waiter in await self.store.close_waiters(run.op_id, outcome):
            events += await self._settle(waiter.op_id, outcome)
        return events

    async def _candidate_ended(self, run: Run, event: Event) -> Candidate | None:
        """The run's result (None: it did not succeed); as a candidate of its key, a success is kept for later
        ops, any other end forgotten."""
        outcome: Candidate | None = None
        if isinstance(event, OperationSucceeded) and event.reason != CACHE_HIT_REASON:
            outcome = msgspec.structs.replace(run.as_candidate(), state=lookup.SUCCEEDED, ended_at=event.at,
                                              outputs=dict(event.outputs))
            if run.candidate:
                done = outcome
                await self.store.change_candidates(run.fingerprint, lambda cs: lookup.succeed(cs, done))
        elif run.candidate:
            await self.store.change_candidates(run.fingerprint, lambda cs: lookup.forget(cs, run.op_id))
        return outcome

    async def _succeeded_uncached(self, event: OperationSucceeded) -> None:
        """An op with caching off (by default: independent ops, clones) succeeded: its result becomes its key's
        latest, for later ops that use the cache. (While it ran nobody could wait for it: it was not looked up,
        and not kept as a candidate, so that such ops, most of them, cost the cache nothing at submit.)"""
        submitted = await self.submitted_of(event.op_id)
        if submitted is None or submitted.spec.cache.disable is True:
            return  # never reused (disable: true), or no longer stored
        if uses_cache(submitted):
            return  # it used the cache: its record was lost, nothing to add
        spec = submitted.spec
        done = Candidate(op_id=event.op_id, submitted_at=submitted.submitted_at, kind=spec.run_kind,
                         runtime=spec.run_kind, state=lookup.SUCCEEDED, ended_at=event.at, outputs=dict(event.outputs))
        await self.store.change_candidates(fingerprint(spec), lambda cs: lookup.succeed(cs, done))

    async def _settle(self, op_id: str, outcome: Candidate | None) -> list[Event]:
        """The original of waiting op ``op_id`` ended (``outcome``: it, if it succeeded)."""
        run = await self.store.run(op_id)
        if run is None or run.ended is not None:
            return []
        if run.decision == WAIT:
            found = lookup.settle(outcome, await self.store.candidates(run.fingerprint), op_id=op_id,
                                  kind=run.kind, runtime=run.runtime, now=self.now, ttl_s=run.ttl)

            def decide(r: Run) -> Run:
                return _decided(r, found) if r.decision == WAIT else r
            run = await self.store.update_run(op_id, decide) or run
        if run.decision == MISS:
            self.ctx.log.info("cache_original_ended_without_result", original=run.original, reason=run.reason)
        return await self._carry_out(run)

    # ---- events ----
    def _hit(self, run: Run) -> CacheHit:
        return CacheHit(op_id=run.op_id, at=self.now, attempt=run.attempt, fingerprint=run.fingerprint,
                        original_op_id=run.original or "", outputs=dict(run.outputs))

    def _missed(self, run: Run) -> CacheMissed:
        return CacheMissed(op_id=run.op_id, at=self.now, attempt=run.attempt, fingerprint=run.fingerprint,
                           reason=run.reason)


def _decided(run: Run, found: Hit | Wait | Miss) -> Run:
    if isinstance(found, Hit):
        return msgspec.structs.replace(run, decision=HIT, original=found.original.op_id,
                                       outputs=dict(found.original.outputs), candidate=False)
    if isinstance(found, Wait):
        return msgspec.structs.replace(run, decision=WAIT, original=found.original.op_id, candidate=False)
    return msgspec.structs.replace(run, decision=MISS, reason=found.reason, candidate=True)
