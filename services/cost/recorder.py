"""The ledger's handlers: remember each op's price at ``submitted`` (from the catalogue in force then:
its own price and its price in every node pool), each attempt's start and node pool at ``running``,
and at an attempt's end record what it cost (``cost_recorded``): run time x the price of the pool of
the node it ran on, else the op's own price."""
from __future__ import annotations

from collections.abc import Callable

from proto import subjects
from proto.events import (
    CostRecorded,
    Event,
    OperationRunning,
    OperationSubmitted,
    event_type,
)
from proto.lifecycle import ATTEMPT_ENDS
from proto.prices import Prices
from proto.spec import OpSpec
from services.cost.estimator import gpu_count, hourly_price, pool_hourly
from services.cost.ledger import LedgerStore, OpCost, PoolPrice, Recorded, charge
from services.cost.pools import matches, matching

ENDS = ATTEMPT_ENDS


def consumed_subjects() -> list[str]:
    types: tuple[type[Event], ...] = (OperationSubmitted, OperationRunning, *ENDS)
    return [subjects.events_of(event_type(t)) for t in types]


class Recorder:
    def __init__(self, store: LedgerStore, catalogue: Callable[[], Prices], default_duration_s: float,
                 runs_of: Callable[[OpSpec], list[float]] = lambda spec: [],
                 labels_of: Callable[[str], dict[str, str] | None] = lambda node: None) -> None:
        self.store, self.catalogue, self.default_duration_s = store, catalogue, default_duration_s
        self.runs_of, self.labels_of = runs_of, labels_of

    def price(self, e: OperationSubmitted) -> OpCost:
        """The op's ledger entry as the catalogue in force prices it now."""
        prices, spec = self.catalogue(), e.spec
        own = matching(prices, spec.environment.node_selector)
        pools = [] if spec.cost is not None else [
            PoolPrice(name=p.name, match=dict(p.match), hourly=pool_hourly(spec, prices, p)) for p in prices.pools]
        return OpCost(queue=e.queue, project=spec.project or "", currency=prices.currency,
                      hourly=hourly_price(spec, prices, self.default_duration_s, self.runs_of(spec)),
                      gpus=gpu_count(spec), pool=own.name if own and spec.cost is None else "", pools=pools)

    async def submitted(self, e: OperationSubmitted) -> None:
        fresh = self.price(e)
        await self.store.change_op(e.op_id, lambda current: current or fresh)

    async def running(self, e: OperationRunning) -> None:
        attempt = str(e.attempt)
        labels = self.labels_of(e.node) if e.node else None

        def start(op: OpCost | None) -> OpCost | None:
            if op is None or attempt in op.starts:
                return op
            changes: dict = {"starts": {**op.starts, attempt: e.at}}
            pool = next((p for p in op.pools if labels is not None and matches(p.match, labels)), None)
            if pool is not None:
                changes["ran_in"] = {**op.ran_in, attempt: pool.name}
            return OpCost(**{**_fields(op), **changes})
        await self.store.change_op(e.op_id, start)

    async def ended(self, e: Event) -> CostRecorded | None:
        attempt = str(e.attempt)

        def record(op: OpCost | None) -> OpCost | None:
            if op is None or attempt in op.recorded or attempt not in op.starts:
                return op
            hourly, pool = op.hourly_of(attempt)
            c = charge(op.starts[attempt], e.at, hourly, op.gpus)
            done = Recorded(amount=c.amount, seconds=c.seconds, gpu_hours=c.gpu_hours,
                            started_at=op.starts[attempt], ended_at=e.at, pool=pool)
            return OpCost(**{**_fields(op), "recorded": {**op.recorded, attempt: done}})
        op = await self.store.change_op(e.op_id, record)
        if op is None or attempt not in op.recorded:
            return None  # unknown op, or an attempt that never ran: it cost nothing
        done = op.recorded[attempt]
        if not done.applied:
            await self.store.add("queue", op.queue, done)
            await self.store.add("project", op.project, done)
            await self.store.change_op(e.op_id, lambda o: _applied(o, attempt))
        return CostRecorded(op_id=e.op_id, at=done.ended_at, attempt=e.attempt, amount=done.amount,
                            currency=op.currency, seconds=done.seconds, queue=op.queue, project=op.project,
                            gpu_hours=done.gpu_hours, started_at=done.started_at, pool=done.pool)


def _fields(op: OpCost | Recorded) -> dict:
    return {f: getattr(op, f) for f in op.__struct_fields__}


def _applied(op: OpCost | None, attempt: str) -> OpCost | None:
    if op is None or attempt not in op.recorded or op.recorded[attempt].applied:
        return op
    done = op.recorded[attempt]
    return OpCost(**{**_fields(op), "recorded": {**op.recorded, attempt: Recorded(
        **{**_fields(done), "applied": True})}})
