"""The actual-cost ledger and the spend report: run time x hourly price (of the node pool an attempt
ran in, else the op's own pool or the defaults: always the catalogue's), calendar UTC windows, spend per window and
burn rate. The ledger is a fold of the op stream (``services.cost.ledger.Ledger``): its price from the op's
``cost_estimated``, each attempt's start and end, in either order, on any replica, redelivered."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import msgspec
import pytest
import structlog

from opsched.proto import codec
from opsched.proto.events import (
    CostEstimated,
    CostRecorded,
    Event,
    OperationResumed,
    OperationRunning,
    OperationSubmitted,
)
from opsched.proto.limits import MAX_COST
from opsched.proto.prices import PricePool
from opsched.proto.queues import Budget
from opsched.rules.windows import window_end, window_start
from opsched.services.cost import service
from opsched.services.cost.estimator import Prices, estimated, gpu_count, hourly_price
from opsched.services.cost.ledger import Ledger, charge
from opsched.services.cost.service import Cost
from opsched.services.cost.spend import SpendView
from opsched.services.runtime.service import Context, RetryLater
from opsched.services.runtime.settings import Settings
from tests.builders import (
    GPU,
    case,
    case_name,
    failed,
    failure_final,
    op,
    rejected,
    retry_scheduled,
    running,
    stopped,
    submitted,
    succeeded,
    t,
)
from tests.builders.clock import FakeClock

PRICES = Prices(currency="USD", cpu_hour=0.04, gib_hour=0.005, accelerators={GPU: {"A100": 3.0, "*": 2.0}})


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.mark.parametrize("c", [
    case("an hour at two dollars an hour costs two dollars", start=t(0), end=t(3600), hourly=2.0, gpus=1,
         seconds=3600.0, amount=2.0, gpu_hours=1.0),
    case("ninety seconds are charged pro rata", start=t(0), end=t(90), hourly=4.0, gpus=2,
         seconds=90.0, amount=0.1, gpu_hours=0.05),
    case("an end before the start (clock skew) costs nothing", start=t(10), end=t(0), hourly=4.0, gpus=1,
         seconds=0.0, amount=0.0, gpu_hours=0.0),
    case("an op without accelerators uses no GPU-hours", start=t(0), end=t(7200), hourly=0.04, gpus=0,
         seconds=7200.0, amount=0.08, gpu_hours=0.0),
    case("a negative price is never credited", start=t(0), end=t(36_000), hourly=-1000.0, gpus=8,
         seconds=36_000.0, amount=0.0, gpu_hours=80.0),
    case("a price that is not a number costs nothing rather than poisoning the totals", start=t(0), end=t(3600),
         hourly=float("nan"), gpus=1, seconds=3600.0, amount=0.0, gpu_hours=1.0),
    case("an infinite price is capped at the largest amount", start=t(0), end=t(3600), hourly=float("inf"),
         gpus=1, seconds=3600.0, amount=MAX_COST, gpu_hours=1.0),
], ids=case_name)
def test_charge(c):
    got = charge(c.start, c.end, c.hourly, c.gpus)
    assert (got.seconds, got.amount, got.gpu_hours) == (c.seconds, pytest.approx(c.amount), pytest.approx(c.gpu_hours))


@pytest.mark.parametrize("c", [
    case("two A100s cost six an hour", builder=op().gpus(2, product="A100"), hourly=6.0, gpus=2),
    case("a GPU of no priced product costs the any-product price", builder=op().gpus(1), hourly=2.0, gpus=1),
    case("an op's own cost is not its price: the catalogue's is", builder=op().gpus(1).cost(10.0).timeout(7200),
         hourly=2.0, gpus=1),
    case("an op's cost of zero does not make it free", builder=op().gpus(8).cost(0.0), hourly=16.0, gpus=8),
], ids=case_name)
def test_hourly_price_and_gpus(c):
    spec = c.builder.build()
    assert hourly_price(spec, PRICES) == pytest.approx(c.hourly)
    assert gpu_count(spec) == c.gpus


@pytest.mark.parametrize("c", [
    case("a day starts at midnight UTC", at=utc(2026, 1, 1, 12, 30), window="day",
         start=utc(2026, 1, 1), end=utc(2026, 1, 2)),
    case("a week starts on Monday", at=utc(2026, 1, 1, 12), window="week",
         start=utc(2025, 12, 29), end=utc(2026, 1, 5)),
    case("a Monday is the first day of its own week", at=utc(2026, 1, 5, 0, 0, 1), window="week",
         start=utc(2026, 1, 5), end=utc(2026, 1, 12)),
    case("a month starts on the 1st", at=utc(2026, 2, 14, 8), window="month",
         start=utc(2026, 2, 1), end=utc(2026, 3, 1)),
    case("December resets into January of the next year", at=utc(2025, 12, 31, 23, 59), window="month",
         start=utc(2025, 12, 1), end=utc(2026, 1, 1)),
    case("a time in another zone is converted to UTC first",
         at=datetime.fromisoformat("2026-01-02T01:00:00+02:00"), window="day",
         start=utc(2026, 1, 1), end=utc(2026, 1, 2)),
], ids=case_name)
def test_windows(c):
    assert window_start(c.at, c.window) == c.start
    assert window_end(c.at, c.window) == c.end


def recorded(op_id: str, amount: float, *, at: datetime, seconds: float = 3600.0, queue: str = "a",
             project: str = "vision", gpu_hours: float = 1.0, attempt: int = 0) -> CostRecorded:
    from datetime import timedelta
    return CostRecorded(op_id=op_id, at=at, attempt=attempt, amount=amount, seconds=seconds, queue=queue,
                        project=project, gpu_hours=gpu_hours, started_at=at - timedelta(seconds=seconds))


def test_spend_is_summed_per_window_and_a_redelivered_record_counts_once():
    view = SpendView()
    for e in (recorded("x", 2.0, at=t(0)), recorded("x", 2.0, at=t(0)), recorded("y", 3.0, at=utc(2025, 12, 30)),
              recorded("z", 5.0, at=utc(2025, 12, 1))):
        view.fold(e)
    answer = view.answer([], t(60))
    line = next(s for s in answer.spend if (s.scope, s.name) == ("queue", "a"))
    assert (line.day, line.week, line.month) == (2.0, 5.0, 2.0)  # Dec 30 is this week, not this month
    assert {(s.scope, s.name) for s in answer.spend} == {("queue", "a"), ("project", "vision")}


def test_the_burn_rate_counts_the_last_hour_of_finished_and_running_attempts():
    view = SpendView()
    view.fold(recorded("x", 4.0, at=t(1800), seconds=7200.0))  # ran 2 h, the last 30 min in the window
    view.hourly["r"] = 6.0
    view.fold(OperationRunning(op_id="r", at=t(1800), pod_name="p"))  # half an hour so far at 6/h
    assert view.burn_rate(t(3600)) == pytest.approx(4.0 * 0.25 + 3.0)


def test_a_budget_line_reports_spend_what_is_left_and_when_the_window_resets():
    view = SpendView()
    view.fold(recorded("x", 3.0, at=t(0), gpu_hours=2.0))
    budget = Budget(scope="project", name="vision", window="day", money=10.0, gpu_hours=1.5)
    line = view.answer([budget], t(60)).budgets[0]
    assert (line.spent_money, line.remaining_money) == (3.0, 7.0)
    assert (line.spent_gpu_hours, line.remaining_gpu_hours) == (2.0, 0.0)  # never below zero
    assert line.resets_at == utc(2026, 1, 2)


POOL = "cloud.google.com/gke-nodepool"
POOLED = Prices(accelerators={GPU: {"A100": 3.0, "*": 2.0}}, cpu_hour=0.0, gib_hour=0.0, pools=[
    PricePool(name="spot", match={POOL: "spot"}, accelerators={GPU: {"A100": 1.0, "*": 0.5}})])
NODES = {"spot-1": {POOL: "spot", "nvidia.com/gpu.product": "A100"}, "std-1": {POOL: "standard"}}


class Replica:
    """One cost replica's ledger: the fold of the op stream, and what it says an attempt cost (an op without a price
    on the stream priced by the catalogue in force, ``prices["now"]``)."""

    def __init__(self, prices: dict[str, Prices], nodes: dict[str, dict[str, str]] = NODES) -> None:
        self.ledger, self.prices, self.nodes = Ledger(), prices, nodes

    def fold(self, *events: Event) -> Replica:
        for e in events:
            self.ledger.fold(e)
        return self

    def recorded(self, op_id: str, attempt: int = 0) -> CostRecorded | None:
        return self.ledger.recorded(op_id, attempt, self.nodes.get, lambda s: price(s, self.prices["now"]))

    def handle(self, e: Event) -> CostRecorded | None:
        """As the ledger's handler: ``e`` folded first (the follow reached it), then its attempt's cost."""
        self.fold(e)
        return self.recorded(e.op_id, e.attempt)


def price(e: OperationSubmitted, prices: Prices) -> CostEstimated:
    return estimated(e, prices, e.at, default_duration_s=3600.0)


def priced(spec, op_id: str, prices: Prices, queue: str | None = None) -> list[Event]:
    """An op's submitted and the cost_estimated the estimator answers it with."""
    sub = submitted(spec, op_id=op_id, queue=queue)
    return [sub, price(sub, prices)]


