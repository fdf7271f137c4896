"""Command handlers: turn a submit or stop request into the events that follow from it."""
from __future__ import annotations

from proto import subjects
from proto.commands import StopOperation, SubmitOperation
from proto.events import Event, OperationRejected, OperationStopped, OperationSubmitted, StopRequested
from services.admission.policies.priority import UnknownPriorityClass, priority_of
from services.admission.policies.routing import route
from services.admission.queues import Book
from services.admission.state import AdmissionState
from services.runtime.errors import InvalidInput
from services.runtime.service import Context


def on_submit(cmd: SubmitOperation, ctx: Context, state: AdmissionState, book: Book) -> Event | None:
    if not subjects.valid_token(cmd.op_id):
        raise InvalidInput("invalid_op_id", f"op id {cmd.op_id!r} must be lowercase letters, digits and dashes")
    if cmd.op_id in state.ops:
        ctx.log.info("duplicate_submit_ignored")
        return None
    now = ctx.clock.now()
    queue = route(cmd.spec, book)
    config = book.queues.get(queue)
    if config is None:
        return OperationRejected(op_id=cmd.op_id, at=now, reason="unknown_queue",
                                 message=f"unknown queue {queue!r}; known queues: {', '.join(book.names)}")
    waiting = state.queue(queue).waiting
    if config.max_queued is not None and waiting >= config.max_queued:
        return OperationRejected(op_id=cmd.op_id, at=now, reason="queue_full",
                                 message=f"queue {queue} already holds {waiting} waiting ops (maxQueued "
                                         f"{config.max_queued}); retry later or use another queue")
    try:
        priority = priority_of(cmd.spec, queue, book)
    except UnknownPriorityClass as exc:
        return OperationRejected(op_id=cmd.op_id, at=now, reason="unknown_priority_class", message=str(exc))
    return OperationSubmitted(op_id=cmd.op_id, at=now, spec=cmd.spec, queue=queue,
                              submitted_at=now, priority=priority)


def on_stop(cmd: StopOperation, ctx: Context, state: AdmissionState) -> Event | None:
    op = state.ops.get(cmd.op_id)
    now = ctx.clock.now()
    if op is None:
        raise InvalidInput("unknown_op", f"cannot stop {cmd.op_id!r}: no such operation", op_id=cmd.op_id)
    if op.status.terminal:
        return None
    if op.status.active and op.pod_name and op.namespace:
        return StopRequested(op_id=op.op_id, at=now, attempt=op.attempt, pod_name=op.pod_name,
                             namespace=op.namespace, reason=cmd.reason)
    return OperationStopped(op_id=op.op_id, at=now, attempt=op.attempt, reason="stopped", message=cmd.reason)
