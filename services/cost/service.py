"""Wire the cost service to the bus: every submitted op gets a cost estimate before admission (from
the price catalogue in force, ``prices``); every finished attempt gets its actual cost recorded
(``ledger``) and, when that brings a budget window to its limit, a ``budget_exceeded``; `opsched cost`
is answered from the spend folded from the op stream (``state``)."""
from __future__ import annotations

from proto import subjects
from proto.events import CostEstimated, Event, OperationRunning, OperationSubmitted
from services.cost.ledger import LedgerStore
from services.cost.recorder import ENDS, Recorder, consumed_subjects
from services.cost.state import CostState
from services.runtime.bus import Bus
from services.runtime.service import Context, Service
from services.runtime.settings import Settings


def build(settings: Settings, clock=None) -> Service:
    service = Service("cost", settings, clock)
    state = CostState(service, settings)
    holder: dict[str, Recorder] = {}
    service.cost = state  # type: ignore[attr-defined]  # for in-process inspection

    async def open_ledger(bus: Bus) -> None:
        store = LedgerStore(await bus.ensure_cache_bucket(subjects.COST_BUCKET))
        holder["recorder"] = Recorder(store, lambda: state.catalogue.prices, settings.default_duration_s,
                                      runs_of=state.runs_of, labels_of=state.labels_of)

    service.on_start += [open_ledger, state.start]
    service.extra_tasks.append(state.catalogue.watch_file)
    sub = service.consume(subjects.COST_ESTIMATOR, subjects.OPS_STREAM, [subjects.events_of("submitted")])

    @service.on(sub, OperationSubmitted)
    async def on_submitted(event: OperationSubmitted, ctx: Context) -> CostEstimated:
        est = state.estimate(event.spec)
        ctx.log.info("cost_estimated", amount=est.money.amount, basis=est.basis, pool=est.pool or None)
        return CostEstimated(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt,
                             estimate=est.money, basis=est.basis, duration_s=est.duration_s,
                             breakdown=est.breakdown, prices_source=state.catalogue.source, pool=est.pool,
                             runs=est.runs)

    ledger = service.consume(subjects.COST_LEDGER, subjects.OPS_STREAM, consumed_subjects())

    @service.on(ledger, OperationSubmitted)
    async def remember_price(event: OperationSubmitted, ctx: Context) -> None:
        await holder["recorder"].submitted(event)

    @service.on(ledger, OperationRunning)
    async def on_running(event: OperationRunning, ctx: Context) -> None:
        await holder["recorder"].running(event)

    @service.on(ledger, *ENDS)
    async def on_ended(event: Event, ctx: Context) -> list:
        recorded = await holder["recorder"].ended(event)
        if recorded is None:
            return []
        ctx.log.info("cost_recorded", amount=recorded.amount, seconds=recorded.seconds, pool=recorded.pool or None)
        exceeded = state.exceeded(recorded)
        for e in exceeded:
            ctx.log.warning("budget_exceeded", scope=e.scope, name=e.name, window=e.window, limit=e.limit,
                            spent=e.spent, unit=e.unit)
        return [recorded, *exceeded]

    return service