def one_hour(rep: Replica, op_id: str, spec, node: str | None) -> CostRecorded:
    rep.fold(*priced(spec, op_id, rep.prices["now"]))
    assert rep.handle(running(op_id, at=t(0), node=node)) is None  # not ended yet
    done = rep.handle(succeeded(op_id, at=t(3600)))
    assert done is not None
    return done


@pytest.mark.parametrize("c", [
    case("an attempt on a node of a priced pool pays the pool's price", node="spot-1", selector=None,
         amount=1.0, pool="spot"),
    case("an attempt on a node of no pool pays the op's own price", node="std-1", selector=None,
         amount=3.0, pool=""),
    case("an attempt on a node not seen yet pays the op's own price", node="new-1", selector=None,
         amount=3.0, pool=""),
    case("an op pinned to a pool pays that pool's price wherever it is said to run", node=None,
         selector="spot", amount=1.0, pool="spot"),
], ids=case_name)
def test_an_attempt_is_charged_at_the_price_of_the_pool_it_ran_in(c):
    builder = op().gpus(1, product="A100")
    if c.selector:
        builder = builder.node_selector(POOL, c.selector)
    done = one_hour(Replica({"now": POOLED}), "x", builder.build(), c.node)
    assert (done.amount, done.pool, done.queue, done.currency) == (pytest.approx(c.amount), c.pool, "default", "USD")
    assert (done.seconds, done.gpu_hours, done.started_at, done.at) == (3600.0, 1.0, t(0), t(3600))


