"""What the op-lifecycle fold announces, and the one interface its followers implement.

The fold (``services.admission.state.fold``) changes op records and says what changed through these calls,
in the order it happens; it never reaches into a follower. Two follow it: the queue manager
(``queue_manager``: pending order, waiting counts, parking generations, the cycle's work lists) and
the usage cache (``usage_cache``: the active ops and the snapshot a cycle decides on). Each overrides
the transitions it cares about; the rest do nothing.
"""
from __future__ import annotations

from datetime import datetime

from opsched.services.admission.model.records import Ghost, OpRecord


class Transitions:
    """Every transition the fold announces (no-ops here: a follower overrides what it needs)."""

    def entered(self, op: OpRecord, restored: bool = False) -> None:
        """The op waits in its queue (submitted, or back for another attempt): it counts for maxQueued and
        maxPendingPerUser. ``restored``: a decision about it whose publish failed is forgotten (it keeps its place)."""

    def queued(self, op: OpRecord, now: datetime | None) -> None:
        """The op joined its queue's order (status QUEUED)."""

    def left(self, op: OpRecord, admitted: bool) -> None:
        """The op stopped waiting: admitted, or ended before it ran (stopped, rejected, skipped...)."""

    def activated(self, op: OpRecord) -> None:
        """The op holds quota now (admitted): counted where it runs, or where the cycle placed it."""

    def deactivated(self, op: OpRecord) -> None:
        """The op holds no quota any more (ended, preempted, evicted, failed, or its admission forgotten)."""

    def located(self, op: OpRecord) -> None:
        """The op's node became known (its pod is there, no longer where it was assumed)."""

    def held(self, ghost: Ghost, sign: int) -> None:
        """Room a preempted victim left is held for its preemptor (+1), or let go (-1)."""

    def nodes_changed(self) -> None:
        """A node appeared, changed or went away."""

    def spent(self) -> None:
        """Actual spend was recorded (a budget window moved)."""

    def gates_cleared(self, op: OpRecord) -> None:
        """Cost estimate in, and a cache miss for an op that uses the cache: the cycle queues the op or holds it for
        approval."""

    def cache_hit(self, op: OpRecord) -> None:
        """The cache found the op's result: the cycle ends it succeeded."""

    def failure_decided(self, op: OpRecord) -> None:
        """A failed attempt was decided on (RETRYING: a retry left; FAILED: final): the cycle publishes the decision
        (``retry_scheduled`` or ``failure_final``)."""

    def backing_off(self, op: OpRecord, until: datetime) -> None:
        """The op may not run before ``until`` (an eviction or retry back-off): a cycle must run then."""

    def ended(self, op: OpRecord) -> None:
        """The op's end is on the stream (not only assumed): what follows its end may happen (its hooks)."""

    def forgotten(self, op: OpRecord) -> None:
        """The finished op left memory (its retention ttl passed): drop every reference to it."""

    def handler_failed(self, op: OpRecord) -> None:
        """A service gave up on a message the op waited on, and no retry follows: the cycle ends it (rejected)."""
