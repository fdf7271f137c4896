"""An op whose event cannot be published (over the NATS server's max payload, headers counted: the runtime
refuses it before it is sent, ``MessageTooLarge``) ends with the reason ``message_too_large``, never retried:

- a submit, restart or copy whose ``submitted`` is too large is rejected (the command dead-lettered);
- a cycle's decision too large (an ``admitted`` carries the rendered spec, the queue's node selector and
  tolerations) is forgotten and its op rejected, or failed had it started; the cycle goes on with the others.

Specs over ``proto.limits.MAX_SPEC_BYTES`` are refused at submit (``proto.spec_size``); this is the rest:
a server configured with a smaller max payload, or what admission adds to a spec."""
from __future__ import annotations

from datetime import datetime

from proto import codec
from proto.commands import CopyOperation, RestartOperation, SubmitOperation
from proto.events import Event, OperationFailed, OperationRejected
from services.admission.records import OpRecord
from services.runtime.errors import MessageTooLarge

MESSAGE_TOO_LARGE = "message_too_large"


def refused_command(command: object, exc: MessageTooLarge, now: datetime) -> list[Event]:
    """The rejection of the op a submit, restart or copy would have created ([] for other commands)."""
    if isinstance(command, SubmitOperation):
        op_id = command.op_id
    elif isinstance(command, (RestartOperation, CopyOperation)):
        op_id = command.new_op_id
    else:
        return []
    return [OperationRejected(op_id=op_id, at=now, reason=MESSAGE_TOO_LARGE,
                              message=f"its submitted event cannot be published: {exc.message}")]


def ending(op: OpRecord, decision: Event, exc: MessageTooLarge, now: datetime) -> Event:
    """What ends ``op`` when the cycle's ``decision`` about it cannot be published."""
    message = f"its {codec.type_of(decision)} event cannot be published: {exc.message}"
    if op.status.active:
        return OperationFailed(op_id=op.op_id, at=now, attempt=op.attempt, reason=MESSAGE_TOO_LARGE, message=message)
    return OperationRejected(op_id=op.op_id, at=now, attempt=op.attempt, reason=MESSAGE_TOO_LARGE, message=message)
