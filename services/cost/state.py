"""What the cost service knows, rebuilt by replay on start and followed live: the price catalogue and the
budgets in force (config stream), the labels of every node (cluster stream), and from the op stream the
ledger (what each attempt cost: ``ledger``), the spend view (`opsched cost`), the run times of past ops
(expected durations) and the budget limits already announced; and how far it has folded the op stream
(``progress``: the ledger's handlers wait for their message to be folded)."""
from __future__ import annotations

from datetime import datetime

import msgspec

from opsched.bus.bus import Bus
from opsched.proto import codec, subjects
from opsched.proto.cluster import NodeObserved, NodeRemoved
from opsched.proto.config import PricesConfigured, QueuesConfigured
from opsched.proto.events import (
    BudgetExceeded,
    CostEstimated,
    CostRecorded,
    Event,
    NodeCostRecorded,
    OperationResumed,
    OperationRunning,
    OperationSubmitted,
    SpendRolled,
    event_type,
)
from opsched.proto.lifecycle import ATTEMPT_ENDS, OP_ENDS
from opsched.proto.queries import CostAnswer, CostRequest
from opsched.proto.queues import Budget, QueuesConfig
from opsched.proto.spec import OpSpec
from opsched.rules.node_pools import pool_of
from opsched.rules.windows import window_start
from opsched.services.cost.budgets import Announcements
from opsched.services.cost.durations import Durations
from opsched.services.cost.estimator import estimated, hourly_price
from opsched.services.cost.ledger import Ledger
from opsched.services.cost.node_meter import NodeMeter
from opsched.services.cost.occupancy import Occupancy
from opsched.services.cost.prices import PricesSource
from opsched.services.cost.spend import SpendView
from opsched.services.runtime.fold_progress import FoldProgress
from opsched.services.runtime.service import Service
from opsched.services.runtime.settings import Settings

# the op events its fold reads (the ledger, the spend view, durations, budgets announced): its follow of the op
# stream takes only these (cache answers, admitted, dispatched... never reach it); the ledger's consumer takes
# ``running`` and the attempt ends, all among them
FOLDED: tuple[type[Event], ...] = tuple(dict.fromkeys(
    (OperationSubmitted, CostEstimated, OperationRunning, *ATTEMPT_ENDS, *OP_ENDS, OperationResumed, CostRecorded,
     BudgetExceeded, SpendRolled, NodeCostRecorded)))
FOLDED_SUBJECTS = [subjects.events_of(event_type(kind)) for kind in FOLDED]


