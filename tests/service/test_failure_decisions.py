"""Admission's decision on each failed attempt, on the bus (the test publishes the dispatcher's ``failed``): an op of
``maxRetries: 1`` gets ``retry_scheduled``, then ``failure_final``; what follows the op (``watch``/``submit --wait``,
``opsched ops``, ``why``) and the cache read that decision, never a rule of their own."""
from __future__ import annotations

import asyncio
import io
from datetime import datetime, timezone

from opsched.proto.events import (
    CacheMissed,
    FailureFinal,
    OperationAdmitted,
    OperationDispatched,
    OperationFailed,
    RetryScheduled,
)
from opsched.watching import PLAIN, follow
from tests.builders import op
from tests.service.test_cache import waiting_for

QUEUES = """
defaultQueue: default
retryBackoff: {baseSeconds: 0, factor: 2, maxSeconds: 0}
queues:
  - name: default
"""


async def start(stack_factory, tmp_path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(queues_file=path, dispatcher_mode="null")


def fail(op_id: str, attempt: int, reason: str = "Error") -> OperationFailed:
    """The dispatcher's word: attempt ``attempt`` failed."""
    return OperationFailed(op_id=op_id, at=datetime.now(timezone.utc), attempt=attempt,
                           pod_name=f"op-{op_id}-{attempt}", reason=reason, message="exit code 1", exit_code=1)


def retried_once(name: str, cached: bool = False):
    builder = op(name).max_retries(1).runs("python train.py")
    return (builder.cache(disable=False) if cached else builder).build()


async def test_an_op_of_max_retries_1_gets_a_retry_then_the_final_decision_and_every_view_reads_it(
        stack_factory, tmp_path, bus, client, events):
    await start(stack_factory, tmp_path)
    op_id = await client.submit(retried_once("flaky"))
    watched = asyncio.ensure_future(follow(client, [op_id], PLAIN, out=(out := io.StringIO()), timeout=30))
    await events.expect(OperationDispatched, op_id)  # the (null) dispatcher's word on attempt 0, before its end
    await bus.publish(fail(op_id, 0))
    retry = await events.expect(RetryScheduled, op_id)
    assert (retry.attempt, retry.reason, retry.retries_used) == (0, "Error", 1)
    await events.expect(OperationDispatched, op_id, where=lambda e: e.attempt == 1)
    assert not watched.done()  # the failed attempt 0 ended nothing
    await bus.publish(fail(op_id, 1))
    final = await events.expect(FailureFinal, op_id)
    assert (final.attempt, final.reason, final.retries_used, final.max_retries) == (1, "Error", 1, 1)
    assert final.message == "no retry left: 1 of maxRetries 1 used"
    assert await asyncio.wait_for(watched, 30) == 1  # `submit --wait` / `watch`: ended, not succeeded
    lines = out.getvalue().splitlines()
    assert any(f"{op_id} failed " in line and "-> attempt_failed" in line for line in lines), lines
    assert any(f"{op_id} retry_scheduled" in line and "-> retrying" in line for line in lines), lines
    assert f"{op_id} failure_final" in lines[-1] and "-> failed" in lines[-1]
    assert [type(e) for e in events.of(op_id) if isinstance(e, (RetryScheduled, FailureFinal))] == [
        RetryScheduled, FailureFinal]
    (row,) = [r for r in await client.ops() if r.op_id == op_id]  # `opsched ops`
    assert (row.status, row.attempt, row.terminal) == ("failed", 1, True)
    assert row.reason == "Error: exit code 1; no retry left: 1 of maxRetries 1 used"
    assert (await client.why(op_id)).status == "failed"


async def test_an_op_waiting_for_its_original_waits_through_the_retry_and_runs_after_the_final_failure(
        stack_factory, tmp_path, bus, client, events):
    await start(stack_factory, tmp_path)
    original = await client.submit(retried_once("cached", cached=True))
    await events.expect(OperationAdmitted, original)
    waiter = await client.submit(retried_once("cached", cached=True))
    await waiting_for(bus, original, waiter)
    await bus.publish(fail(original, 0))
    await events.expect(RetryScheduled, original)
    await events.expect(OperationAdmitted, original, where=lambda e: e.attempt == 1)
    assert not events.of(waiter, CacheMissed)  # the original is retried: still in processing
    await waiting_for(bus, original, waiter)
    await bus.publish(fail(original, 1))
    await events.expect(FailureFinal, original)
    assert (await events.expect(CacheMissed, waiter)).reason == "original_failed"
    await events.expect(OperationAdmitted, waiter)


def decisions_made(admission, kind: str) -> float:
    """How many ``kind`` decisions this admission's cycles made (its /metrics counter)."""
    return sum(s.value for metric in admission.measures.decisions.collect() for s in metric.samples
               if s.name.endswith("_total") and s.labels.get("result") == kind)


async def test_a_restarted_admission_replays_the_decisions_and_publishes_none_again(
        stack_factory, tmp_path, bus, client, events):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(names=("cost", "cache", "dispatcher"), dispatcher_mode="null")
    first = await stack_factory(names=("admission",), queues_file=path)
    op_id = await client.submit(retried_once("flaky"))
    await events.expect(OperationDispatched, op_id)
    await bus.publish(fail(op_id, 0))
    await events.expect(OperationDispatched, op_id, where=lambda e: e.attempt == 1)
    await bus.publish(fail(op_id, 1))
    await events.expect(FailureFinal, op_id)
    assert decisions_made(first.service("admission"), "failure_final") == 1
    await first.close()
    again = await stack_factory(names=("admission",), queues_file=path)  # replays the stream
    probe = await client.submit(op("probe").build())
    await events.expect(OperationAdmitted, probe)  # a cycle has run on the replayed state
    admission = again.service("admission")
    assert admission.state.ops[op_id].status.label == "failed" and not admission.state.ops[op_id].failure_undecided
    assert decisions_made(admission, "failure_final") == decisions_made(admission, "retry_scheduled") == 0
    assert (await client.why(op_id)).status == "failed"
