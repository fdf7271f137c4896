"""Wire the estimator to the bus: every submitted op gets a cost estimate before admission."""
from __future__ import annotations

from proto import subjects
from proto.events import CostEstimated, OperationSubmitted
from services.runtime.service import Context, Service
from services.runtime.settings import Settings
from services.cost.estimator import estimate, load_prices


def build(settings: Settings, clock=None) -> Service:
    service = Service("cost", settings, clock)
    prices = load_prices(settings.prices_file)
    sub = service.consume(subjects.COST_ESTIMATOR, subjects.OPS_STREAM, [subjects.events_of("submitted")])

    @service.on(sub, OperationSubmitted)
    async def on_submitted(event: OperationSubmitted, ctx: Context) -> CostEstimated:
        est = estimate(event.spec, prices, settings.default_duration_s)
        ctx.log.info("cost_estimated", amount=est.money.amount, basis=est.basis)
        return CostEstimated(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt,
                             estimate=est.money, basis=est.basis, duration_s=est.duration_s,
                             breakdown=est.breakdown)

    return service
