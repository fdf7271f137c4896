"""``budget_exceeded``: announced once per budget, limit and window when a recorded cost brings the
window's spend to or past the limit; admission ignores it."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from opsched.bus.addressing import default_msg_id, subject_for
from opsched.proto.events import BudgetExceeded, CostRecorded
from opsched.proto.queues import Budget
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.cost.budgets import Announcements
from tests.builders import case, case_name, op, submitted

DAY = datetime(2026, 1, 1, tzinfo=timezone.utc)
AT = datetime(2026, 1, 1, 15, tzinfo=timezone.utc)
MONEY = Budget(scope="queue", name="a", window="day", money=10.0)
GPU = Budget(scope="project", name="vision", window="week", gpu_hours=4.0)


def record(op_id: str = "op-1", *, amount: float = 2.0, gpu_hours: float = 1.0, at: datetime = AT,
           queue: str = "a") -> CostRecorded:
    return CostRecorded(op_id=op_id, at=at, amount=amount, seconds=3600.0, queue=queue, project="vision",
                        gpu_hours=gpu_hours, currency="EUR")


def spent_of(money: float, gpu_hours: float):
    return lambda scope, name, window, at: (money, gpu_hours)


@pytest.mark.parametrize("c", [
    case("spend below every limit announces nothing", budgets=[MONEY, GPU], spent=(9.99, 3.9), expect=[]),
    case("spend reaching the money limit exactly announces it", budgets=[MONEY], spent=(10.0, 0.0),
         expect=[("queue", "a", "day", "EUR", 10.0)]),
    case("spend past the GPU-hour limit announces it", budgets=[GPU], spent=(0.0, 5.0),
         expect=[("project", "vision", "week", "gpu_hours", 5.0)]),
    case("a budget of another queue is not this record's", budgets=[Budget(scope="queue", name="b", window="day",
                                                                           money=1.0)], spent=(50.0, 0.0), expect=[]),
    case("both limits of one budget are announced each", budgets=[Budget(scope="queue", name="a", window="month",
                                                                         money=1.0, gpu_hours=1.0)],
         spent=(3.0, 2.0), expect=[("queue", "a", "month", "EUR", 3.0), ("queue", "a", "month", "gpu_hours", 2.0)]),
], ids=case_name)
def test_a_limit_reached_is_announced(c):
    out = Announcements().crossed(c.budgets, record(), spent_of(*c.spent))
    assert [(e.scope, e.name, e.window, e.unit, e.spent) for e in out] == c.expect
    assert all(e.op_id == "op-1" and e.at == AT for e in out)


def test_the_window_and_its_reset_are_those_of_the_record():
    [e] = Announcements().crossed([MONEY], record(), spent_of(10.0, 0.0))
    assert (e.window_start, e.resets_at, e.limit) == (DAY, datetime(2026, 1, 2, tzinfo=timezone.utc), 10.0)


def test_a_limit_announced_in_the_stream_is_not_announced_again_until_the_next_window():
    seen = Announcements()
    [first] = seen.crossed([MONEY], record(), spent_of(12.0, 0.0))
    seen.fold(first)  # folded from the op stream (replayed after a restart)
    assert seen.crossed([MONEY], record("op-2"), spent_of(14.0, 0.0)) == []
    tomorrow = record("op-3", at=datetime(2026, 1, 2, 1, tzinfo=timezone.utc))
    assert [e.window_start.day for e in seen.crossed([MONEY], tomorrow, spent_of(11.0, 0.0))] == [2]


def test_its_message_id_is_one_per_budget_limit_and_window_whichever_op_crossed_it():
    [a] = Announcements().crossed([MONEY], record("op-1"), spent_of(10.0, 0.0))
    [b] = Announcements().crossed([MONEY], record("op-2"), spent_of(11.0, 0.0))
    assert default_msg_id(a) == default_msg_id(b) == "budget_exceeded.queue.a.day.EUR.20260101"
    assert subject_for(a) == "ops.budget_exceeded.op-1"


def test_admission_ignores_it():
    state = AdmissionState()
    state.apply(submitted(op("x").build(), op_id="op-1"))
    event = BudgetExceeded(op_id="op-1", at=AT, scope="queue", name="a", window="day", limit=1.0, spent=2.0,
                           unit="USD", window_start=DAY, resets_at=AT)
    assert state.apply(event) is False
    assert state.apply(BudgetExceeded(**{**{f: getattr(event, f) for f in event.__struct_fields__},
                                         "op_id": "unknown"})) is False


# ---- pool budgets: the node budget tick (``Cost.node_budget_tick``), with the fake clock -------------------------

def pool_cost_service(clock):
    from opsched.proto.cluster import NodeObserved
    from opsched.proto.config import PricesConfigured
    from opsched.proto.prices import PricePool, Prices
    from opsched.services.cost.service import Cost
    from opsched.services.runtime.settings import Settings

    svc = Cost(Settings(node_budget_tick_s=60.0), clock)
    svc.state.catalogue.apply(PricesConfigured(at=clock.now(), source="test", prices=Prices(
        pools=[PricePool(name="a100-nodes", match={"pool": "a100"}, node_hour=10.0)])))
    svc.state.budgets = [Budget(scope="pool", name="a100", window="day", money=25.0)]
    svc.state.pool_of = lambda agent, labels: labels.get("pool", "")  # type: ignore[method-assign]
    svc.state.meter.observe(NodeObserved(node="a100-0", at=clock.now(), labels={"pool": "a100"},
                                         allocatable={"nvidia.com/gpu": "8"}, created=clock.now()))
    return svc


async def test_the_node_budget_tick_announces_a_pool_budget_once_per_window_when_open_nodes_cross_it():
    import asyncio

    from opsched.proto import codec
    from tests.builders.bus import memory_bus
    from tests.builders.clock import FakeClock

    clock = FakeClock(datetime(2026, 1, 1, 1, tzinfo=timezone.utc))
    svc, bus, stop = pool_cost_service(clock), memory_bus(), asyncio.Event()
    tick = asyncio.create_task(svc.node_budget_tick(bus, stop))

    async def ticks(n: int) -> list[BudgetExceeded]:
        for _ in range(n):
            await asyncio.sleep(0)  # let the tick reach its sleep
            clock.advance(60.0)
            for _ in range(5):
                await asyncio.sleep(0)
        return [e for p in bus.published if not p.duplicate
                for e in [codec.decode_event(p.data)] if isinstance(e, BudgetExceeded)]

    assert await ticks(60) == []  # 1 h of one open node: 10.0 of 25.0
    announced = await ticks(120)  # 2.5 h: 25.0 reached
    assert [(e.scope, e.name, e.limit, e.window_start) for e in announced] == [("pool", "a100", 25.0, DAY)]
    assert announced[0].spent >= 25.0 and announced[0].resets_at == datetime(2026, 1, 2, tzinfo=timezone.utc)
    assert await ticks(10) == announced  # once per window
    stop.set()
    clock.advance(60.0)
    await tick

    restarted = pool_cost_service(clock)  # a restart folds the announcement from the op stream: not again
    restarted.state.announced.fold(announced[0])
    assert restarted.state.pool_budgets_exceeded(clock.now()) == []
