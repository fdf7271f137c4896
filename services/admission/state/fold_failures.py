"""A fold never raises: an event it cannot take (a bug, or a value no check foresaw) is logged
(``fold_failed``, with the op id, the event type and the error), counted, and ends the op it concerns.

The op is marked as a handler that gave up marks it (``handler_failure``, with the reason ``fold_failed``):
the leader's next cycle rejects it, or fails it had it started, once (``cycle``). An op whose ``submitted``
could not be folded is taken in bare (no requests, holding nothing) so that it can end with the reason.
An op already ended, or already ending, is left as it is."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from opsched.bus import logging as oplog
from opsched.proto.codec import type_of
from opsched.proto.events import Event, OperationFailed, OperationRejected, OperationSubmitted
from opsched.proto.lifecycle import Status
from opsched.proto.reasons import Failure
from opsched.services.admission.model.records import OpRecord
from opsched.services.admission.state.transitions import Transitions

FOLD_FAILED = Failure.FOLD_FAILED  # the reason an op ends with when an event about it could not be folded


class Folded(Protocol):
    """What ending an op needs of the fold (``fold.OpFold``): its records, its followers, and its one rule for
    letting go of quota."""

    @property
    def ops(self) -> dict[str, OpRecord]: ...

    @property
    def followers(self) -> Sequence[Transitions]: ...

    def set_active(self, op: OpRecord, active: bool) -> None: ...


class FoldFailures:
    def __init__(self) -> None:
        self.count = 0  # events the fold could not take
        self.log = oplog.get("admission")

    def failed(self, fold: Folded, event: Event, seq: int, exc: Exception) -> bool:
        """``event`` (stored at ``seq``) raised ``exc`` while folded: log, count, end its op. Returns True
        when the op was marked to end."""
        self.count += 1
        kind = type_of(event)
        self.log.error("fold_failed", op_id=event.op_id, event_type=kind, seq=seq, error=f"{exc!r}",
                       failures=self.count)
        try:
            op = fold.ops.get(event.op_id)
            if op is None and isinstance(event, OperationSubmitted):
                op = _bare(fold, event)
            if op is not None and isinstance(event, (OperationRejected, OperationFailed)) and _its_end(op, event):
                _force_end(fold, op, event)  # its end could not be folded either: it ends all the same
                return True
            if op is None or op.status.terminal or op.handler_failure:
                return False
            op.handler_failure = f"admission could not fold its {kind} event: {exc!r}"[:1000]
            op.end_reason = FOLD_FAILED
            for f in fold.followers:
                f.handler_failed(op)
            return True
        except Exception as again:  # noqa: BLE001 - a fold must never raise, even here
            self.log.error("fold_failure_not_ended", op_id=event.op_id, event_type=kind, error=f"{again!r}")
            return False


def _bare(fold: Folded, e: OperationSubmitted) -> OpRecord:
    """The op of a ``submitted`` the fold could not take: known, waiting in its queue, requesting nothing."""
    op = fold.ops[e.op_id] = OpRecord(e.op_id, e.queue, e.priority, e.submitted_at, e.spec,
                                      requested_by=e.requested_by)
    for f in fold.followers:
        f.entered(op)
    return op


def _its_end(op: OpRecord, event: OperationRejected | OperationFailed) -> bool:
    """``event`` is the end of an op that ends for a fold failure (the cycle's, or its copy on the stream)."""
    return bool(op.end_reason) and not op.status.terminal and event.reason == op.end_reason


def _force_end(fold: Folded, op: OpRecord, event: OperationRejected | OperationFailed) -> None:
    """End ``op`` without the fold's lifecycle (which just failed on it): out of its queue, holding nothing."""
    if op.status < Status.ADMITTED:
        for f in fold.followers:
            f.left(op, False)
    fold.set_active(op, False)  # the fold's one rule for letting go of quota
    op.status = Status.FAILED if isinstance(event, OperationFailed) else Status.REJECTED
    op.reason, op.reason_message = event.reason, event.message
    if op.status == Status.FAILED:
        for f in fold.followers:
            f.failure_decided(op)  # final: its ``failure_final`` is published all the same
