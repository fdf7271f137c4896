"""The cost service's estimates and budget announcements on the bus: the price catalogue
reloads from its file for the next estimate, node pools price the attempts that ran there, the
expected duration becomes the median of past runs (never below the floor: the default duration), and ``budget_exceeded`` is said once per window,
even across a restart of the cost service. Event times are fixed (``tests.builders.t``); waits are
on events, or on the cost service's state where no event announces it."""
from __future__ import annotations

import pytest

from opsched.proto import subjects
from opsched.proto.config import QueuesConfigured
from opsched.proto.events import (
    BudgetExceeded,
    CostEstimated,
    CostRecorded,
    OperationAdmitted,
    OperationRunning,
    OperationSubmitted,
    OperationSucceeded,
)
from opsched.proto.queues import Budget, QueuesConfig
from opsched.rules.pricing import point_for
from opsched.services.runtime.config_file import ConfigFileError
from tests.builders import node, op, t
from tests.waiting import eventually

BUSES = ["memory"]  # service logic, not about the bus: on the in-memory bus alone (tests/service/conftest.py)

POOL = "cloud.google.com/gke-nodepool"
PRICES = """\
accelerators:
  nvidia.com/gpu: {"*": 2.0}
pools:
  - name: spot
    match: {cloud.google.com/gke-nodepool: spot}
    accelerators:
      nvidia.com/gpu: {"*": 0.5}
"""


async def submit(bus, op_id: str, spec, queue: str = "default") -> None:
    """What admission publishes for an accepted submit (the cost service needs nothing else)."""
    await bus.publish(OperationSubmitted(op_id=op_id, at=t(0), spec=spec, queue=queue, submitted_at=t(0)))


async def ran(bus, op_id: str, start: float, seconds: float, node_name: str | None = None) -> None:
    await bus.publish(OperationRunning(op_id=op_id, at=t(start), pod_name=f"op-{op_id}-0", node=node_name))
    await bus.publish(OperationSucceeded(op_id=op_id, at=t(start + seconds), pod_name=f"op-{op_id}-0"))


async def test_editing_the_prices_file_changes_the_next_estimate(stack_factory, client, events, tmp_path,
                                                               monkeypatch):
    monkeypatch.setattr("opsched.services.runtime.config_file.POLL_S", 0.1)  # polled every 2 s: no need to wait one out
    path = tmp_path / "prices.yaml"
    path.write_text(PRICES)
    stack = await stack_factory(dispatcher_mode="null", prices_file=path)
    cost = stack.service("cost").state
    first = await client.submit(op("first").gpus(1).timeout(3600).build())
    before = await events.expect(CostEstimated, first)
    assert before.estimate.amount == 2.0 and before.prices_source.startswith(f"file:{path}#")
    path.write_text(PRICES.replace('{"*": 2.0}', '{"*": 5.0}'))

    async def reloaded() -> bool:
        return cost.catalogue.source != before.prices_source
    await eventually(reloaded, "the edited prices file in force", timeout=15)
    second = await client.submit(op("second").gpus(1).timeout(3600).build())
    after = await events.expect(CostEstimated, second)
    assert after.estimate.amount == 5.0 and after.prices_source == cost.catalogue.source
    await events.expect(OperationAdmitted, second)  # admission is not disturbed by the catalogue message
    assert [q.name for q in (await client.queues()).queues] == ["default"]


