"""What the dispatcher decided about one attempt, kept in the JetStream KV bucket
``subjects.ATTEMPT_FATE_BUCKET`` under ``subjects.attempt_fate_key(op_id, attempt)``, shared by every
dispatcher replica and written only by compare-and-set.

``released``: a stop or a preemption was handled for it; nothing may create its pods any more, and pods created
meanwhile are released again. ``creating`` (an ``admitted`` handler creating its pods) was written by earlier
versions and is read as not released. Keys expire with the bucket's max age."""
from __future__ import annotations

from datetime import datetime

from opsched.proto.spec import Wire

CREATING = "creating"
RELEASED = "released"


class AttemptFate(Wire, kw_only=True):
    op_id: str
    attempt: int
    state: str  # RELEASED (CREATING: from earlier versions)
    at: datetime
    by: str = ""  # of a release: "stop_requested" or "preempt_requested"

    @property
    def released(self) -> bool:
        return self.state == RELEASED
