"""The cost ledger on the bus, a fold of the op stream (no key-value bucket): two cost instances share the
``cost-ledger`` consumer beside one admission (the dispatcher in null mode: the test publishes each attempt's
``running`` and end itself); an op that runs gets exactly one ``cost_recorded``, whichever instance takes which
message and in whichever order the attempt's start and end are stored, and both instances forget it after; an op
resumed after that is priced again from the stream."""
from __future__ import annotations

from datetime import timedelta

from opsched.proto.events import CostRecorded, FailureFinal, OperationAdmitted, OperationResumed
from tests.builders import failed, op, running, succeeded
from tests.builders.clock import T0
from tests.waiting import eventually

QUEUES = """
defaultQueue: default
queues:
  - name: default
"""
SHARING = dict(dispatcher_mode="null", fetch_batch=1)  # one message at a time: both instances get some


async def two_costs(stack_factory, tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(("admission", "cache", "dispatcher"), queues_file=path, dispatcher_mode="null")
    return [(await stack_factory(("cost",), **SHARING)).service("cost") for _ in range(2)]


async def forgotten(costs, op_ids: list[str]) -> None:
    """Both instances folded every op's cost_recorded: their ledgers hold none of them any more."""
    async def gone() -> bool:
        return all(op_id not in c.state.ledger.ops for c in costs for op_id in op_ids)
    await eventually(gone, f"{op_ids} forgotten by both ledgers", timeout=20, interval=0.05)


async def test_an_op_that_runs_and_succeeds_gets_exactly_one_cost_recorded_from_two_instances(
        stack_factory, tmp_path, bus, client, events):
    costs = await two_costs(stack_factory, tmp_path)
    op_ids = [await client.submit(op(f"run-{i}").runs(f"echo {i}").cpu("90").build(), op_id=f"run-{i}")
              for i in range(6)]
    for op_id in op_ids:
        await events.expect(OperationAdmitted, op_id)
    for i, op_id in enumerate(op_ids):  # half of them: the end stored before the start
        start, end = running(op_id, at=T0, node=None), succeeded(op_id, at=T0 + timedelta(minutes=1))
        for e in ((start, end) if i % 2 == 0 else (end, start)):
            await bus.publish(e)
    for op_id in op_ids:
        recorded = await events.expect(CostRecorded, op_id)
        assert (recorded.amount, recorded.seconds, recorded.queue, recorded.started_at) == (0.06, 60.0, "default", T0)
    await forgotten(costs, op_ids)
    assert [len(events.of(op_id, CostRecorded)) for op_id in op_ids] == [1] * len(op_ids)
    assert sum(c.stats.handled for c in costs) >= 2 * len(op_ids)  # each op's running and end, through the ledger
    assert all(c.state.ledger.ops.keys().isdisjoint(op_ids) and not c.state.ledger.parked for c in costs)


async def test_an_op_resumed_after_both_ledgers_forgot_it_is_charged_its_next_attempt(
        stack_factory, tmp_path, bus, client, events):
    costs = await two_costs(stack_factory, tmp_path)
    op_id = await client.submit(op("again").runs("false").cpu("90").build(), op_id="again")
    await events.expect(OperationAdmitted, op_id)
    await bus.publish(running(op_id, at=T0, node=None))
    await bus.publish(failed(op_id, at=T0 + timedelta(minutes=1)))
    await events.expect(FailureFinal, op_id)
    first = await events.expect(CostRecorded, op_id)
    await forgotten(costs, [op_id])
    await client.resume(op_id)
    await events.expect(OperationResumed, op_id)
    await events.expect(OperationAdmitted, op_id, where=lambda e: e.attempt == 1)
    await bus.publish(running(op_id, at=T0 + timedelta(hours=1), attempt=1, node=None))
    await bus.publish(succeeded(op_id, at=T0 + timedelta(hours=1, minutes=2), attempt=1))
    second = await events.expect(CostRecorded, op_id, where=lambda e: e.attempt == 1)
    assert (first.attempt, first.amount, second.amount, second.seconds) == (0, 0.06, 0.12, 120.0)
