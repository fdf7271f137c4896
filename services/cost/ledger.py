"""The actual-cost ledger, a fold of the op stream: each attempt's real run time (``running`` -> its end) x the
op's hourly price where it ran (each pod at the price of its node's pool and product: ``OpCost.charge_of``).

The fold keeps, per op, its queue and project (``submitted``), its price at submit (``cost_estimated``: the
estimator's points per pool and product, each with its price per pod shape, and the op's pod shapes), each
attempt's start (``running``: when, on which nodes) and end (any attempt end), and which attempts' ``cost_recorded``
it has folded; it forgets the op once it has ended (``proto.lifecycle.OP_ENDS``) and every attempt that ran and
ended is recorded (an attempt whose end came without a start: the op is parked, a bounded number of them, for a
``running`` stored after its end), so its memory is bounded by the live ops. No key-value work: ``cost_recorded``
is computed from what was folded alone, so any replica, and any redelivery, computes the same message (its
Nats-Msg-Id is per op, type and attempt: a second copy is deduplicated). An op whose ``cost_estimated`` predates the price on it (no
``pod_shapes``) or is missing is priced from its ``submitted`` by the catalogue in force when its attempt is
recorded (``price_now``). An op resumed (``resumed``) after the ledger forgot it is priced again from its
``submitted`` and ``cost_estimated`` as the stream stores them (``unpriced``, ``priced_again``: the handler reads
them).

The catalogue prices what runs: an op's own ``cost`` (which may raise its estimate) is never what it is charged,
so cost quotas and budgets cannot be bypassed by a spec; every charge is non-negative."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from opsched.proto.events import (
    CostEstimated,
    CostRecorded,
    Event,
    OperationResumed,
    OperationRunning,
    OperationSubmitted,
    PodCharge,
    PricePoint,
)
from opsched.proto.lifecycle import ATTEMPT_ENDS, OP_ENDS
from opsched.rules.pricing import point_for
from opsched.services.cost.amounts import bounded

Labels = Callable[[str], dict[str, str] | None]  # a node's labels (None: not known)
PriceNow = Callable[[OperationSubmitted], CostEstimated]  # an op's price by the catalogue in force


@dataclass(frozen=True)
class Charge:
    seconds: float
    amount: float
    gpu_hours: float


def charge(started: datetime, ended: datetime, hourly: float, gpus: int) -> Charge:
    """Run time x hourly price (never negative: a clock skew between events costs nothing, and a
    negative or non-finite price or amount is clamped, never credited)."""
    seconds = max(0.0, (ended - started).total_seconds())
    hours = seconds / 3600.0
    amount = bounded(round(bounded(hourly, "hourly price") * hours, 6), "charge")
    return Charge(seconds, amount, round(max(0, gpus) * hours, 6))


@dataclass(frozen=True)
class OpCost:
    """An op's price at submit, as its ``cost_estimated`` carries it."""

    queue: str = ""
    project: str = ""
    hourly: float = 0.0  # all its pods at its own nodeSelector's point: charged when it has no points
    gpus: int = 0
    currency: str = "USD"
    pool: str = ""  # the pool its nodeSelector chose at submit
    points: list[PricePoint] = field(default_factory=list)  # the op in every pool and the defaults, every product
    labels: dict[str, str] = field(default_factory=dict)  # its own nodeSelector
    pod_shapes: list[int] = field(default_factory=list)  # each pod's shape, pods in name order

    @classmethod
    def of(cls, submitted: OperationSubmitted, est: CostEstimated) -> OpCost:
        return cls(queue=submitted.queue, project=submitted.spec.project or "", hourly=est.hourly, gpus=est.gpus,
                   currency=est.estimate.currency, pool=est.pool, points=list(est.points), labels=dict(est.labels),
                   pod_shapes=list(est.pod_shapes))

    def charge_of(self, nodes: list[str], labels_of: Labels) -> tuple[float, str, list[PodCharge]]:
        """The hourly price of an attempt whose pods ran on ``nodes`` (name order, "" for one not known: the main
        pod's), the pool of its main pod and what each pool charged its pods: each pod at the point of its node's
        labels (over the op's own nodeSelector; a node of unknown labels: the op's own)."""
        if not self.points:
            return bounded(self.hourly, "hourly price"), self.pool, []
        main = nodes[0] if nodes else ""
        where: dict[str, PricePoint | None] = {}
        charges: dict[tuple[str, str], list[float]] = {}  # (pool, product) -> [pods, hourly]
        main_pool = self.pool
        for i, shape in enumerate(self.pod_shapes or [0]):
            node = (nodes[i] if i < len(nodes) else "") or main
            if node not in where:
                labels = labels_of(node) if node else None
                where[node] = point_for(self.points, self.labels if labels is None else {**self.labels, **labels})
            point = where[node]
            if point is None:  # never: the defaults' "*" point is always there
                continue
            price = point.shapes[shape] if shape < len(point.shapes) else point.hourly
            charge = charges.setdefault((point.pool, point.product), [0, 0.0])
            charge[0], charge[1] = charge[0] + 1, charge[1] + price
            if i == 0:
                main_pool = point.pool
        pods = [PodCharge(pool=pool, product=product, pods=int(n), hourly=round(bounded(h, "hourly price"), 6))
                for (pool, product), (n, h) in charges.items()]
        return bounded(sum(h for _, h in charges.values()), "hourly price"), main_pool, pods


@dataclass
class Run:
    """One attempt as the stream says it ran: the first ``running`` and the first end folded win."""

    started: datetime | None = None
    nodes: list[str] = field(default_factory=list)  # each pod's node, name order ([]: not said)
    ended: datetime | None = None


