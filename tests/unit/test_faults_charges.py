"""The fault suite's charges check (``bench.faults.tally.charges``): every attempt that ran and ended has exactly
one ``cost_recorded``; an attempt that never ran needs none."""
from __future__ import annotations

from bench.faults.tally import charges
from opsched.proto import codec
from opsched.proto.events import CostRecorded
from tests.builders import running, stopped, succeeded, t


def recorded(op_id: str, attempt: int = 0) -> CostRecorded:
    return CostRecorded(op_id=op_id, at=t(60), attempt=attempt, amount=1.0, seconds=60.0, queue="q", project="p",
                        gpu_hours=0.0, started_at=t(0))


def stream(*events) -> list[bytes]:
    return [codec.encode(e) for e in events]


def test_each_attempt_that_ran_needs_exactly_one_charge():
    assert charges(stream(running("a"), succeeded("a"), recorded("a"), stopped("never-ran"))) == []
    assert charges(stream(running("b"), succeeded("b"))) == ["b#0: never charged"]
    assert charges(stream(running("c"), succeeded("c"), recorded("c"), recorded("c"))) == ["c#0: charged 2 times"]
    assert charges(stream(running("d"))) == []  # still running: nothing to charge yet
