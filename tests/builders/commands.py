"""Commands a client sends: submit and stop."""
from __future__ import annotations

from datetime import datetime

from opsched.proto.commands import StopOperation, SubmitOperation
from opsched.proto.spec import OpSpec
from tests.builders.clock import T0


def submit(spec: OpSpec, *, op_id: str = "op-1", at: datetime | None = T0) -> SubmitOperation:
    return SubmitOperation(op_id=op_id, spec=spec, requested_at=at, requested_by="test")


def stop(op_id: str = "op-1", *, reason: str = "stopped by user") -> StopOperation:
    return StopOperation(op_id=op_id, reason=reason)
