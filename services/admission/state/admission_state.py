"""Admission's state, wired together: the op-lifecycle fold (``fold``: the facts, folded from events)
and its followers, the queue manager (``queue_manager``: pending order, parking, the cycle's work
lists), the usage cache (``usage_cache``: active ops, the snapshot) and the ops whose hooks are due
(``hooks_due``). The fold announces every transition to them through one interface (``transitions``);
nobody else keeps them in step."""
from __future__ import annotations

from datetime import datetime

from opsched.proto.cluster import ClusterEvent
from opsched.proto.events import Event
from opsched.proto.lifecycle import Status
from opsched.services.admission.model.nodes import NodeInfo
from opsched.services.admission.model.queue_stops import QueueStops
from opsched.services.admission.model.queues import Book
from opsched.services.admission.model.records import OpRecord
from opsched.services.admission.state.fold import OpFold
from opsched.services.admission.state.hooks_due import HooksDue
from opsched.services.admission.state.queue_manager import QueueManager
from opsched.services.admission.state.snapshot import Snapshot
from opsched.services.admission.state.usage_cache import UsageCache

__all__ = ["AdmissionState", "OpRecord", "Status", "snapshot_of"]


class AdmissionState:
    def __init__(self, tombstones: int = 100_000) -> None:
        self.fold = OpFold(tombstones=tombstones)
        self.queues = QueueManager(self.fold.ops)
        self.usage = UsageCache(self.fold)
        self.hooks = HooksDue()
        self.stops = QueueStops()  # queues an admin held or drained (folded from the config stream)
        self.fold.followers = (self.queues, self.usage, self.hooks)

    @property
    def ops(self) -> dict[str, OpRecord]:
        return self.fold.ops

    @property
    def nodes(self) -> dict[str, NodeInfo]:
        return self.fold.nodes

    @property
    def nominated(self) -> dict[str, set[str]]:
        """Preemptor -> victims whose pods are not gone yet."""
        return self.fold.nominated

    def apply(self, event: Event, seq: int = 0) -> bool:
        """Fold one op event (or recorded spend) stored at ``seq`` (0: assumed before its publish).
        Returns True when the state changed."""
        return self.fold.apply(event, seq)

    def observe(self, event: ClusterEvent) -> bool:
        """Fold one node fact. Returns True when the nodes changed."""
        return self.fold.observe(event)


def snapshot_of(state: AdmissionState, book: Book, now: datetime | None = None) -> Snapshot:
    """A snapshot built afresh from admission's state (the active ops its usage cache tracks), for queries and
    for checking the tracked one; a cycle decides on the tracked one (``UsageCache.current``)."""
    snap = state.usage.build(book, now)
    snap.stopped = state.stops.in_force
    return snap
