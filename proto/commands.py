"""Commands: imperative requests to the scheduler, from any producer."""
from __future__ import annotations

from datetime import datetime

from proto.spec import OpSpec, Wire


class Command(Wire, tag_field="type", kw_only=True):
    op_id: str
    requested_at: datetime | None = None
    requested_by: str = ""


class SubmitOperation(Command, tag="submit", kw_only=True):
    spec: OpSpec


class StopOperation(Command, tag="stop", kw_only=True):
    reason: str = "stopped by user"


class ApproveOperation(Command, tag="approve", kw_only=True):
    """Release an op held for approval (``isApproved: false`` or a queue's approval policy)."""

    comment: str = ""


class RejectOperation(Command, tag="reject", kw_only=True):
    """Refuse an op held for approval: it ends ``rejected`` (reason ``approval_rejected``)."""

    comment: str = ""


COMMANDS: tuple[type[Command], ...] = (SubmitOperation, StopOperation, ApproveOperation, RejectOperation)