class CostState:
    def __init__(self, service: Service, settings: Settings) -> None:
        self.service = service
        self.default_duration_s = settings.default_duration_s
        self.catalogue = PricesSource(settings.prices_file, service.clock, service.log)
        self.view = SpendView(currency=self.catalogue.prices.currency)
        self.budgets: list[Budget] = []
        self.queues: QueuesConfig | None = None  # the queue configuration in force: its node pools
        self.occupancy = Occupancy()  # what ran on each node, and when
        self.meter = NodeMeter(self.occupancy)  # what each node costs
        self.durations = Durations()
        self.nodes: dict[str, dict[str, str]] = {}  # node -> its labels (kept after it is removed)
        self.announced = Announcements()
        self.ledger = Ledger()  # what each attempt cost, from the op stream alone
        self.progress = FoldProgress()  # the last op-stream sequence folded
        self.fold_failures = 0  # events of the op stream a fold could not take

    async def start(self, bus: Bus) -> None:
        await bus.replay(subjects.CONFIG_STREAM, subjects.CONFIG_ALL, self.on_config)
        if await self.catalogue.publish_file(bus, at_start=True) is not None:
            self.view.currency = self.catalogue.prices.currency
        await bus.replay(subjects.CLUSTER_STREAM, subjects.CLUSTER_ALL, self.on_cluster)
        await bus.replay(subjects.OPS_STREAM, FOLDED_SUBJECTS, self.fold)  # only what it folds
        await bus.serve(subjects.QUERY_COST, self.answer, group="cost")
        self.service.log.info("state_rebuilt", prices=self.catalogue.source, budgets=len(self.budgets),
                              nodes=len(self.nodes), components=len(self.durations.runs))

    async def on_config(self, data: bytes, seq: int) -> None:
        try:
            message = codec.decode_config(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.service.log.error("bad_config_message", seq=seq, error=str(exc))
            return
        if isinstance(message, QueuesConfigured):
            self.budgets = list(message.config.budgets)
            self.queues = message.config
        elif isinstance(message, PricesConfigured) and self.catalogue.apply(message):
            self.view.currency = message.prices.currency
            self.service.log.info("prices_configured", source=message.source,
                                  pools=[p.name for p in message.prices.pools])

    async def on_cluster(self, data: bytes, seq: int) -> None:
        try:
            event = codec.decode_cluster(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        if isinstance(event, NodeObserved):
            self.nodes[event.node] = dict(event.labels)
        if isinstance(event, (NodeObserved, NodeRemoved)):
            self.meter.observe(event)

    async def fold(self, data: bytes, seq: int) -> None:
        """Never raises (``_fold_message``); either way ``progress`` passes the message. The op's state is
        admission's."""
        try:
            self._fold_message(data, seq)
        finally:
            self.progress.advance(seq)

    def _fold_message(self, data: bytes, seq: int) -> None:
        """A message that does not decode is skipped, an event a fold cannot take is logged (``fold_failed``) and
        counted."""
        try:
            event = codec.decode_event(data)
        except Exception:  # noqa: BLE001 - bad messages are dead-lettered where they are consumed
            return
        try:
            self._fold(event, seq)
        except Exception as exc:  # noqa: BLE001 - one bad event must not stop the replay or the view
            self.fold_failures += 1
            self.service.log.error("fold_failed", op_id=event.op_id, event_type=codec.type_of(event), seq=seq,
                                   error=f"{exc!r}", failures=self.fold_failures)

    def _fold(self, event: Event, seq: int = 0) -> None:
        self.ledger.fold(event)
        self.durations.fold(event)
        self.occupancy.fold(event)
        if isinstance(event, BudgetExceeded):
            self.announced.fold(event)
        if isinstance(event, NodeCostRecorded):
            self.meter.fold(event)
        if isinstance(event, ATTEMPT_ENDS):
            return  # a running attempt stays counted until its cost_recorded arrives
        self.view.fold(event, self.hourly_of, seq)

    def pool_of(self, agent: str, labels: dict[str, str]) -> str:
        """The queue configuration's node pool of a node (``rules.node_pools.pool_of``; "": none)."""
        return pool_of(self.queues, agent, labels) if self.queues is not None else ""

    def charge_node(self, removed: NodeRemoved) -> NodeCostRecorded | None:
        """What a removed node cost (None: its creation is unknown, or it was charged already)."""
        return self.meter.charge(removed, self.pool_of, self.catalogue.prices)

    def runs_of(self, spec: OpSpec) -> list[float]:
        return self.durations.runs_of(spec)

    def labels_of(self, node: str) -> dict[str, str] | None:
        return self.nodes.get(node)

    def hourly_of(self, spec: OpSpec) -> float:
        return hourly_price(spec, self.catalogue.prices)

    def estimated(self, event: OperationSubmitted, at: datetime) -> CostEstimated:
        """The op's ``cost_estimated`` by the catalogue in force (``estimator.estimated``)."""
        return estimated(event, self.catalogue.prices, at, default_duration_s=self.default_duration_s,
                         runs=self.runs_of(event.spec), source=self.catalogue.source)

    def recorded(self, op_id: str, attempt: int) -> CostRecorded | None:
        """What the attempt cost, as the ledger has folded it (None: not known to have run and ended yet)."""
        return self.ledger.recorded(op_id, attempt, self.labels_of,
                                    lambda submitted: self.estimated(submitted, submitted.at))

    def exceeded(self, record: CostRecorded | NodeCostRecorded) -> list[BudgetExceeded]:
        """The budget limits ``record`` brings to or past, not announced before."""
        def spent(scope: str, name: str, window: str, at: datetime) -> tuple[float, float]:
            money, gpu_hours = self.spent(scope, name, window, at)
            if not self.view.charged(record.op_id, record.attempt):  # not folded yet (same window: ``at``)
                money, gpu_hours = money + record.amount, gpu_hours + record.gpu_hours
            return money, gpu_hours
        return self.announced.crossed(self.budgets, record, spent)

    def pool_budgets_exceeded(self, now: datetime) -> list[BudgetExceeded]:
        """The pool budget limits that the pools' nodes (charged, and open so far) have reached by ``now``, not
        announced before (the node budget tick)."""
        return self.announced.crossed_pool(self.budgets, now, self.catalogue.prices.currency, self.spent)

    def spent(self, scope: str, name: str, window: str, at: datetime) -> tuple[float, float]:
        """Money and GPU-hours of a budget scope in the window holding ``at``: the charges folded, and for a pool
        its open nodes' spend from the window's start to ``at``."""
        money, gpu_hours = self.view.spent(scope, name, window, at)
        if scope == "pool":
            for n in self.meter.open_spend(at, self.pool_of, self.catalogue.prices, window_start(at, window)):
                if n.pool == name:
                    money, gpu_hours = money + n.amount, gpu_hours + n.gpu_hours
        return round(money, 6), round(gpu_hours, 6)

    async def answer(self, data: bytes) -> bytes:
        try:
            request = codec.decode_query(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            request = None
        if not isinstance(request, CostRequest):
            self.service.log.warning("bad_cost_query")
        return codec.encode(self.cost_answer(self.service.clock.now()))

    def cost_answer(self, now: datetime) -> CostAnswer:
        """``opsched cost``: the spend view, with the open nodes' spend so far."""
        return self.view.answer(self.budgets, now, self.meter.open_spend(now, self.pool_of, self.catalogue.prices),
                                self.spent)
