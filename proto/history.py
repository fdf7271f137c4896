"""An op's history as ``why`` answers it and its summary keeps it: one ``HistoryEntry`` per event that
changed what happened to the op (admitted where, preempted by whom and why, evicted, retried, rejected, ...),
in stream order, bounded per op (``limits.MAX_HISTORY_ENTRIES``: the first entry and the latest ones,
``history_dropped`` counting those left out). Which event gives which entry is one rule:
``rules.op_history.entry_of``."""
from __future__ import annotations

from datetime import datetime

from opsched.proto.spec import Wire


class HistoryEntry(Wire, kw_only=True):
    at: datetime
    attempt: int = 0
    event: str  # the event's type tag: "admitted", "preempted", "evicted", "rejected", ...
    reason: str = ""  # its reason code (a ``proto.reasons`` value, or Kubernetes' for a failure)
    message: str = ""  # its message as it was published (cut to ``limits.MAX_HISTORY_MESSAGE`` characters)
    by: str = ""  # who did it: the preemptor, the approver, the stopper, the resumer, the original of a cache hit
    queue: str = ""  # submitted to, admitted in
    flavors: dict[str, str] = {}  # admitted: resource -> flavor
    node: str = ""  # where it ran (running, failed, succeeded), or the agent it was admitted to
    pool: str = ""  # the catalogue's price pool (cost recorded)
    amount: float | None = None  # money: the estimate, or the cost recorded
    retry_after_s: float | None = None  # evicted, retry scheduled: back in its queue no sooner than this
