"""The usage cache: which ops hold quota now (per queue, and by the priority they were admitted at, for
preemption), the decaying usage history for fair sharing, and the one snapshot a cycle decides on,
kept up to date as ops start and end instead of rebuilt (``snapshot.Snapshot``). It follows the fold's
transitions (``transitions``); only a node change, or an ended op freeing room some unplaced op may now
use, makes the next cycle build the snapshot afresh."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from opsched.services.admission.model import agents
from opsched.services.admission.model.records import Ghost, OpRecord
from opsched.services.admission.state.snapshot import Snapshot, pools_key
from opsched.services.admission.state.transitions import Transitions
from opsched.services.admission.state.usage_history import UsageHistory

if TYPE_CHECKING:
    from opsched.services.admission.model.queues import Book
    from opsched.services.admission.state.fold import OpFold


class UsageCache(Transitions):
    def __init__(self, fold: OpFold) -> None:
        self.fold = fold  # the facts: op records, nodes, ghosts, spend (read only)
        self.active: dict[str, set[str]] = {}  # queue -> its ops holding quota
        self.by_priority: dict[str, dict[float, set[str]]] = {}  # queue -> admitted priority -> ops
        self.history = UsageHistory()  # for usage-history fair sharing (not replayed: it decays)
        self.snap: Snapshot | None = None  # None until a cycle asks, and after a node change
        self.pools = b""  # what the snapshot's virtual nodes were built from (``snapshot.pools_key``)

    # ---- the read-only view policies get (``views.QueueView``) ----
    def admitted_at(self, queue: str) -> dict[float, set[str]] | None:
        return self.by_priority.get(queue)

    def record(self, op_id: str) -> OpRecord:
        return self.fold.ops[op_id]

    def usage_history(self) -> dict[str, dict[tuple[str, str], float]]:
        return self.history.levels()

    def active_ids(self) -> Iterator[str]:
        for ids in self.active.values():
            yield from ids

    def active_ops(self) -> Iterator[OpRecord]:
        ops = self.fold.ops
        for ids in self.active.values():
            for op_id in ids:
                yield ops[op_id]

    def build(self, book: Book, now: datetime | None = None) -> Snapshot:
        """A snapshot built afresh from the active ops (queries, and the check of the tracked one)."""
        f = self.fold
        snap = Snapshot.of(book, f.nodes, self.active_ops(), f.ghosts, f.spend, now, f.pool_budgets)
        snap.silent = agents.silent(book, f.heartbeats, now) if now is not None else {}
        return snap

    def current(self, book: Book, now: datetime | None) -> Snapshot:
        """The tracked snapshot, for a cycle at ``now`` under ``book``."""
        key = pools_key(book, self.fold.pool_budgets, now)
        if self.snap is None or key != self.pools:  # pools declared, or a pool's budget spent or reset
            self.snap, self.pools = self.build(book, now), key
        self.snap.book, self.snap.now, self.snap.starved = book, now, set()
        self.snap.silent = agents.silent(book, self.fold.heartbeats, now) if now is not None else {}
        return self.snap

    # ---- the fold's transitions ----
    def activated(self, op: OpRecord) -> None:
        self.active.setdefault(op.queue, set()).add(op.op_id)
        self.by_priority.setdefault(op.queue, {}).setdefault(op.admitted_priority, set()).add(op.op_id)
        if self.snap is not None:
            self.snap.assume(op, op.assumed_nodes)

    def deactivated(self, op: OpRecord) -> None:
        self.active.get(op.queue, set()).discard(op.op_id)
        levels = self.by_priority.get(op.queue, {})
        for priority in [p for p, ops in levels.items() if op.op_id in ops]:
            levels[priority].discard(op.op_id)
            if not levels[priority]:
                del levels[priority]
        if self.snap is not None:
            self.snap.release(op)
            if self.snap.unplaced:
                self.snap = None  # ops the nodes had no room for may fit now: placed afresh (rare)

    def located(self, op: OpRecord) -> None:
        if self.snap is not None and op.op_id in self.active.get(op.queue, ()):
            self.snap.locate(op)

    def held(self, ghost: Ghost, sign: int) -> None:
        if self.snap is not None:
            self.snap.hold(ghost, sign)

    def nodes_changed(self) -> None:
        self.snap = None  # the next cycle builds afresh