def test_a_catalogue_change_prices_only_ops_submitted_after_it_the_price_travels_on_the_estimate():
    prices = {"now": POOLED}
    rep = Replica(prices)
    rep.fold(*priced(op().gpus(1, product="A100").build(), "before", POOLED))
    prices["now"] = msgspec.structs.replace(POOLED, accelerators={GPU: {"A100": 5.0}}, pools=[
        PricePool(name="spot", match={POOL: "spot"}, accelerators={GPU: {"A100": 2.0}})])
    for op_id, node in (("before", "std-1"), ("after", "std-1"), ("before-spot", "spot-1")):
        if op_id != "before":
            rep.fold(*priced(op().gpus(1, product="A100").build(), op_id, prices["now"]))
        rep.handle(running(op_id, at=t(0), node=node))
    amounts = {i: rep.handle(succeeded(i, at=t(3600))).amount for i in ("before", "after", "before-spot")}
    assert amounts == {"before": 3.0, "after": 5.0, "before-spot": 2.0}


def test_an_op_whose_estimate_has_no_price_is_priced_by_the_catalogue_in_force():
    """A stream from before the price travelled on ``cost_estimated`` (or one without it): its submitted, priced
    when the attempt is recorded."""
    spec = op().gpus(1, product="A100").build()
    sub, est = priced(spec, "old", POOLED)
    old = msgspec.structs.replace(est, pod_shapes=[], hourly=0.0, gpus=0, labels={},
                                  points=[msgspec.structs.replace(p, shapes=[]) for p in est.points])
    for events in ([sub, old], [sub]):
        rep = Replica({"now": POOLED}).fold(*events, running("old", at=t(0), node="spot-1"))
        done = rep.handle(succeeded("old", at=t(3600)))
        assert (done.amount, done.pool, done.gpu_hours) == (1.0, "spot", 1.0)


