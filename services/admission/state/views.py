"""What a policy may read of admission's state beyond the snapshot: the running ops of a queue by the priority
they were admitted at (preemption's candidates) and the decayed usage history (fair sharing). Read only: the
usage cache (``usage_cache.UsageCache``) is the one implementation; a policy never sees ``AdmissionState``."""
from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Protocol

from opsched.services.admission.model.queues import Key
from opsched.services.admission.model.records import OpRecord


class QueueView(Protocol):
    def admitted_at(self, queue: str) -> Mapping[float, Set[str]] | None:
        """The ops of ``queue`` holding quota, by the (effective) priority they were admitted at; None: none ever."""

    def record(self, op_id: str) -> OpRecord:
        """The record of a held op."""

    def usage_history(self) -> Mapping[str, Mapping[Key, float]]:
        """Decayed past usage per queue and quota line (``usage_history``)."""
