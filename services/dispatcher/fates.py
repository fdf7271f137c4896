"""The fate of each attempt, durable and shared by every dispatcher replica: a stop or a preemption wins.

The in-memory table (``attempts``) is folded from the op stream asynchronously, per replica: a stop handled
by one replica (``stopped`` reported: no pod yet) and a redelivered ``admitted`` handled by another (or
by the same one before its fold caught up) could still create the pod. So a stop's or a preemption's
verdict is also kept in the KV bucket ``opsched_attempts`` (``proto.attempt_fate``), by compare-and-set:

- the stop and preempt handlers **release** the attempt (``released``) *before* they look for its pods;
- the admitted handler creates the pods, then reads the fate: released (before the creates or while they
  ran), it releases the pods it created and reports nothing more (the stop or preemption was reported
  already).

Either the release was written before that read (the admitted handler sees it and deletes its pods), or
after it, and so after the pods were created (the stop or preempt handler finds them and deletes them). An
attempt nobody stops costs one read here, no write (issue 36: the admitted handler no longer marks it
``creating`` first; that only spared the pods of an attempt stopped before its ``admitted`` was handled,
which its table of attempts spares already unless it lags). The bucket's max age (``attempt_fate_max_age_s``,
a day) bounds the keys of released attempts."""
from __future__ import annotations

from datetime import datetime

from opsched.proto import subjects
from opsched.proto.attempt_fate import RELEASED, AttemptFate
from opsched.services.runtime.kvstore import KVStore


class Fates(KVStore):
    """The attempts' fates in a KV bucket (any object with the nats ``KeyValue`` get/create/update)."""

    def __init__(self, kv) -> None:
        super().__init__(kv, subjects.ATTEMPT_FATE_BUCKET)

    async def release(self, op_id: str, attempt: int, at: datetime, by: str) -> None:
        """Mark the attempt ``released``: nothing creates its pods from now on."""
        def change(current: AttemptFate | None) -> AttemptFate | None:
            if current is not None and current.released:
                return current  # released already: the first release's record stays
            return AttemptFate(op_id=op_id, attempt=attempt, state=RELEASED, at=at, by=by)
        await self._mutate(subjects.attempt_fate_key(op_id, attempt), AttemptFate, change)

    async def released(self, op_id: str, attempt: int) -> bool:
        fate, _ = await self._read(subjects.attempt_fate_key(op_id, attempt), AttemptFate)
        return fate is not None and fate.released