FLAVORED = Prices(accelerators={GPU: {"A100": 3.0, "T4": 0.35, "*": 2.0}}, cpu_hour=0.0, gib_hour=0.0)
GPU_NODES = {"t4-1": {"nvidia.com/gpu.product": "T4"}, "a100-1": {"nvidia.com/gpu.product": "A100"}}


def flavored() -> Replica:
    return Replica({"now": FLAVORED}, GPU_NODES)


def test_the_same_op_run_on_a_t4_and_on_an_a100_is_charged_each_catalogue_price():
    spec = op("train").gpus(2).build()  # no product of its own: routed by flavor
    rep = flavored()
    on_t4, on_a100 = one_hour(rep, "t", spec, "t4-1"), one_hour(rep, "a", spec, "a100-1")
    assert (on_t4.amount, on_a100.amount) == (pytest.approx(0.7), pytest.approx(6.0))
    assert [(c.pool, c.product, c.pods, c.hourly) for c in on_t4.pods] == [("", "T4", 1, pytest.approx(0.7))]


def test_a_gang_across_a_t4_and_an_a100_is_charged_per_pod():
    spec = op("ddp").gpus(1).replicas("worker", 2).build()  # main + 2 workers, 1 GPU each
    rep = flavored().fold(*priced(spec, "g", FLAVORED))
    rep.handle(OperationRunning(op_id="g", at=t(0), pod_name="op-g-0", node="a100-1", nodes=["a100-1", "t4-1", "t4-1"]))
    done = rep.handle(succeeded("g", at=t(3600)))
    assert done.amount == pytest.approx(3.0 + 2 * 0.35) and done.pool == ""
    assert [(c.product, c.pods, c.hourly) for c in done.pods] == [("A100", 1, pytest.approx(3.0)),
                                                                  ("T4", 2, pytest.approx(0.7))]


def test_a_gang_whose_pods_nodes_are_not_said_is_charged_at_the_main_pods_node():
    spec = op("ddp").gpus(1).replicas("worker", 1).build()
    done = one_hour(flavored(), "g", spec, "t4-1")
    assert done.amount == pytest.approx(0.7) and [(c.product, c.pods) for c in done.pods] == [("T4", 2)]


@pytest.mark.parametrize("cost", [0.0, 40.0, -10_000.0], ids=["zero", "above", "negative"])
def test_an_op_with_its_own_cost_is_charged_by_the_catalogue_of_the_pool_it_ran_in(cost):
    spot, standard = op().gpus(1).timeout(7200).build(), op().gpus(8).build()
    spot.cost = standard.cost = cost  # set after building: a value the contract refuses still arrives intact
    done = one_hour(Replica({"now": POOLED}), "x", spot, "spot-1")
    assert (done.amount, done.pool) == (1.0, "spot")  # an A100 of the spot pool
    done = one_hour(Replica({"now": POOLED}), "y", standard, "std-1")
    assert (done.amount, done.pool) == (16.0, "")


# ---- the fold: start and end in either order, redelivered, on any replica; retries; forgetting ----------

def a_run(op_id: str = "x", attempt: int = 0, node: str = "spot-1") -> list[Event]:
    """An attempt that ran an hour (its running, then its end)."""
    return [running(op_id, at=t(0), attempt=attempt, node=node), succeeded(op_id, at=t(3600), attempt=attempt)]


@pytest.mark.parametrize("order", ["start, end", "end, start"])
def test_the_later_of_an_attempts_start_and_end_records_it_and_a_redelivery_says_the_same(order):
    rep = Replica({"now": POOLED}).fold(*priced(op().gpus(1, product="A100").build(), "x", POOLED))
    first, later = a_run() if order == "start, end" else a_run()[::-1]
    assert rep.handle(first) is None  # the other is not folded yet
    done = rep.handle(later)
    assert (done.amount, done.seconds, done.pool, done.started_at) == (1.0, 3600.0, "spot", t(0))
    assert rep.recorded("x") == done and rep.handle(first) == done  # redelivered: the same message (same Nats-Msg-Id)


