"""The fate of an attempt (``services.dispatcher.fates``): a release is final, and a claim that races a
release on another replica (compare-and-set) loses to it."""
from __future__ import annotations

import msgspec

from opsched.proto import subjects
from opsched.proto.attempt_fate import RELEASED, AttemptFate
from opsched.services.dispatcher.fates import Fates
from tests.builders import T0
from tests.builders.kv import MemoryKV


def released_by_another_replica(op_id: str, attempt: int) -> bytes:
    return msgspec.json.encode(AttemptFate(op_id=op_id, attempt=attempt, state=RELEASED, at=T0, by="stop_requested"))


async def test_an_attempt_never_stopped_is_claimed_and_a_redelivery_claims_it_again():
    fates = Fates(MemoryKV())
    assert await fates.claim("a", 0, T0) and await fates.claim("a", 0, T0)
    assert not await fates.released("a", 0)


async def test_a_released_attempt_is_never_claimed_again():
    fates = Fates(MemoryKV())
    await fates.claim("a", 0, T0)
    await fates.release("a", 0, T0, "preempt_requested")
    await fates.release("a", 0, T0, "stop_requested")  # a second release keeps the first one's record
    assert await fates.released("a", 0) and not await fates.claim("a", 0, T0)
    kv_value = msgspec.json.decode((await fates.kv.get(subjects.attempt_fate_key("a", 0))).value, type=AttemptFate)
    assert kv_value.by == "preempt_requested"


async def test_a_claim_that_races_a_release_on_another_replica_loses():
    kv = MemoryKV()
    fates = Fates(kv)
    kv.interfere(subjects.attempt_fate_key("a", 0), released_by_another_replica("a", 0))
    assert not await fates.claim("a", 0, T0)


async def test_a_release_that_races_a_claim_on_another_replica_still_releases():
    kv = MemoryKV()
    fates = Fates(kv)
    await fates.claim("a", 0, T0)
    other = msgspec.json.encode(AttemptFate(op_id="a", attempt=0, state="creating", at=T0))
    kv.interfere(subjects.attempt_fate_key("a", 0), other)
    await fates.release("a", 0, T0, "stop_requested")
    assert await fates.released("a", 0)


async def test_each_attempt_has_its_own_fate():
    fates = Fates(MemoryKV())
    await fates.release("a", 0, T0, "stop_requested")
    assert await fates.claim("a", 1, T0) and await fates.claim("b", 0, T0)
