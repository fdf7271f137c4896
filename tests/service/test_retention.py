"""Retention on the bus: 200 ops finish, their ttl passes: admission holds only the live ops, the op
stream no longer holds the finished ops' events (their spend excepted, for the budget windows), `opsched
ops` still shows them from their summaries, and a restart reads only what is live and decides as before.
(The dispatcher in null mode: the test publishes running/succeeded itself.)"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from opsched.client import Client
from opsched.proto import codec, subjects
from opsched.proto.events import CostRecorded, OperationAdmitted, OperationRunning, SpendRolled
from opsched.services.admission.state.admission_state import Status
from tests.builders import op
from tests.builders.clock import FakeClock
from tests.service.test_cost import ran
from tests.waiting import eventually

N = 200
TTL = 60.0
QUEUES = """
queues:
  - name: default
    concurrency: 500
budgets:
  - scope: queue
    name: default
    window: month
    money: 100000
"""


def gpu_op(name: str):
    return op(name).gpus(1).project("vision").timeout(3600).build()


def decisions_of(admission) -> dict:
    """What admission decides from: its live ops, their quota and order, and the spend per window."""
    state = admission.state
    return {
        "ops": {i: (o.status, o.attempt, o.holds_quota) for i, o in state.ops.items()},
        "active": {q: set(ids) for q, ids in state.usage.active.items() if ids},
        "waiting": {q: s.waiting for q, s in state.queues.queues.items()},
        "spend": dict(state.fold.spend.money),
    }


async def month_spend(client: Client) -> float:
    report = await client.cost()
    return next(b.spent_money for b in report.budgets if (b.scope, b.name) == ("queue", "default"))


async def test_finished_ops_leave_memory_and_the_stream_but_not_the_views_nor_the_budget(
        stack_factory, bus, client, events, tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    settings = dict(dispatcher_mode="null", queues_file=path, retention_ttl_s=TTL, retention_interval_s=3600.0)
    stack = await stack_factory(**settings)
    done = [await client.submit(gpu_op(f"done{i}"), op_id=f"done-{i}") for i in range(N)]
    live = [await client.submit(gpu_op(f"live{i}"), op_id=f"live-{i}") for i in range(2)]
    for op_id in done + live:
        await events.expect(OperationAdmitted, op_id, timeout=60)
    await bus.publish(OperationRunning(op_id=live[0], at=datetime.now(timezone.utc), pod_name="op-live-0-0"))
    for op_id in done:
        await ran(bus, op_id, 60)
    for op_id in done:
        await events.expect(CostRecorded, op_id, timeout=60)
    admission = stack.service("admission")

    async def all_folded() -> bool:
        ended = [o for o in admission.state.ops.values() if o.status == Status.SUCCEEDED]
        return len(ended) == N and len(admission.state.fold.spend.seen) == N
    await eventually(all_folded, "admission folded every end and its cost", timeout=60)
    spent = await eventually(lambda: month_spend(client), "cost counted the spend", timeout=30)
    stored_before = len(await bus.read_all(subjects.OPS_STREAM, subjects.OPS_ALL))

    # the ttl passes (on the retention's clock): every finished op leaves, once the services consumed it
    admission.retention.clock = FakeClock(datetime.now(timezone.utc) + timedelta(seconds=TTL + 1))

    async def purged() -> bool:
        await admission.retention.round(admission.bus)
        return set(admission.state.ops) == set(live)
    await eventually(purged, "the finished ops left admission's memory", timeout=60, interval=0.5)
    before_restart = decisions_of(admission)

    stored = [codec.decode_event(d) for d in await bus.read_all(subjects.OPS_STREAM, subjects.OP_EVENTS)]
    assert [e for e in stored if e.op_id in done] == []  # their spend is rolled up, per budget scope
    rolled = [e for e in stored if isinstance(e, SpendRolled)]
    assert sorted((r.scope, r.name) for r in rolled) == [("project", "vision"), ("queue", "default")]
    assert {e.op_id for e in stored} - {r.op_id for r in rolled} == set(live)
    assert len(stored) < stored_before / 4

    rows = {r.op_id: r for r in await client.ops()}
    assert all(rows[i].status == "succeeded" and rows[i].queue == "default" and rows[i].gpus == 1 for i in done)
    assert (rows[live[0]].status, rows[live[1]].status) == ("running", "dispatched")
    assert (await client.why(done[0])).status == "succeeded"
    assert abs(await month_spend(client) - spent) < 1e-6

    # a restart reads only what is live (and the spend), and decides as before
    await stack.close()
    stack = await stack_factory(**settings)
    again = stack.service("admission")
    assert decisions_of(again) == before_restart
    assert abs(await eventually(lambda: month_spend(client), "cost replayed the spend") - spent) < 1e-6
    newcomer = await client.submit(gpu_op("newcomer"), op_id="newcomer")
    await events.expect(OperationAdmitted, newcomer, timeout=30)
    rows = {r.op_id: r for r in await client.ops()}
    assert rows[done[0]].status == "succeeded" and rows["newcomer"].status in ("admitted", "dispatched")