def test_two_replicas_whatever_they_handled_give_the_same_message():
    """Both folded the stream (each its own follow); each handles one of the two messages, or both, in any order."""
    stream = [*priced(op().gpus(1, product="A100").replicas("worker", 1).build(), "x", POOLED),
              OperationRunning(op_id="x", at=t(0), pod_name="op-x-0", node="spot-1", nodes=["spot-1", "std-1"]),
              succeeded("x", at=t(5400))]
    one, other = Replica({"now": POOLED}).fold(*stream), Replica({"now": POOLED}).fold(*stream)
    assert one.recorded("x") == other.recorded("x") is not None
    assert one.recorded("x").amount == pytest.approx(1.5 * (1.0 + 3.0))  # a pod on spot, one on a standard node


def test_an_end_folded_before_its_start_is_kept_until_the_start_comes():
    rep = Replica({"now": POOLED}).fold(*priced(op().gpus(1, product="A100").build(), "x", POOLED),
                                        succeeded("x", at=t(1800)))
    assert rep.recorded("x") is None and "x" in rep.ledger.parked  # the op ended: parked for its running
    assert rep.handle(running("x", at=t(0), node="std-1")).amount == 1.5


def test_an_op_stopped_before_it_ran_records_nothing_and_is_forgotten():
    rep = Replica({"now": POOLED}).fold(*priced(op().gpus(1).build(), "y", POOLED), rejected("y"))
    assert rep.ledger.ops == {} and not rep.ledger.parked
    rep.fold(*priced(op().gpus(1).build(), "x", POOLED))
    assert rep.handle(stopped("x", at=t(60))) is None
    assert rep.ledger.ops == {} and list(rep.ledger.parked) == ["x"]  # parked: a running stored after its end?
    for i in range(Ledger.PARKED):
        rep.fold(*priced(op().gpus(1).build(), f"s-{i}", POOLED), stopped(f"s-{i}", at=t(60)))
    assert "x" not in rep.ledger.parked and len(rep.ledger.parked) == Ledger.PARKED  # the oldest parked go


def test_a_running_stored_after_the_ops_end_is_still_charged():
    rep = Replica({"now": POOLED}).fold(*priced(op().gpus(1, product="A100").build(), "x", POOLED))
    assert rep.handle(succeeded("x", at=t(3600))) is None  # the attempt's end, and the op's
    done = rep.handle(running("x", at=t(0), node="spot-1"))
    assert done.amount == 1.0 and set(rep.ledger.ops) == {"x"}
    rep.fold(done)
    assert rep.ledger.ops == {} and not rep.ledger.parked


def test_a_retry_is_recorded_apart_from_the_first_attempt():
    rep = Replica({"now": POOLED}).fold(*priced(op().gpus(1, product="A100").build(), "x", POOLED))
    rep.handle(running("x", at=t(0), node="spot-1"))
    first = rep.handle(failed("x", at=t(1800)))
    rep.fold(first, retry_scheduled("x", at=t(1800)))
    assert rep.handle(running("x", at=t(3600), attempt=1, node="std-1")) is None
    second = rep.handle(succeeded("x", at=t(7200), attempt=1))
    assert [(r.attempt, r.amount, r.pool) for r in (first, second)] == [(0, 0.5, "spot"), (1, 3.0, "")]
    assert rep.recorded("x", 0) is None  # its record folded: the attempt is done with


def test_an_ended_op_is_forgotten_once_its_attempts_records_are_folded():
    rep = Replica({"now": POOLED}).fold(*priced(op().gpus(1, product="A100").build(), "x", POOLED))
    rep.handle(running("x", at=t(0)))
    done = rep.handle(failed("x", at=t(60)))
    rep.fold(failure_final("x", at=t(60)))
    assert set(rep.ledger.ops) == {"x"}  # ended, but its attempt's cost_recorded is not folded yet
    rep.fold(done)
    assert rep.ledger.ops == {}
    assert rep.handle(failed("x", at=t(60))) is None  # a late redelivery: recorded already, nothing more


