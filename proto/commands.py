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


COMMANDS: tuple[type[Command], ...] = (SubmitOperation, StopOperation)
