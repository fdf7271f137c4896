"""A poison message (its handling kills the process: OOM, a segfault, kill -9) is not handled a third time:
the deliveries that died in hand are recorded (``services.runtime.inhand``), and the replica given it after
two of them dead-letters it at once, well before its last delivery, and says so about the op
(``handler_failed``), which admission ends. On the in-memory bus and a real nats-server."""
from __future__ import annotations

from opsched.directreads import DirectReads
from opsched.proto import subjects
from opsched.proto.events import HandlerFailed, OperationRejected
from opsched.proto.reasons import Reason
from opsched.services.runtime.inhand import POISON
from tests.builders import op
from tests.service.test_bad_input import dead_letters
from tests.service.test_max_deliveries import cost_replicas_dying_with_it
from tests.waiting import eventually

# five deliveries allowed (the max-deliveries advisory would come after the fifth); one second of ack wait
# a window of 1: a replica whose handler never returns takes no other message, as a killed process
DYING = dict(handler_window=1,
             max_deliver=5, ack_wait_s=1.0, dependency_backoff_base_s=0.01, dependency_backoff_cap_s=0.05)


async def test_a_message_that_died_in_hand_twice_is_dead_lettered_by_the_next_replica_unhandled(
        stack_factory, tmp_path, bus, client, events):
    costs, held, release = await cost_replicas_dying_with_it(stack_factory, tmp_path, DYING)
    try:
        op_id = await client.submit(op("poison").build())
        failed = await events.expect(HandlerFailed, op_id, timeout=30)
        rejected = await events.expect(OperationRejected, op_id, timeout=30)
    finally:
        release.set()
    assert [delivery for _, delivery in held] == [1, 2]  # the third delivery was not handled
    assert failed.service == "cost" and "2 deliveries of it died in hand" in failed.error
    assert rejected.reason == Reason.HANDLER_FAILED  # admission ended the op
    [copy] = await dead_letters(bus, "cost")
    assert copy.headers["Opsched-Error-Reason"] == POISON
    assert copy.headers["Opsched-Original-Subject"] == subjects.event("submitted", op_id)
    assert sum(c.stats.poisoned for c in costs) == 1 and sum(c.stats.lost for c in costs) == 0

    async def nothing_in_hand() -> bool:  # the held deliveries, let go, settle: the record is deleted (not awaited)
        reads = getattr(bus, "reads", None) or DirectReads(bus.nc, subjects.JS_API_PREFIX)  # the harness: an insider
        return await reads.read_bucket(subjects.IN_HAND_BUCKET) == []
    assert await eventually(nothing_in_hand, "the in-hand record deleted", timeout=10)
