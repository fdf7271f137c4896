"""Queues held or drained by an admin (``proto.queue_stops``): the stop policy in force per queue, folded from
the config stream (``config.queue_stop.<queue>``: the latest per queue). A ``set_queue_stop`` command is judged
by ``handlers.on_set_queue_stop``.

The rules that follow from a stop, each in one place: nothing of a stopped queue is admitted
(``policies.admit.evaluate``: ``queue_held``, so ``why`` says it); a cycle does not walk a stopped queue and
preempts every op a drained one runs (``cycle.Cycle._drain``, reason ``queue_drained``); the ``queues`` answer
shows the state (``queries.queues``). A stopped queue's unused quota stays lendable to its cohort."""
from __future__ import annotations

from opsched.proto.queries import PendingReason
from opsched.proto.queue_stops import STATES, QueueStopSet
from opsched.proto.reasons import Reason, pending


class QueueStops:
    def __init__(self) -> None:
        self.in_force: dict[str, QueueStopSet] = {}  # queue -> its Hold or HoldAndDrain (a resumed queue: absent)

    def apply(self, message: QueueStopSet) -> bool:
        """Put ``message`` in force; True when the queue's policy changed."""
        before = self.in_force.get(message.queue)
        if message.stop_policy == "None":
            self.in_force.pop(message.queue, None)
            return before is not None
        self.in_force[message.queue] = message
        return before is None or before.stop_policy != message.stop_policy

    def policy(self, queue: str) -> str:
        stop = self.in_force.get(queue)
        return stop.stop_policy if stop is not None else "None"


def held(stop: QueueStopSet) -> PendingReason:
    """Why an op of a stopped queue waits (``queue_held``)."""
    return pending(Reason.QUEUE_HELD, queue=stop.queue, state=STATES[stop.stop_policy], by=stop.by or "?",
                   since=stop.at, comment=f" ({stop.comment})" if stop.comment else "")
