"""The ledger's handlers: remember each op's price at ``submitted``, each attempt's start at
``running``, and at an attempt's end record what it cost (``cost_recorded``)."""
from __future__ import annotations

from proto.events import (
    CostRecorded, Event, OperationEvicted, OperationFailed, OperationPreempted, OperationRunning, OperationStopped,
    OperationSubmitted, OperationSucceeded, OperationTimedOut, event_type,
)
from proto import subjects
from services.cost.estimator import Prices, gpu_count, hourly_price
from services.cost.ledger import LedgerStore, OpCost, Recorded, charge

ENDS = (OperationSucceeded, OperationFailed, OperationTimedOut, OperationStopped, OperationPreempted,
        OperationEvicted)


def consumed_subjects() -> list[str]:
    return [subjects.events_of(event_type(t)) for t in (OperationSubmitted, OperationRunning, *ENDS)]


class Recorder:
    def __init__(self, store: LedgerStore, prices: Prices, default_duration_s: float) -> None:
        self.store, self.prices, self.default_duration_s = store, prices, default_duration_s

    async def submitted(self, e: OperationSubmitted) -> None:
        fresh = OpCost(queue=e.queue, project=e.spec.project or "", currency=self.prices.currency,
                       hourly=hourly_price(e.spec, self.prices, self.default_duration_s), gpus=gpu_count(e.spec))
        await self.store.change_op(e.op_id, lambda current: current or fresh)

    async def running(self, e: OperationRunning) -> None:
        attempt = str(e.attempt)

        def start(op: OpCost | None) -> OpCost | None:
            if op is None or attempt in op.starts:
                return op
            return OpCost(**{**_fields(op), "starts": {**op.starts, attempt: e.at}})
        await self.store.change_op(e.op_id, start)

    async def ended(self, e: Event) -> CostRecorded | None:
        attempt = str(e.attempt)

        def record(op: OpCost | None) -> OpCost | None:
            if op is None or attempt in op.recorded or attempt not in op.starts:
                return op
            c = charge(op.starts[attempt], e.at, op.hourly, op.gpus)
            done = Recorded(amount=c.amount, seconds=c.seconds, gpu_hours=c.gpu_hours,
                            started_at=op.starts[attempt], ended_at=e.at)
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
                            gpu_hours=done.gpu_hours, started_at=done.started_at)


def _fields(op: OpCost) -> dict:
    return {f: getattr(op, f) for f in op.__struct_fields__}


def _applied(op: OpCost | None, attempt: str) -> OpCost | None:
    if op is None or attempt not in op.recorded or op.recorded[attempt].applied:
        return op
    done = op.recorded[attempt]
    return OpCost(**{**_fields(op), "recorded": {**op.recorded, attempt: Recorded(
        **{**_fields(done), "applied": True})}})
