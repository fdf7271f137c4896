"""An op whose event cannot be published ends with the reason, never retried, so that no op waits forever, holds
quota, or blocks the ops behind it:

- over the NATS server's max payload (headers counted: the runtime refuses it before it is sent,
  ``MessageTooLarge``): ``message_too_large``. A submit, restart or copy whose ``submitted`` is too large is
  rejected (the command dead-lettered);
- refused by the server for admission's permissions (``NotPermitted``: a bug or a misconfiguration of the subject
  table, never an outage to wait out): ``publish_refused``.

A cycle's decision that cannot be published is forgotten and its op rejected, or failed had it started; the cycle
goes on with the others. Should that end be refused too, the op is ended here all the same (it holds nothing and
is decided no more until a restart replays it) and readiness names the refused subject (``stalls``).

Specs over ``proto.limits.MAX_SPEC_BYTES`` are refused at submit (``rules.spec_size``); a too-large message is the
rest: a server configured with a smaller max payload, or what admission adds to a spec."""
from __future__ import annotations

from datetime import datetime

from opsched.bus.errors import MessageTooLarge
from opsched.bus.refusals import NotPermitted
from opsched.proto import codec
from opsched.proto.commands import CopyOperation, RestartOperation, SubmitOperation
from opsched.proto.events import Event, OperationFailed, OperationRejected
from opsched.proto.reasons import Failure
from opsched.services.admission.model.records import OpRecord

MESSAGE_TOO_LARGE = Failure.MESSAGE_TOO_LARGE
PUBLISH_REFUSED = Failure.PUBLISH_REFUSED
UNPUBLISHABLE = (MessageTooLarge, NotPermitted)


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


def ending(op: OpRecord, decision: Event, exc: MessageTooLarge | NotPermitted, now: datetime) -> Event:
    """What ends ``op`` when the cycle's ``decision`` about it cannot be published."""
    if isinstance(exc, MessageTooLarge):
        reason, why = MESSAGE_TOO_LARGE, exc.message
    else:
        reason, why = PUBLISH_REFUSED, str(exc)
    message = f"its {codec.type_of(decision)} event cannot be published: {why}"
    if op.status.active:
        return OperationFailed(op_id=op.op_id, at=now, attempt=op.attempt, reason=reason, message=message)
    return OperationRejected(op_id=op.op_id, at=now, attempt=op.attempt, reason=reason, message=message)
