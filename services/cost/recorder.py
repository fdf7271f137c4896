"""The ledger's handlers: remember each op's price at ``submitted`` (from the catalogue in force then:
its own price and its price in every node pool for every GPU product, per pod shape), each attempt's start
and the node of each of its pods at ``running``, and at an attempt's end record what it cost
(``cost_recorded``): run time x the sum over its pods of the catalogue's price of the pool (and product)
of the node each ran on (``rules.pricing.point_for`` of the node's labels), else of the op's own
nodeSelector (a node whose labels are unknown); ``pods`` says which pools charged how many pods. The
catalogue prices what runs: an op's own ``cost`` (which may raise its estimate) is never what it is
charged, so cost quotas and budgets cannot be bypassed by a spec; every charge is non-negative.

Replicas of the cost service share the ledger's consumer, so the events of one op may be handled in any
order, at once: an attempt is recorded by whichever handler finds its price, start and end all known
(an end handled before its start is kept in ``ends``; a start or end before the op's submitted makes an
unpriced entry that the submitted prices)."""
from __future__ import annotations

from collections.abc import Callable

from opsched.proto import subjects
from opsched.proto.events import (
    CostRecorded,
    Event,
    OperationRunning,
    OperationSubmitted,
    event_type,
)
from opsched.proto.lifecycle import ATTEMPT_ENDS
from opsched.proto.pod_resources import shapes
from opsched.proto.prices import Prices
from opsched.rules.pricing import (
    DEFAULTS,
    accelerators_of,
    matches,
    matching,
    places,
    pod_shapes,
    products,
    shape_hourly,
)
from opsched.services.cost.amounts import bounded
from opsched.services.cost.estimator import gpu_count, hourly_price
from opsched.services.cost.ledger import LedgerStore, OpCost, PointPrice, Recorded, charge

ENDS = ATTEMPT_ENDS


def consumed_subjects() -> list[str]:
    types: tuple[type[Event], ...] = (OperationSubmitted, OperationRunning, *ENDS)
    return [subjects.events_of(event_type(t)) for t in types]


