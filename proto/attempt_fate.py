"""What the dispatcher decided about one attempt, kept in the JetStream KV bucket
``subjects.ATTEMPT_FATE_BUCKET`` under ``subjects.attempt_fate_key(op_id, attempt)``, shared by every
dispatcher replica and written only by compare-and-set.

``creating``: an ``admitted`` handler is creating (or created) its pods. ``released``: a stop or a preemption
was handled for it; nothing may create its pods any more, and pods created meanwhile are released again.
A released attempt never goes back to ``creating``. Keys expire with the bucket's max age."""
from __future__ import annotations

from datetime import datetime

from opsched.proto.spec import Wire

CREATING = "creating"
RELEASED = "released"


class AttemptFate(Wire, kw_only=True):
    op_id: str
    attempt: int
    state: str  # CREATING or RELEASED
    at: datetime
    by: str = ""  # of a release: "stop_requested" or "preempt_requested"

    @property
    def released(self) -> bool:
        return self.state == RELEASED
