"""Retention: a finished op leaves admission's memory and the op stream after its ttl, a live one never;
what views and dependants need of it stays (its summary, its final status), and so does spend a budget
window still holds."""
from __future__ import annotations

from datetime import timedelta

import msgspec
import pytest

from opsched.bus.errors import InvalidInput
from opsched.proto import codec, subjects
from opsched.proto.events import CostRecorded, Event, OperationRejected
from opsched.proto.spec import Termination
from opsched.proto.summaries import OpSummary
from opsched.services.admission import handlers
from opsched.services.admission.purge import Retention, purge_order
from opsched.services.admission.schedules import run_status
from opsched.services.admission.state.admission_state import AdmissionState, Status
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import (
    T0,
    admitted,
    case,
    case_name,
    dispatched,
    gates_cleared,
    op,
    running,
    stop,
    submit,
    submitted,
    succeeded,
)
from tests.builders.bus import MemoryBus, memory_bus
from tests.builders.clock import FakeClock

TTL = 3600.0
HOUR = 3600.0


class World:
    """Admission's state fed from an in-memory stream, and its retention task, at a fake time."""

    def __init__(self, **settings) -> None:
        self.bus: MemoryBus = memory_bus("admission")
        self.clock = FakeClock(T0)
        self.state = AdmissionState()
        self.settings = Settings(retention_ttl_s=TTL, **settings)
        self.retention = Retention(self.state.fold, self.settings, self.clock, _Log())

    async def store(self, *events: Event) -> None:
        for event in events:
            ack = await self.bus.publish(event)
            self.state.apply(event, ack.seq)

    def held(self) -> set[str]:
        return set(self.state.ops)

    def stream_ops(self) -> set[str]:
        return {m.subject.split(".")[2] for m in self.bus.broker.stored(subjects.OPS_STREAM)}

    def stream_kinds(self, op_id: str) -> list[str]:
        return [m.subject.split(".")[1] for m in self.bus.broker.stored(subjects.OPS_STREAM, subjects.events_for(op_id))]

    def summary(self, op_id: str) -> OpSummary | None:
        kv = self.bus.broker.buckets.get(subjects.OPS_BUCKET)
        entry = kv.data.get(op_id) if kv else None
        return msgspec.json.decode(entry.value, type=OpSummary) if entry else None

    async def after(self, seconds: float) -> int:
        self.clock.advance(seconds)
        return await self.retention.round(self.bus)


class _Log:
    def info(self, *args, **kwargs) -> None: ...

    def warning(self, *args, **kwargs) -> None: ...


def finished(op_id: str, *, at=T0, spec=None) -> list[Event]:
    spec = spec or op(op_id).gpus(1).build()
    return [submitted(spec, op_id=op_id, at=at), *gates_cleared(op_id, at=at), admitted(spec, op_id=op_id, at=at),
            dispatched(op_id, at=at), running(op_id, at=at, node="n1"), succeeded(op_id, at=at, node="n1")]


def live(op_id: str) -> list[Event]:
    spec = op(op_id).build()
    return [submitted(spec, op_id=op_id), *gates_cleared(op_id), admitted(spec, op_id=op_id), running(op_id)]


def cost(op_id: str, at, amount: float = 2.0) -> CostRecorded:
    return CostRecorded(op_id=op_id, at=at, amount=amount, seconds=60.0, queue="default", gpu_hours=1.0)


# ---- when an op leaves -------------------------------------------------------------------------

async def test_a_finished_op_stays_until_its_ttl_has_passed_then_leaves_memory_and_the_stream():
    w = World()
    await w.store(*finished("a"))
    assert await w.after(TTL - 1) == 0
    assert w.held() == {"a"} and w.stream_ops() == {"a"}

    assert await w.after(1) == 1
    assert w.held() == set()
    assert w.stream_ops() == set()
    assert w.state.fold.status_of("a") == Status.SUCCEEDED


async def test_a_live_op_never_leaves_however_old():
    w = World()
    await w.store(*live("busy"), *finished("done"))
    await w.after(30 * 24 * HOUR)
    assert w.held() == {"busy"}
    assert w.stream_ops() == {"busy"}
    assert w.state.ops["busy"].status == Status.RUNNING


