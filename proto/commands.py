"""Commands: imperative requests to the scheduler, from any producer."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec

from opsched.proto.limits import MAX_OPS_PER_COMMAND
from opsched.proto.spec import OpSpec, Wire


class Command(Wire, tag_field="type", kw_only=True):
    op_id: str
    requested_at: datetime | None = None
    requested_by: str = ""
    # the sender's id of this request (a subject token): its Nats-Msg-Id is ``<op_id>.<type>.<request_id>``, and
    # admission's answer carries it (the events it returns: ``request_id``; a refusal's error event: the msg id)
    request_id: str = ""


class SubmitOperation(Command, tag="submit", kw_only=True):
    spec: OpSpec
    # a hook's follow-up op: the op whose end triggered it (``OpSpec.hooks``); only admission submits these
    hook_of: str = ""


class StopOperation(Command, tag="stop", kw_only=True):
    reason: str = "stopped by user"


class TouchOperation(Command, tag="touch", kw_only=True):
    """Say a running service is in use: its culling idle time starts again (``touched``)."""


class ApproveOperation(Command, tag="approve", kw_only=True):
    """Release an op held for approval (``isApproved: false`` or a queue's approval policy)."""

    comment: str = ""


class RejectOperation(Command, tag="reject", kw_only=True):
    """Refuse an op held for approval: it ends ``rejected`` (reason ``approval_rejected``)."""

    comment: str = ""


class RerunOperation(Command, kw_only=True):
    """Run an op again; ``params`` override the original's."""

    params: dict[str, Any] = {}


class RestartOperation(RerunOperation, tag="restart", kw_only=True):
    """A new op (``new_op_id``) from the original's spec, linked to it."""

    new_op_id: str


class CopyOperation(RerunOperation, tag="copy", kw_only=True):
    """A new op from the original's spec, given the original's outputs/artifacts to start from."""

    new_op_id: str


class ResumeOperation(RerunOperation, tag="resume", kw_only=True):
    """Continue a stopped, failed or timed-out op in place: same id, a new attempt, history kept."""


COMMANDS: tuple[type[Command], ...] = (SubmitOperation, StopOperation, ApproveOperation, RejectOperation,
                                       RestartOperation, CopyOperation, ResumeOperation, TouchOperation)


class OperationsCommand(Wire, tag_field="type", kw_only=True):
    """A stop, approve or reject of several ops in one message (a sweep's, a queue's), on the singular verb's
    subject (``cmd.<user>.stop``, ...: the same permissions). Admission judges each distinct op as the singular
    command with the same ``request_id`` would be, and answers each op on its own subjects: the singular's event,
    or an ``error`` event whose ``command_msg_id`` is the singular's (``<op_id>.<verb>.<request_id>``)."""

    op_ids: Annotated[list[str], msgspec.Meta(min_length=1, max_length=MAX_OPS_PER_COMMAND)]
    requested_at: datetime | None = None
    requested_by: str = ""
    request_id: str  # required: each op's answer carries it; the message's Nats-Msg-Id is many.<verb>.<request_id>


class StopOperations(OperationsCommand, tag="stop_many", kw_only=True):
    reason: str = "stopped by user"


class ApproveOperations(OperationsCommand, tag="approve_many", kw_only=True):
    comment: str = ""


class RejectOperations(OperationsCommand, tag="reject_many", kw_only=True):
    comment: str = ""


BULK_COMMANDS: tuple[type[OperationsCommand], ...] = (StopOperations, ApproveOperations, RejectOperations)
SINGULAR: dict[type[OperationsCommand], type[Command]] = {  # each bulk command's one-op command (and its subject)
    StopOperations: StopOperation, ApproveOperations: ApproveOperation, RejectOperations: RejectOperation}


def verb_of(kind: type[OperationsCommand]) -> str:
    """The singular verb of a bulk command type: ``stop``, ``approve`` or ``reject``."""
    return str(SINGULAR[kind].__struct_config__.tag)
