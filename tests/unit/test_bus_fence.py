"""A fenced publish on a NATS cluster: JetStream answers "wrong last sequence" (10164) while another publish
expecting the same claim is in process. The bus publishes again while the claim is still the last message
of its subject, and calls it fenced (``Fenced``) once another instance has claimed."""
from __future__ import annotations

from datetime import datetime, timezone

import nats.js.errors
import pytest

from opsched.bus.addressing import Fence
from opsched.bus.bus import WRONG_LAST_SEQUENCE, WRONG_LAST_SEQUENCE_IN_FLIGHT, Bus
from opsched.bus.errors import Fenced
from opsched.proto.events import OperationAdmitted
from tests.builders import op

CLAIM = Fence(subject="ops.lease.admission.claimed", seq=7)


class FakeNats:
    def jetstream(self):
        return None


class Refusing(Bus):
    """Refuses the first ``refusals`` publishes with ``err_code``; the claim's last sequence is ``last``."""

    def __init__(self, err_code: int, refusals: int, last: int) -> None:
        super().__init__(FakeNats(), "test")  # type: ignore[arg-type]
        self.err_code, self.refusals, self.last, self.tries = err_code, refusals, last, 0

    async def publish_raw(self, subject, data, headers):
        self.tries += 1
        assert headers["Nats-Expected-Last-Subject-Sequence"] == "7"
        if self.tries <= self.refusals:
            raise nats.js.errors.BadRequestError(code=400, err_code=self.err_code, description="wrong last sequence")
        return "acked"

    async def last_stored(self, stream, subject):
        assert subject == CLAIM.subject
        return self.last


def admitted() -> OperationAdmitted:
    spec = op("fenced").build()
    return OperationAdmitted(op_id="fenced", at=datetime(2026, 1, 1, tzinfo=timezone.utc), attempt=0, spec=spec, queue="default",
                             pod_name="op-fenced-0", namespace="ns")


async def test_a_refusal_while_another_fenced_publish_is_in_process_is_tried_again_while_the_claim_holds():
    bus = Refusing(WRONG_LAST_SEQUENCE_IN_FLIGHT, refusals=2, last=7)
    assert await bus.publish(admitted(), fence=CLAIM) == "acked"
    assert bus.tries == 3


async def test_the_same_refusal_after_another_claim_is_fenced():
    bus = Refusing(WRONG_LAST_SEQUENCE_IN_FLIGHT, refusals=1, last=9)
    with pytest.raises(Fenced):
        await bus.publish(admitted(), fence=CLAIM)
    assert bus.tries == 1


async def test_a_moved_last_sequence_is_fenced_at_once():
    bus = Refusing(WRONG_LAST_SEQUENCE, refusals=1, last=7)
    with pytest.raises(Fenced):
        await bus.publish(admitted(), fence=CLAIM)