def test_memory_is_bounded_by_the_live_ops():
    rep = Replica({"now": POOLED})
    for i in range(100):
        rep.fold(*priced(op().gpus(1).build(), f"op-{i}", POOLED))
        done = rep.handle(running(f"op-{i}", at=t(0))) or rep.handle(succeeded(f"op-{i}", at=t(60)))
        rep.fold(done)
    rep.fold(*priced(op().gpus(1).build(), "live", POOLED))
    assert set(rep.ledger.ops) == {"live"} and rep.ledger.ops["live"].submitted is None  # only its price is kept


# ---- the ledger's handler: its message folded first (the follow), else given back ------------------------

def cost_service() -> Cost:
    return Cost(Settings(), FakeClock(t(0)))


def handler_ctx(svc: Cost, seq: int) -> Context:
    return Context("cost", svc.clock, svc.settings, structlog.get_logger(), stream_seq=seq)


async def fold_at(svc: Cost, seq: int, e: Event) -> None:
    await svc.state.fold(codec.encode(e), seq)


async def test_the_handler_waits_for_the_follow_to_fold_its_message_then_records_from_the_fold():
    svc = cost_service()
    spec = op().cpu("90").build()
    for seq, e in enumerate(priced(spec, "x", svc.state.catalogue.prices), start=1):
        await fold_at(svc, seq, e)
    await fold_at(svc, 3, running("x", at=t(0)))
    end = succeeded("x", at=t(60))
    handling = asyncio.ensure_future(svc.record(end, handler_ctx(svc, 4)))
    done, _ = await asyncio.wait({handling}, timeout=0.05)
    assert not done  # seq 4 not folded yet: it waits (the follow is behind the consumer)
    await fold_at(svc, 4, end)
    [recorded] = await asyncio.wait_for(handling, 5)
    assert (recorded.op_id, recorded.amount, recorded.seconds) == ("x", 0.06, 60.0)


async def test_a_message_the_follow_does_not_fold_in_time_is_given_back(monkeypatch):
    monkeypatch.setattr(service, "FOLD_WAIT_S", 0.01)
    svc = cost_service()
    with pytest.raises(RetryLater):
        await svc.record(succeeded("x", at=t(60)), handler_ctx(svc, 7))


def test_an_op_resumed_after_the_ledger_forgot_it_is_priced_again_from_the_stream():
    sub, est = priced(op().gpus(1, product="A100").build(), "x", POOLED)
    rep = Replica({"now": POOLED}).fold(sub, est)
    rep.handle(running("x", at=t(0), node="std-1"))
    rep.fold(rep.handle(failed("x", at=t(1800))), failure_final("x", at=t(1800)))
    assert rep.ledger.ops == {}  # ended and recorded: forgotten
    rep.fold(OperationResumed(op_id="x", at=t(3600), attempt=1))
    assert rep.ledger.unpriced("x")  # its handler reads its submitted and cost_estimated from the stream
    rep.ledger.priced_again("x", sub, est)
    assert not rep.ledger.unpriced("x")
    rep.handle(running("x", at=t(3600), attempt=1, node="spot-1"))
    again = rep.handle(succeeded("x", at=t(7200), attempt=1))
    assert (again.attempt, again.amount, again.pool, again.queue) == (1, 1.0, "spot", "default")


def test_a_parked_op_resumed_is_charged_at_its_price_at_submit():
    prices = {"now": POOLED}
    rep = Replica(prices).fold(*priced(op().gpus(1, product="A100").build(), "x", POOLED), stopped("x", at=t(60)))
    assert list(rep.ledger.parked) == ["x"]
    prices["now"] = msgspec.structs.replace(POOLED, accelerators={GPU: {"A100": 5.0}})  # not what it pays
    rep.fold(OperationResumed(op_id="x", at=t(120), attempt=1))
    assert set(rep.ledger.ops) == {"x"} and not rep.ledger.parked and not rep.ledger.unpriced("x")
    rep.handle(running("x", at=t(0), attempt=1, node="std-1"))
    assert rep.handle(succeeded("x", at=t(3600), attempt=1)).amount == 3.0
