"""The fate of an attempt (``services.dispatcher.fates``): a release is final and keeps who released it, an
attempt never released reads as not released, and a release that races another write of the key still
releases."""
from __future__ import annotations

import msgspec

from opsched.proto import subjects
from opsched.proto.attempt_fate import CREATING, AttemptFate
from opsched.services.dispatcher.fates import Fates
from tests.builders import T0
from tests.builders.kv import MemoryKV


async def test_an_attempt_never_stopped_is_not_released_and_costs_no_write():
    kv = MemoryKV()
    fates = Fates(kv)
    assert not await fates.released("a", 0)
    assert not kv.data  # nothing written for it


async def test_a_release_is_final_and_keeps_the_first_releases_record():
    fates = Fates(MemoryKV())
    await fates.release("a", 0, T0, "preempt_requested")
    await fates.release("a", 0, T0, "stop_requested")  # a second release keeps the first one's record
    assert await fates.released("a", 0)
    kv_value = msgspec.json.decode((await fates.kv.get(subjects.attempt_fate_key("a", 0))).value, type=AttemptFate)
    assert kv_value.by == "preempt_requested"


async def test_a_release_that_races_another_write_of_the_key_still_releases():
    kv = MemoryKV()
    fates = Fates(kv)
    other = msgspec.json.encode(AttemptFate(op_id="a", attempt=0, state=CREATING, at=T0))  # an earlier version's
    kv.interfere(subjects.attempt_fate_key("a", 0), other)
    await fates.release("a", 0, T0, "stop_requested")
    assert await fates.released("a", 0)


async def test_each_attempt_has_its_own_fate():
    fates = Fates(MemoryKV())
    await fates.release("a", 0, T0, "stop_requested")
    assert not await fates.released("a", 1) and not await fates.released("b", 0)