class Recorder:
    def __init__(self, store: LedgerStore, catalogue: Callable[[], Prices],
                 labels_of: Callable[[str], dict[str, str] | None] = lambda node: None) -> None:
        self.store, self.catalogue, self.labels_of = store, catalogue, labels_of

    def price(self, e: OperationSubmitted) -> OpCost:
        """The op's ledger entry as the catalogue in force prices it now (its own ``cost`` plays no part): its own
        price, and its price in every pool and the defaults for every product (``rules.pricing``), per pod shape."""
        prices, spec = self.catalogue(), e.spec
        own = matching(prices, spec.environment.node_selector)
        wanted = accelerators_of(spec)
        counts = [s.pods for s in shapes(spec)]
        points = []
        for pool, flat in places(prices):
            for product in products(flat, wanted):
                per_shape = [bounded(sum(pod.values()), "hourly price") for pod in shape_hourly(spec, flat, product)]
                points.append(PointPrice(pool=pool.name if pool else DEFAULTS, match=dict(pool.match) if pool else {},
                                         product=product, shapes=per_shape,
                                         hourly=bounded(sum(h * n for h, n in zip(per_shape, counts)), "hourly price")))
        return OpCost(queue=e.queue, project=spec.project or "", currency=prices.currency,
                      hourly=hourly_price(spec, prices), gpus=gpu_count(spec), pool=own.name if own else "",
                      points=points, labels=dict(spec.environment.node_selector),
                      pod_shapes=pod_shapes(e.op_id, spec))

    async def submitted(self, e: OperationSubmitted) -> list[CostRecorded]:
        """Price the op; normally nothing else (an attempt seen to start and end before: its cost)."""
        fresh = self.price(e)
        op = await self.store.change_op(e.op_id, lambda current: _settle(_priced(current, fresh), self.labels_of),
                                        likely_new=True)
        reports = [await self._report(e.op_id, op, attempt) for attempt in sorted(op.recorded)] if op else []
        return [r for r in reports if r is not None]

    async def running(self, e: OperationRunning) -> CostRecorded | None:
        """Note the attempt's start (and its pool); its cost if its end was handled first."""
        attempt = str(e.attempt)
        labels = self.labels_of(e.node) if e.node else None

        def start(op: OpCost | None) -> OpCost | None:
            op = op or OpCost(priced=False)
            if attempt in op.starts:
                return op
            changes: dict = {"starts": {**op.starts, attempt: e.at}}
            nodes = list(e.nodes) or ([e.node] if e.node else [])
            if nodes:
                changes["ran_on"] = {**op.ran_on, attempt: nodes}
            pool = next((p for p in op.pools if labels is not None and matches(p.match, labels)), None)
            if pool is not None:  # an entry priced before price points (``OpCost.hourly_of``)
                changes["ran_in"] = {**op.ran_in, attempt: pool.name}
            return _settle(OpCost(**{**_fields(op), **changes}), self.labels_of)
        op = await self.store.change_op(e.op_id, start)
        return await self._report(e.op_id, op, attempt)

    async def ended(self, e: Event) -> CostRecorded | None:
        """Record what the attempt cost (its end noted if its start was not handled yet)."""
        attempt = str(e.attempt)

        def end(op: OpCost | None) -> OpCost | None:
            op = op or OpCost(priced=False)
            if attempt in op.recorded or attempt in op.ends:
                return op
            return _settle(OpCost(**{**_fields(op), "ends": {**op.ends, attempt: e.at}}), self.labels_of)
        op = await self.store.change_op(e.op_id, end)
        return await self._report(e.op_id, op, attempt)

    async def _report(self, op_id: str, op: OpCost | None, attempt: str) -> CostRecorded | None:
        """The attempt's ``cost_recorded`` once it is recorded."""
        if op is None or attempt not in op.recorded:
            return None  # an attempt that never ran (or not known to have ended yet): nothing to say
        done = op.recorded[attempt]
        return CostRecorded(op_id=op_id, at=done.ended_at, attempt=int(attempt), amount=done.amount,
                            currency=op.currency, seconds=done.seconds, queue=op.queue, project=op.project,
                            gpu_hours=done.gpu_hours, started_at=done.started_at, pool=done.pool, pods=done.pods)


def _priced(current: OpCost | None, fresh: OpCost) -> OpCost:
    """The op's price from its submit, keeping the starts and ends handled before it."""
    if current is None:
        return fresh
    if current.priced:
        return current
    return OpCost(**{**_fields(fresh), "starts": current.starts, "ran_in": current.ran_in, "ends": current.ends,
                     "ran_on": current.ran_on})


def _settle(op: OpCost, labels_of: Callable[[str], dict[str, str] | None]) -> OpCost:
    """Every attempt of a priced op whose start and end are known, recorded (what it cost: each pod at the price
    of its node's pool, ``OpCost.charge_of``)."""
    if not op.priced:
        return op
    due = [a for a in op.ends if a in op.starts and a not in op.recorded]
    if not due:
        return op
    recorded = dict(op.recorded)
    for attempt in due:
        hourly, pool, pods = op.charge_of(attempt, labels_of)
        c = charge(op.starts[attempt], op.ends[attempt], hourly, op.gpus)
        recorded[attempt] = Recorded(amount=c.amount, seconds=c.seconds, gpu_hours=c.gpu_hours,
                                     started_at=op.starts[attempt], ended_at=op.ends[attempt], pool=pool, pods=pods)
    ends = {a: at for a, at in op.ends.items() if a not in recorded}
    ran_on = {a: nodes for a, nodes in op.ran_on.items() if a not in recorded}
    return OpCost(**{**_fields(op), "recorded": recorded, "ends": ends, "ran_on": ran_on})


def _fields(op: OpCost | Recorded) -> dict:
    return {f: getattr(op, f) for f in op.__struct_fields__}

