"""Wire the cost service to the bus: every submitted op gets a cost estimate before admission; every
finished attempt gets its actual cost recorded (``ledger``); `opsched cost` is answered from the spend
folded from the op stream (``spend``) and the budgets of the queue configuration."""
from __future__ import annotations

import msgspec

from proto import codec, subjects
from proto.events import CostEstimated, Event, OperationRunning, OperationSubmitted
from proto.queries import CostRequest
from proto.queues import Budget
from services.cost.estimator import estimate, hourly_price, load_prices
from services.cost.ledger import LedgerStore
from services.cost.recorder import ENDS, Recorder, consumed_subjects
from services.cost.spend import SpendView
from services.runtime.bus import Bus
from services.runtime.service import Context, Service
from services.runtime.settings import Settings


class CostState:
    """The spend view and the budgets in force, followed live after a replay."""

    def __init__(self, service: Service, hourly_of) -> None:
        self.service, self.hourly_of = service, hourly_of
        self.view = SpendView()
        self.budgets: list[Budget] = []

    async def start(self, bus: Bus) -> None:
        await bus.replay(subjects.CONFIG_STREAM, subjects.CONFIG_ALL, self.on_config)
        await bus.replay(subjects.OPS_STREAM, subjects.OPS_ALL, self.fold)
        await bus.serve(subjects.QUERY_COST, self.answer, group="cost")

    async def on_config(self, data: bytes, seq: int) -> None:
        try:
            self.budgets = list(codec.decode_config(data).config.budgets)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return

    async def fold(self, data: bytes, seq: int) -> None:
        try:
            event = codec.decode_event(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        if isinstance(event, ENDS):
            return  # a running attempt stays counted until its cost_recorded arrives
        self.view.fold(event, self.hourly_of)

    async def answer(self, data: bytes) -> bytes:
        try:
            request = codec.decode_query(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            request = None
        now = self.service.clock.now()
        if not isinstance(request, CostRequest):
            self.service.log.warning("bad_cost_query")
        return codec.encode(self.view.answer(self.budgets, now))


def build(settings: Settings, clock=None) -> Service:
    service = Service("cost", settings, clock)
    prices = load_prices(settings.prices_file)
    holder: dict[str, Recorder] = {}
    state = CostState(service, lambda spec: hourly_price(spec, prices, settings.default_duration_s))
    state.view.currency = prices.currency
    service.cost = state  # type: ignore[attr-defined] - for in-process inspection

    async def open_ledger(bus: Bus) -> None:
        store = LedgerStore(await bus.ensure_cache_bucket(subjects.COST_BUCKET))
        holder["recorder"] = Recorder(store, prices, settings.default_duration_s)

    service.on_start += [open_ledger, state.start]
    sub = service.consume(subjects.COST_ESTIMATOR, subjects.OPS_STREAM, [subjects.events_of("submitted")])

    @service.on(sub, OperationSubmitted)
    async def on_submitted(event: OperationSubmitted, ctx: Context) -> CostEstimated:
        est = estimate(event.spec, prices, settings.default_duration_s)
        ctx.log.info("cost_estimated", amount=est.money.amount, basis=est.basis)
        return CostEstimated(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt,
                             estimate=est.money, basis=est.basis, duration_s=est.duration_s,
                             breakdown=est.breakdown)

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
        if recorded is not None:
            ctx.log.info("cost_recorded", amount=recorded.amount, seconds=recorded.seconds)
        return [recorded] if recorded is not None else []

    return service