@pytest.mark.parametrize("c", [
    case("its termination.ttl is shorter than the setting", ttl=60, leaves_after=60.0),
    case("its termination.ttl is longer than the setting", ttl=int(3 * TTL), leaves_after=3 * TTL),
    case("its termination.ttl of 0: as soon as it ended", ttl=0, leaves_after=0.0),
], ids=case_name)
async def test_the_ops_own_termination_ttl_is_its_ttl(c):
    w = World()
    spec = msgspec.structs.replace(op("own").build(), termination=Termination(ttl=c.ttl))
    await w.store(*finished("own", spec=spec))
    if c.leaves_after:
        await w.after(c.leaves_after - 1)
        assert w.held() == {"own"}
    await w.after(1 if c.leaves_after else 0)
    assert w.held() == set()


async def test_an_op_stays_while_a_service_has_not_consumed_its_events():
    w = World()
    await w.bus.durable(subjects.COST_LEDGER, subjects.OPS_STREAM, [subjects.OPS_ALL], max_deliver=5)
    await w.store(*finished("a"))
    await w.after(2 * TTL)
    assert w.held() == {"a"} and w.stream_ops() == {"a"}  # the ledger has not read them yet

    ledger = await w.bus.durable(subjects.COST_LEDGER, subjects.OPS_STREAM, [subjects.OPS_ALL], max_deliver=5)
    for msg in await ledger.fetch(100, timeout=1):
        await msg.ack()
    await w.after(1)
    assert w.held() == set() and w.stream_ops() == set()


async def test_a_resumed_op_is_live_again_and_its_ttl_starts_from_its_new_end():
    from opsched.proto.events import OperationFailed, OperationResumed

    w = World()
    spec = op("r").build()
    await w.store(submitted(spec, op_id="r"), *gates_cleared("r"), admitted(spec, op_id="r"), running("r"),
                  OperationFailed(op_id="r", at=T0, reason="Error"))
    await w.after(TTL - 10)
    await w.store(OperationResumed(op_id="r", at=w.clock.now(), attempt=1))
    await w.after(3 * TTL)
    assert w.held() == {"r"}
    assert w.state.ops["r"].history.ended_at is None


# ---- what stays of it --------------------------------------------------------------------------

async def test_its_summary_is_written_before_its_events_go():
    w = World()
    events = finished("a")
    events[-1] = msgspec.structs.replace(events[-1], outputs={"loss": 0.5})
    await w.store(*events, cost("a", T0, amount=2.5))
    await w.after(TTL)
    summary = w.summary("a")
    assert summary is not None
    assert (summary.status, summary.queue, summary.node, summary.gpus, summary.cost) == (
        "succeeded", "default", "n1", "1", 2.5)
    assert summary.ended_at == T0 and summary.outputs == {"loss": 0.5}  # `ops -o json` still shows its outputs


async def test_dependants_and_commands_still_see_the_status_of_an_op_that_left():
    w = World()
    await w.store(*finished("a"))
    await w.after(TTL)
    assert run_status(w.state.fold.status_of("a")) == "succeeded"  # schedules' dependsOnPast
    ctx = Context("admission", w.clock, w.settings, _Log())
    with pytest.raises(InvalidInput) as info:  # it ended: refused, saying how it ended
        handlers.on_stop(stop("a"), ctx, w.state)
    assert info.value.reason == "already_ended" and "already succeeded" in info.value.message
    assert handlers.on_submit(submit(op("a").build(), op_id="a"), ctx, w.state, _book()) is None  # a duplicate


async def test_tombstones_are_bounded_the_oldest_forgotten_first():
    w = World()
    w.state.fold.gone.bound = 2
    for name in ("a", "b", "c"):
        await w.store(*finished(name))
    await w.after(TTL)
    assert [w.state.fold.status_of(n) for n in ("a", "b", "c")] == [None, Status.SUCCEEDED, Status.SUCCEEDED]


def test_its_events_are_purged_at_once_or_kind_by_kind_when_it_announced_a_budget_limit():
    from opsched.services.admission.model.records import OpRecord

    record = OpRecord("a", "q", 0, T0, op("a").build())
    record.history.kinds = {"submitted", "running", "cost_recorded", "admitted", "succeeded"}
    assert purge_order(record) == ["ops.*.a"]
    record.history.kinds.add("budget_exceeded")  # kept for its window
    assert purge_order(record) == ["ops.admitted.a", "ops.cost_recorded.a", "ops.running.a", "ops.succeeded.a",
                                   "ops.submitted.a"]


# ---- spend outlives its op: rolled up per budget scope, kept while a window holds it ------------

