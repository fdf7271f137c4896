"""Preemption and aging: an aged priority orders the queue but never lets an op preempt."""
from __future__ import annotations

import pytest

from opsched.proto.events import OperationAdmitted, PreemptRequested
from opsched.proto.queues import Aging
from opsched.services.admission.state.admission_state import AdmissionState
from tests.builders import (
    GPU,
    book,
    configure_aging,
    fold,
    preempted,
    queue,
    running,
    t,
)
from tests.unit.preemption_scenarios import decide, gpu_op, preemptions, start, victims

# ---- aging and preemption ---------------------------------------------------------------------

def test_two_ops_of_equal_priority_do_not_preempt_each_other_back_and_forth_because_of_aging():
    b = book(queue("q", gpus={"h100": 1}, aging=Aging(per_minute=1, cap=30)))
    state = configure_aging(AdmissionState(), b)
    fold(gpu_op("a", 1, at=0), gpu_op("b", 1, at=1), state=state)
    requests = []
    for minute in range(15):
        now = 60 * minute + 2
        for d in decide(state, b, t(now)):
            if isinstance(d, OperationAdmitted):
                fold(running(d.op_id, at=t(now + 1), attempt=d.attempt, node=None), state=state)
            elif isinstance(d, PreemptRequested):
                requests.append(d.op_id)
                fold(preempted(d.op_id, at=t(now + 2), attempt=d.attempt, preemptor=d.preemptor), state=state)
    assert len(requests) <= 1, f"preempted {len(requests)} times: {requests}"


def test_aging_orders_the_queue_but_never_lets_an_op_preempt():
    b = book(queue("q", gpus={"h100": 1}, aging=Aging(per_minute=1, cap=100)))
    state = configure_aging(AdmissionState(), b)
    fold(gpu_op("mid", 1, priority=5, at=0), gpu_op("lo", 1, priority=0, at=0), state=state)
    start(state, b, 0, "mid")
    assert victims(decide(state, b, t(4 * 60))) == []  # lo's effective 4 < mid's 5
    assert victims(decide(state, b, t(60 * 60))) == []  # aged to 60 > 5, but its base 0 is not


def test_a_preemptor_compares_its_base_priority_with_the_victims_priority_at_admission():
    b = book(queue("q", gpus={"h100": 1}, aging=Aging(per_minute=1, cap=100)))
    state = configure_aging(AdmissionState(), b)
    fold(gpu_op("aged", 1, priority=0, at=0), state=state)
    (admitted,) = decide(state, b, t(30 * 60))  # admitted with an aged priority of 30
    assert admitted.effective_priority == 30
    fold(gpu_op("high", 1, priority=20, at=30 * 60), state=state)
    assert victims(decide(state, b, t(31 * 60))) == []  # 20 does not outrank 30
    fold(gpu_op("higher", 1, priority=40, at=31 * 60), state=state)
    (request,) = preemptions(decide(state, b, t(32 * 60)))
    assert (request.op_id, request.preemptor) == ("aged", "higher")
    assert request.message == "higher (queue q, priority 40) outranks aged (queue q, priority 30)"


def test_the_effective_priority_at_admission_is_recorded_on_the_event():
    b = book(queue("q", gpus={"h100": 1}, aging=Aging(per_minute=2, cap=100)))
    state = configure_aging(AdmissionState(), b)
    fold(gpu_op("x", 1, priority=3), state=state)
    (decision,) = decide(state, b, t(90))
    assert decision.effective_priority == pytest.approx(6.0)
    assert state.ops["x"].admitted_priority == pytest.approx(6.0)
    assert state.ops["x"].request == {GPU: 1.0}
