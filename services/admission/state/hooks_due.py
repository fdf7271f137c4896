"""The ops whose end is on the stream and who have hooks to submit (``services.admission.hooks``), oldest first.

A follower of the fold: an op enters when its end is stored (``Transitions.ended``), leaves when the leader has
submitted its hooks (``done``) or when it leaves memory. Rebuilt from the stream on start like the rest of the
state: an end replayed puts its op here again, and the leader skips the hooks whose ops exist already."""
from __future__ import annotations

from opsched.services.admission.model.records import OpRecord
from opsched.services.admission.state.transitions import Transitions


class HooksDue(Transitions):
    def __init__(self) -> None:
        self.ops: dict[str, None] = {}  # op ids, in the order their ends were stored

    def ended(self, op: OpRecord) -> None:
        if op.spec.hooks:
            self.ops[op.op_id] = None

    def forgotten(self, op: OpRecord) -> None:
        self.ops.pop(op.op_id, None)

    def done(self, op_id: str) -> None:
        self.ops.pop(op_id, None)