@dataclass
class OpEntry:
    # kept until its price is folded (then only the price is); None and no price: an op resumed after the ledger
    # forgot it (``Ledger.unpriced``: its handler reads them again from the stream)
    submitted: OperationSubmitted | None
    price: OpCost | None = None  # from its cost_estimated (None: none folded, or one from before the price on it)
    runs: dict[int, Run] = field(default_factory=dict)  # attempt -> its run, until its cost_recorded is folded
    recorded: set[int] = field(default_factory=set)  # attempts whose cost_recorded is folded
    ended: bool = False

    def due(self) -> bool:
        """An attempt whose start and end are folded waits for its record."""
        return any(r.started is not None and r.ended is not None for r in self.runs.values())

    def ends_alone(self) -> bool:
        """An attempt whose end is folded without its start (a running stored after its end may still come)."""
        return any(r.started is None and r.ended is not None for r in self.runs.values())

    def fold(self, event: Event) -> None:
        if isinstance(event, CostEstimated):
            if self.submitted is not None and event.pod_shapes:  # the first (one from before the price on it: none)
                self.price, self.submitted = OpCost.of(self.submitted, event), None
        elif isinstance(event, CostRecorded):
            self.recorded.add(event.attempt)
            self.runs.pop(event.attempt, None)
        elif event.attempt not in self.recorded:
            self._ran(event)
        if isinstance(event, OP_ENDS):
            self.ended = True
        if isinstance(event, OperationResumed):  # it continues in place: its next attempt is charged the same
            self.ended = False

    def _ran(self, event: Event) -> None:
        """A start or an end of an attempt not recorded yet: the first of each folded is kept."""
        if isinstance(event, OperationRunning):
            run = self.runs.setdefault(event.attempt, Run())
            if run.started is None:
                run.started, run.nodes = event.at, list(event.nodes) or ([event.node] if event.node else [])
        if isinstance(event, ATTEMPT_ENDS):
            run = self.runs.setdefault(event.attempt, Run())
            run.ended = run.ended or event.at


class Ledger:
    """The fold (``fold``) and what it says an attempt cost (``recorded``).

    An op is kept while it has not ended (``ops``) or has an attempt that ran and ended without its record folded
    yet. An ended op whose only attempts left ended without a start folded (stopped or preempted before it ran, a
    cache hit; or a ``running`` stored after its end, which still comes) is parked: the last ``PARKED`` of those
    are kept, so a late ``running`` is still charged while memory stays bounded by the live ops."""

    PARKED = 1024

    def __init__(self) -> None:
        self.ops: dict[str, OpEntry] = {}
        self.parked: OrderedDict[str, OpEntry] = OrderedDict()  # ended, only ends without a start left

    def fold(self, event: Event) -> None:
        if isinstance(event, OperationSubmitted):
            if event.op_id not in self.parked:
                self.ops.setdefault(event.op_id, OpEntry(event))
            return
        op_id = event.op_id
        entry = self.ops.get(op_id) or self.parked.get(op_id)
        if entry is None and isinstance(event, OperationResumed):  # an ended op it forgot runs again
            entry = self.ops[op_id] = OpEntry(None)
        if entry is None:  # an op whose submitted this fold did not see (or forgotten): nothing to charge
            return
        entry.fold(event)
        if not entry.ended or entry.due():
            if op_id in self.parked:  # its late running came: kept until its record is folded
                self.ops[op_id] = self.parked.pop(op_id)
            return
        self.ops.pop(op_id, None)
        self.parked.pop(op_id, None)
        if entry.ends_alone():
            self.parked[op_id] = entry
            while len(self.parked) > self.PARKED:
                self.parked.popitem(last=False)

    def entry(self, op_id: str) -> OpEntry | None:
        return self.ops.get(op_id) or self.parked.get(op_id)

    def unpriced(self, op_id: str) -> bool:
        """The op was resumed after the ledger forgot it: neither its price nor its submitted is folded."""
        entry = self.entry(op_id)
        return entry is not None and entry.price is None and entry.submitted is None

    def priced_again(self, op_id: str, submitted: OperationSubmitted | None, est: CostEstimated | None) -> None:
        """An unpriced op's ``submitted`` and ``cost_estimated``, as the stream still stores them."""
        entry = self.entry(op_id)
        if entry is None or submitted is None or not (entry.price is None and entry.submitted is None):
            return
        entry.submitted = submitted
        if est is not None:
            entry.fold(est)

    def recorded(self, op_id: str, attempt: int, labels_of: Labels, price_now: PriceNow) -> CostRecorded | None:
        """The attempt's ``cost_recorded`` once its start, end and price are folded (None: not yet, never ran, or
        its op not known)."""
        entry = self.entry(op_id)
        run = entry.runs.get(attempt) if entry is not None else None
        if entry is None or run is None or run.started is None or run.ended is None:
            return None
        op, submitted = entry.price, entry.submitted
        if op is None and submitted is not None:  # no price on the stream: the catalogue in force prices it now
            op = OpCost.of(submitted, price_now(submitted))
        if op is None:  # resumed after it was forgotten, and its submitted no longer stored (``priced_again``)
            return None
        hourly, pool, pods = op.charge_of(run.nodes, labels_of)
        c = charge(run.started, run.ended, hourly, op.gpus)
        return CostRecorded(op_id=op_id, at=run.ended, attempt=attempt, amount=c.amount, currency=op.currency,
                            seconds=c.seconds, queue=op.queue, project=op.project, gpu_hours=c.gpu_hours,
                            started_at=run.started, pool=pool, pods=pods)
