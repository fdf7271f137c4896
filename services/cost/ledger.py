"""The actual-cost ledger: each attempt's real run time (``running`` -> its end) x the op's hourly
price where it ran (each pod at the price of its node's pool and product: ``OpCost.charge_of``), kept per op,
in a key-value bucket.

Keys: ``op.<op_id>`` (the op's price, its attempts' starts and ends and what each finished attempt
cost). Every change is a compare-and-set on the key's revision, so replicas sharing the ledger's consumer
never lose each other's changes; a redelivered event finds its attempt recorded and gives the same
``cost_recorded`` again. Spend per queue, project and budget window is not kept here: it is folded from the
``cost_recorded`` events (``rules.spend_totals``)."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import msgspec

from opsched.proto.events import PodCharge
from opsched.rules.pricing import point_for
from opsched.services.cost.amounts import bounded
from opsched.services.runtime.kvstore import KVStore


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


class Recorded(msgspec.Struct, kw_only=True):
    amount: float
    seconds: float
    gpu_hours: float
    started_at: datetime
    ended_at: datetime
    pool: str = ""  # the pool whose price was charged ("" = the default prices): the main pod's
    pods: list[PodCharge] = []  # the pools (and products) its pods were charged at


class PoolPrice(msgspec.Struct, kw_only=True):
    """What an hour of the op costs on the nodes of one pool (from the catalogue at its submit)."""

    name: str
    match: dict[str, str]
    hourly: float


class PointPrice(msgspec.Struct, kw_only=True):
    """What an hour of the op costs in one pool for one GPU product (``rules.pricing``; from the catalogue at its
    submit): all its pods (``hourly``) and one pod of each of its shapes (``shapes``)."""

    pool: str = ""  # "": the defaults
    match: dict[str, str] = {}
    product: str = "*"
    hourly: float = 0.0
    shapes: list[float] = []


class OpCost(msgspec.Struct, kw_only=True):
    queue: str = ""
    project: str = ""
    hourly: float = 0.0
    gpus: int = 0
    currency: str = "USD"
    starts: dict[str, datetime] = {}  # attempt -> when it started running
    recorded: dict[str, Recorded] = {}  # attempt -> what it cost
    pool: str = ""  # the pool its nodeSelector chose at submit (priced ``hourly``)
    pools: list[PoolPrice] = []  # the catalogue's pools at submit, in order
    ran_in: dict[str, str] = {}  # attempt -> the pool of the node it ran on
    ends: dict[str, datetime] = {}  # attempt -> when it ended, for an end handled before its start
    priced: bool = True  # False: made by a start or an end handled before the op's submitted
    # since charges per pod (an entry without them is charged as before: ``hourly_of``)
    points: list[PointPrice] = []  # the op in every pool (catalogue order) and the defaults, for every product
    labels: dict[str, str] = {}  # its own nodeSelector: where a pod on a node of unknown labels is priced
    pod_shapes: list[int] = []  # each pod's shape, pods in name order (``rules.pricing.pod_shapes``)
    ran_on: dict[str, list[str]] = {}  # attempt -> each pod's node (name order), until the attempt is recorded

    def hourly_of(self, attempt: str) -> tuple[float, str]:
        """The hourly price of an attempt and the pool that set it (an entry without price points)."""
        pool = self.ran_in.get(attempt)
        found = next((p for p in self.pools if p.name == pool), None)
        return (found.hourly, found.name) if found else (self.hourly, self.pool)

    def charge_of(self, attempt: str, labels_of: Callable[[str], dict[str, str] | None]
                  ) -> tuple[float, str, list[PodCharge]]:
        """The hourly price of an attempt, the pool of its main pod and what each pool charged its pods: each pod at
        the point of its node's labels (over the op's own nodeSelector; a node of unknown labels: the op's own)."""
        if not self.points:
            hourly, pool = self.hourly_of(attempt)
            return hourly, pool, []
        nodes = self.ran_on.get(attempt, [])
        main = nodes[0] if nodes else ""
        where: dict[str, PointPrice | None] = {}
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

    @property
    def total(self) -> float:
        return round(sum(r.amount for r in self.recorded.values()), 6)


def key_part(name: str) -> str:
    """A key token for an op id (key-value keys allow a few characters only)."""
    return re.sub(r"[^A-Za-z0-9_=-]", "_", name or "_")


class LedgerStore(KVStore):
    def __init__(self, kv) -> None:
        super().__init__(kv, "cost")

    async def op(self, op_id: str) -> OpCost | None:
        return (await self._read(f"op.{key_part(op_id)}", OpCost))[0]

    async def change_op(self, op_id: str, change: Callable[[OpCost | None], OpCost | None], *,
                        likely_new: bool = False) -> OpCost | None:
        """``likely_new``: the op's first event here (its submitted): created without a read first."""
        return await self._mutate(f"op.{key_part(op_id)}", OpCost, change, likely_new=likely_new)