async def test_a_restarted_cost_service_keeps_the_catalogue_in_force(stack_factory, bus, events, tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(PRICES)
    first = await stack_factory(names=("cost",), prices_file=path)
    source = first.service("cost").state.catalogue.source
    await first.close()
    again = await stack_factory(names=("cost",))  # no file this time: the one in the stream stays
    assert again.service("cost").state.catalogue.source == source
    await submit(bus, "x", op("x").gpus(1).timeout(3600).build())
    estimated = await events.expect(CostEstimated, "x")
    assert (estimated.estimate.amount, estimated.prices_source) == (2.0, source)


async def test_an_invalid_prices_file_at_a_first_start_refuses_to_start(stack_factory, tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("cpuHour: cheap\n")
    with pytest.raises(ConfigFileError, match="cpuHour"):
        await stack_factory(names=("cost",), prices_file=path)


async def test_an_attempt_on_a_spot_node_is_charged_the_spot_price(stack_factory, bus, events, tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(PRICES)
    for name, pool in (("spot-1", "spot"), ("std-1", "standard")):
        await bus.publish(node(name, gpus=1, labels={POOL: pool}), subject=subjects.node(name), msg_id=name)
    await stack_factory(names=("cost",), prices_file=path)
    for op_id, node_name in (("on-spot", "spot-1"), ("on-std", "std-1")):
        await submit(bus, op_id, op(op_id).gpus(1).timeout(3600).build())
        await ran(bus, op_id, 0, 3600, node_name)
    spot, std = (await events.expect(CostRecorded, "on-spot")), (await events.expect(CostRecorded, "on-std"))
    assert (spot.amount, spot.pool) == (0.5, "spot") and (std.amount, std.pool) == (2.0, "")


TWO_POOLS = """\
accelerators:
  nvidia.com/gpu: {"*": 2.0}
pools:
  - name: t4-pool
    match: {cloud.google.com/gke-nodepool: t4}
    accelerators:
      nvidia.com/gpu: {"*": 0.35}
  - name: a100-pool
    match: {cloud.google.com/gke-nodepool: a100}
    accelerators:
      nvidia.com/gpu: {"*": 3.0}
"""


async def test_the_same_op_on_a_t4_pool_and_on_an_a100_pool_gets_each_pools_estimate_and_charge(
        stack_factory, bus, events, tmp_path):
    """The issue's test on the cost service: one op, routed by flavor (nothing in its own nodeSelector), priced for
    each pool a flavor may send it to (``points``: what admission reads) and charged by the pool of its node."""
    path = tmp_path / "prices.yaml"
    path.write_text(TWO_POOLS)
    for name, pool in (("t4-1", "t4"), ("a100-1", "a100")):
        await bus.publish(node(name, gpus=1, labels={POOL: pool}), subject=subjects.node(name), msg_id=name)
    await stack_factory(names=("cost",), prices_file=path)
    spec = op("train").gpus(1).timeout(3600).build()
    for op_id, node_name in (("on-t4", "t4-1"), ("on-a100", "a100-1")):
        await submit(bus, op_id, spec)
        await ran(bus, op_id, 0, 3600, node_name)
    estimated = await events.expect(CostEstimated, "on-t4")
    t4, a100 = point_for(estimated.points, {POOL: "t4"}), point_for(estimated.points, {POOL: "a100"})
    assert t4 is not None and a100 is not None
    assert (t4.pool, t4.amount, a100.pool, a100.amount) == ("t4-pool", 0.35, "a100-pool", 3.0)
    on_t4, on_a100 = (await events.expect(CostRecorded, "on-t4")), (await events.expect(CostRecorded, "on-a100"))
    assert (on_t4.amount, on_t4.pool, on_a100.amount, on_a100.pool) == (0.35, "t4-pool", 3.0, "a100-pool")


async def test_the_expected_duration_becomes_the_median_of_three_past_runs(stack_factory, bus, events):
    # the default duration (the floor past runs never go below, no catalogue setting one) below the runs
    cost = (await stack_factory(names=("cost",), default_duration_s=60.0)).service("cost").state
    spec = op("tokenize").gpus(1).build()  # no timeout
    for i, seconds in enumerate([600.0, 60.0, 120.0]):
        await submit(bus, f"run-{i}", spec)
        assert (await events.expect(CostEstimated, f"run-{i}")).basis == "default"
        await ran(bus, f"run-{i}", 10_000 * i, seconds)

    async def learned() -> bool:
        return len(cost.runs_of(spec)) == 3
    await eventually(learned, "three runs of tokenize learned")
    await submit(bus, "next", spec)
    estimated = await events.expect(CostEstimated, "next")
    assert (estimated.basis, estimated.duration_s, estimated.runs) == ("history", 120.0, 3)
    assert abs(estimated.estimate.amount - 2.0 * 120 / 3600) < 1e-6


async def test_short_past_runs_never_drive_an_estimate_below_the_default_duration(stack_factory, bus, events):
    cost = (await stack_factory(names=("cost",))).service("cost").state  # default duration 3600 s: the floor
    spec = op("cheap-then-long").gpus(1).build()  # no timeout
    for i in range(3):
        await submit(bus, f"short-{i}", spec)
        await events.expect(CostEstimated, f"short-{i}")
        await ran(bus, f"short-{i}", 10_000 * i, 1.0)

    async def learned() -> bool:
        return len(cost.runs_of(spec)) == 3
    await eventually(learned, "three one-second runs learned")
    await submit(bus, "long", spec)
    estimated = await events.expect(CostEstimated, "long")
    assert (estimated.basis, estimated.duration_s, estimated.runs) == ("floor", 3600.0, 3)
    assert abs(estimated.estimate.amount - 2.0) < 1e-6  # the catalogue's price of one GPU for the default hour


async def test_budget_exceeded_is_said_once_and_not_again_after_a_restart(stack_factory, bus, events):
    budget = Budget(scope="queue", name="default", window="day", money=2.0)
    await bus.publish(QueuesConfigured(config=QueuesConfig(budgets=[budget]), at=t(0), source="test"))
    first = await stack_factory(names=("cost",))
    for i in range(5):
        await submit(bus, f"op-{i}", op(f"op-{i}").gpus(1).timeout(3600).build())  # 2.0 an hour
    await ran(bus, "op-0", 0, 1800)  # 1.0 spent
    await events.expect(CostRecorded, "op-0")
    await ran(bus, "op-1", 0, 1800)  # 2.0 spent: the limit is reached
    said = await events.expect(BudgetExceeded, "op-1")
    assert (said.scope, said.name, said.window, said.limit, said.spent, said.unit) == (
        "queue", "default", "day", 2.0, 2.0, "USD")
    assert said.window_start == t(0).replace(hour=0) and said.resets_at == said.window_start.replace(day=2)
    await ran(bus, "op-2", 0, 1800)  # 3.0 spent: already said
    await events.expect(CostRecorded, "op-2")
    await events.expect(CostEstimated, "op-4")  # every estimate made before the restart
    await first.close()
    again = await stack_factory(names=("cost",))
    await ran(bus, "op-3", 0, 1800)
    await ran(bus, "op-4", 0, 1800)  # handled after op-3 by the same consumer: a barrier
    await events.expect(CostRecorded, "op-4")
    assert [e.op_id for _, e in events.events if isinstance(e, BudgetExceeded)] == ["op-1"]
    stats = again.service("cost").stats

    async def settled() -> bool:
        return stats.handled == 4  # running and succeeded of op-3 and op-4, each acked
    await eventually(settled, "the restarted cost service handled the two attempts")
    assert stats.published == 2  # only the two cost_recorded: nothing deduplicated away