def replayed(w: World) -> AdmissionState:
    fresh = AdmissionState()
    for m in w.bus.broker.stored(subjects.OPS_STREAM):
        fresh.apply(codec.decode_ops_stream(m.data), m.seq)
    return fresh


async def test_spend_is_rolled_up_before_its_op_leaves_so_a_replay_counts_the_same():
    w = World()
    await w.store(*finished("a"), cost("a", T0, amount=2.0))
    await w.store(*live("busy"), cost("busy", T0, amount=0.5))  # a live op's earlier attempt, charged
    await w.after(TTL)
    assert w.stream_kinds("a") == [] and "cost_recorded" in w.stream_kinds("busy")
    month = ("queue", "default", "month", w.clock.now())
    assert w.state.fold.spend.of(*month) == (2.5, 2.0)
    assert replayed(w).fold.spend.of(*month) == (2.5, 2.0)  # the rollup counts a, and busy's charge once

    await w.store(*finished("b", at=w.clock.now()), cost("b", w.clock.now(), amount=1.0))
    await w.after(TTL)
    rollups = w.bus.broker.stored(subjects.OPS_STREAM, subjects.events_of("spend_rolled"))
    assert len(rollups) == 1  # the last one per scope stays
    assert w.state.fold.spend.of(*month) == replayed(w).fold.spend.of(*month) == (3.5, 3.0)


async def test_spend_leaves_memory_and_the_stream_once_no_window_holds_it():
    w = World()
    await w.store(*finished("a"), cost("a", T0, amount=2.0))
    await w.after(TTL)
    await w.after(45 * 24 * HOUR)  # past the month (and the week, and the day) it was charged in
    assert w.state.fold.spend.money == {}
    assert w.stream_kinds("a") == []
    now = w.clock.now()
    assert [replayed(w).fold.spend.of("queue", "default", window, now) for window in ("day", "week", "month")] == [
        (0.0, 0.0)] * 3  # its scope's last rollup stays, of windows long over


# ---- strays: events about ops admission does not hold -----------------------------------------

async def test_a_submit_rejected_before_it_was_an_op_leaves_the_stream_after_the_ttl_with_a_summary():
    w = World()
    await w.store(OperationRejected(op_id="nope", at=T0, reason="unknown_queue", message="unknown queue 'x'",
                                    name="train", queue="x"))
    await w.after(TTL - 1)
    assert w.stream_ops() == {"nope"}
    await w.after(1)
    assert w.stream_ops() == set()
    summary = w.summary("nope")
    assert summary is not None and summary.status == "rejected"
    # what `why` and `ops` show of it after: its name, queue, reason and message, its history (issue 32)
    assert (summary.name, summary.queue, summary.reason, summary.message) == (
        "train", "x", "unknown_queue", "unknown queue 'x'")
    assert [(e.event, e.reason) for e in summary.history] == [("rejected", "unknown_queue")]


async def test_a_finished_op_s_summary_keeps_its_history():
    w = World()
    await w.store(*finished("a"))
    await w.after(TTL)
    summary = w.summary("a")
    assert summary is not None
    assert [e.event for e in summary.history] == ["submitted", "admitted", "running", "succeeded"]
    assert summary.history[2].node == "n1" and summary.history_dropped == 0


async def test_news_arriving_after_the_op_left_is_removed_too_and_does_not_replace_its_summary():
    w = World()
    await w.store(*finished("a"))
    await w.after(TTL)
    late = succeeded("a", at=w.clock.now() + timedelta(seconds=1), node="n9")
    await w.bus.publish(late, msg_id="late-duplicate")
    w.state.apply(late, w.bus.broker.stream(subjects.OPS_STREAM).last_seq)
    await w.after(TTL + 1)
    assert w.stream_ops() == set()
    summary = w.summary("a")
    assert summary is not None and summary.node == "n1"


# ---- only the deciding instance writes and purges ------------------------------------------------

async def test_an_instance_that_does_not_decide_forgets_but_neither_writes_nor_purges():
    w = World()
    w.retention.is_leader = lambda: False
    await w.store(*finished("a"))
    await w.after(TTL)
    assert w.held() == set()
    assert w.stream_ops() == {"a"} and w.summary("a") is None


def _book():
    from opsched.proto.queues import Queue, QueuesConfig
    from opsched.services.admission.model.queues import compile_book

    return compile_book(QueuesConfig(queues=[Queue(name="default", concurrency=5)], default_queue="default"))
