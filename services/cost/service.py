"""The cost service.

Consumes ``ops.submitted`` (durable ``cost-estimator``) and answers each with ``cost_estimated``,
from the price catalogue in force (``prices``, ``estimator``): the op's estimate and its price at submit.
Consumes ``running`` and every attempt end (durable ``cost-ledger``): once its follow of the op stream
has folded the message (``state.progress``), what the attempt cost as the ledger folded it (``ledger``:
price, start and end all from the stream, no key-value work), ``cost_recorded``, and when that brings a
budget window to its limit, ``budget_exceeded``. Consumes the node removals of the cluster stream (durable
``cost-nodes``): what each node cost from its creation to its removal, split by what ran on it,
``node_cost_recorded`` (``node_meter``, ``occupancy``). ``opsched cost`` is answered from the spend
folded from the op stream (``state``), rebuilt by replay on start."""
from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from opsched.bus.bus import Bus
from opsched.proto import codec, subjects
from opsched.proto.cluster import NodeRemoved
from opsched.proto.events import (
    BudgetExceeded,
    CostEstimated,
    Event,
    OperationRunning,
    OperationSubmitted,
    event_type,
)
from opsched.proto.lifecycle import ATTEMPT_ENDS
from opsched.services.cost import metrics
from opsched.services.cost.state import CostState
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.op_events import last_of
from opsched.services.runtime.service import Consumer, Context, RetryLater, Service, Task
from opsched.services.runtime.settings import Settings

RECORDED: tuple[type[Event], ...] = (OperationRunning, *ATTEMPT_ENDS)  # what the ledger's consumer takes: all in its follow's subjects
FOLD_WAIT_S = 5.0  # how long a ledger handler waits for the follow to fold its message
FOLD_RETRY_S = 1.0  # then the message is given back, to be handled again after this


class Cost(Service):
    name = "cost"
    estimates = Consumer(subjects.COST_ESTIMATOR, subjects.OPS_STREAM, [subjects.events_of("submitted")])
    # its handler gives a message back while the follow has not folded it (``RetryLater``): a lag, not a failure, so
    # no count of deliveries bounds it (a handler error is still given up after ``OPSCHED_MAX_DELIVER``)
    ledger = Consumer(subjects.COST_LEDGER, subjects.OPS_STREAM,
                      [subjects.events_of(event_type(kind)) for kind in RECORDED], max_deliver=-1)
    nodes = Consumer(subjects.COST_NODES, subjects.CLUSTER_STREAM, [subjects.CLUSTER_NODES],
                     decoder=codec.decode_cluster)

    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        super().__init__(settings, clock)
        self.state = CostState(self, settings)

    async def start(self, bus: Bus) -> None:
        await self.state.start(bus)

    def tasks(self) -> list[Task]:
        return [self.state.catalogue.watch_file, self.node_budget_tick]

    async def node_budget_tick(self, bus: Bus, stop: asyncio.Event) -> None:
        """Every ``node_budget_tick_s`` (the injected clock): a pool budget that its nodes' spend, the open nodes'
        so far included, has reached is announced (``budget_exceeded``, once per window: its Nats-Msg-Id), so
        that admission starts no new node of the pool until the window resets."""
        while not stop.is_set():
            if await _stopped_before(stop, self.clock.sleep(self.settings.node_budget_tick_s)):
                return
            try:
                await self.announce_pool_budgets(bus)
            except Exception as exc:  # noqa: BLE001 - the bus is away: the next tick announces it (idempotent)
                self.log.warning("pool_budget_tick_failed", error=repr(exc))

    async def announce_pool_budgets(self, bus: Bus) -> list[BudgetExceeded]:
        """One tick: publish the pool budget limits reached now."""
        out = self.state.pool_budgets_exceeded(self.clock.now())
        for e in out:
            self.log.warning("budget_exceeded", scope=e.scope, name=e.name, window=e.window, limit=e.limit,
                             spent=e.spent, unit=e.unit)
            await bus.publish(e)
            self.state.announced.fold(e)  # the fold takes it again from the stream: a set
        return out

    def metric_families(self) -> list:
        """Spend, budgets left and the burn rate, as ``opsched cost`` shows them (``services.cost.metrics``)."""
        return metrics.families(self.state.cost_answer(self.clock.now()))

    @estimates.handles(OperationSubmitted)
    async def estimate(self, event: OperationSubmitted, ctx: Context) -> CostEstimated:
        estimated = self.state.estimated(event, ctx.clock.now())
        ctx.log.info("cost_estimated", amount=estimated.estimate.amount, basis=estimated.basis,
                     pool=estimated.pool or None)
        return estimated

    @ledger.handles(*RECORDED)
    async def record(self, event: Event, ctx: Context) -> list[Event]:
        """The attempt's ``cost_recorded`` once the follow has folded this message (the ledger is that fold) and
        the attempt's start and end are both folded: the later of the two records it. Not folded in time: the
        message is handled again later (``RetryLater``)."""
        if not await self.state.progress.reach(ctx.stream_seq, FOLD_WAIT_S):
            ctx.log.warning("ledger_not_folded_yet", stream_seq=ctx.stream_seq, folded=self.state.progress.seq)
            raise RetryLater(FOLD_RETRY_S)
        if self.state.ledger.unpriced(event.op_id):  # resumed after the ledger forgot it: its price from the stream
            assert self.bus is not None
            self.state.ledger.priced_again(event.op_id, await last_of(self.bus, OperationSubmitted, event.op_id),
                                           await last_of(self.bus, CostEstimated, event.op_id))
        recorded = self.state.recorded(event.op_id, event.attempt)
        if recorded is None:
            return []
        ctx.log.info("cost_recorded", amount=recorded.amount, seconds=recorded.seconds, pool=recorded.pool or None)
        exceeded = self.state.exceeded(recorded)
        for e in exceeded:
            ctx.log.warning("budget_exceeded", scope=e.scope, name=e.name, window=e.window, limit=e.limit,
                            spent=e.spent, unit=e.unit)
        return [recorded, *exceeded]

    @nodes.handles(NodeRemoved)
    async def on_node_removed(self, event: NodeRemoved, ctx: Context) -> list[Event]:
        """A node is gone: what it cost from its creation (``node_cost_recorded``, once per node: its op id is the
        node's token, so a redelivery or a replica publishes the same message)."""
        charge = self.state.charge_node(event)
        if charge is None:
            ctx.log.info("node_not_charged", node=event.node, agent=event.agent or None,
                         why="charged already" if event.created else "creation unknown")
            return []
        ctx.log.info("node_cost_recorded", node=charge.node, pool=charge.pool or None, amount=charge.amount,
                     idle=charge.idle, seconds=charge.seconds)
        return [charge, *self.state.exceeded(charge)]


async def _stopped_before(stop: asyncio.Event, sleep: Coroutine[Any, Any, None]) -> bool:
    """Wait for ``sleep`` (the injected clock's) or ``stop``, whichever comes first: True when it was ``stop``."""
    sleeping, stopping = asyncio.ensure_future(sleep), asyncio.ensure_future(stop.wait())
    await asyncio.wait((sleeping, stopping), return_when=asyncio.FIRST_COMPLETED)
    for task in (sleeping, stopping):
        task.cancel()
    return stop.is_set()


def build(settings: Settings, clock: Clock | None = None) -> Cost:
    return Cost(settings, clock)
