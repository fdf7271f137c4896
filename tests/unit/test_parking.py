"""Parked queues: a cycle skips a queue whose ops are blocked until what they wait on changes, and
decides exactly what it would have decided had it looked at every queue."""
from __future__ import annotations

import random
from datetime import timedelta

import pytest

from opsched.proto.cluster import NodeObserved
from opsched.proto.events import CostRecorded, OperationAdmitted, OperationStopped
from opsched.proto.lifecycle import Status, allowed
from opsched.proto.queues import Budget
from opsched.proto.resources import GPU_MEMORY
from opsched.services.admission import cycle, parking
from opsched.services.admission.state.admission_state import AdmissionState
from tests.builders import (
    T0,
    book,
    fold,
    node,
    node_removed,
    op,
    queue,
    queued,
    running,
    succeeded,
    t,
    taint,
)

NS = "opsched"
LAB = book(queue("a", cohort="lab", gpus={"h100": 2}), queue("b", cohort="lab", gpus={"h100": 2}),
           queue("c", cohort="lab", gpus={"h100": 1}), queue("solo", gpus={"h100": 1}))


def gpu_op(op_id: str, gpus: int, queue_name: str, at: float = 0, priority: int = 0, amount: float = 1.0,
           not_on: str | None = None, tolerates: bool = False, memory_gib: int = 0) -> list:
    """``not_on``: a required node affinity that excludes that node; ``tolerates``: the ``dedicated`` taint;
    ``memory_gib``: shared GPU memory (aliyun.com/gpu-mem) instead of whole GPUs."""
    builder = op(op_id).priority(priority)
    builder = builder.limits(**{GPU_MEMORY: str(memory_gib)}) if memory_gib else builder.gpus(gpus, product="H100")
    if not_on:
        builder = builder.affinity({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": [not_on]}]}]}}})
    if tolerates:
        builder = builder.toleration(key="dedicated", operator="Exists", effect="NoSchedule")
    return queued(builder.build(), op_id=op_id, queue=queue_name, at=t(at), amount=amount)


def admitted(decisions) -> list[str]:
    return [d.op_id for d in decisions if isinstance(d, OperationAdmitted)]


def evaluations(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = cycle.evaluate

    def counting(op, snap, allow_borrow=True):
        seen.append(op.op_id)
        return real(op, snap, allow_borrow)
    monkeypatch.setattr(cycle, "evaluate", counting)
    return seen


def test_a_queue_whose_ops_wait_for_quota_is_not_looked_at_again_until_something_changes(monkeypatch):
    state = fold(gpu_op("s1", 1, "solo"), gpu_op("s2", 1, "solo", at=1))
    assert admitted(cycle.decide(state, LAB, t(10), NS)) == ["s1"]
    seen = evaluations(monkeypatch)
    assert cycle.decide(state, LAB, t(11), NS) == [] and seen == ["s2"] and "solo" in state.queues.parked
    assert cycle.decide(state, LAB, t(12), NS) == [] and seen == ["s2"]  # not looked at again
    fold(running("s1", at=t(12), node=None), succeeded("s1", at=t(20)), state=state)
    assert admitted(cycle.decide(state, LAB, t(21), NS)) == ["s2"] and seen == ["s2", "s2"]


def test_a_new_op_in_a_parked_queue_is_looked_at():
    state = fold(gpu_op("big", 2, "solo"))
    assert cycle.decide(state, LAB, t(10), NS) == [] and "solo" in state.queues.parked  # never fits its quota of 1... yet
    fold(gpu_op("small", 1, "solo", at=11), state=state)
    assert admitted(cycle.decide(state, LAB, t(12), NS)) == ["small"]


def test_room_freed_on_a_node_by_another_queue_wakes_an_op_parked_for_capacity():
    b = book(queue("x", gpus={"h100": 8}), queue("y", gpus={"h100": 8}))
    state = fold(node("gpu-a", gpus=2, product="H100"), gpu_op("x1", 2, "x"), gpu_op("y1", 1, "y", at=1))
    assert admitted(cycle.decide(state, b, t(10), NS)) == ["x1"]
    assert cycle.decide(state, b, t(11), NS) == [] and "y" in state.queues.parked
    fold(running("x1", at=t(12), node="gpu-a"), succeeded("x1", at=t(20)), state=state)
    assert admitted(cycle.decide(state, b, t(21), NS)) == ["y1"]


def test_an_op_held_by_a_daily_budget_is_looked_at_again_when_the_window_resets():
    b = book(queue("solo", gpus={"h100": 4}))
    b.config.budgets.append(Budget(scope="queue", name="solo", window="day", money=10.0))
    spent = CostRecorded(op_id="old", at=t(5), amount=9.0, seconds=3600.0, queue="solo")
    state = fold(spent, gpu_op("o1", 1, "solo", amount=5.0))
    assert cycle.decide(state, b, t(10), NS) == [] and "solo" in state.queues.parked
    midnight = (T0 + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    assert admitted(cycle.decide(state, b, midnight + timedelta(seconds=1), NS)) == ["o1"]


# ---- equivalence: parking changes the work a cycle does, never its decisions --------------------

def shared_node(name: str, cards: int = 2, gib: int = 16) -> NodeObserved:
    """A node sharing GPU memory: ``cards`` cards of ``gib`` GiB."""
    return NodeObserved(node=name, at=T0, allocatable={"cpu": "64", "memory": "256Gi", GPU_MEMORY: str(cards * gib),
                                                        "aliyun.com/gpu-count": str(cards)})


def _step(rng: random.Random, states: list[AdmissionState], b, i: int, live: list[str]) -> None:
    """Fold the same random arrivals and endings into every state."""
    events: list = []
    for k in range(rng.randint(0, 3)):
        oid = f"o{i}-{k}"
        events += gpu_op(oid, rng.choice([1, 1, 2, 3]), rng.choice(["a", "b", "c", "solo"]), at=i,
                         priority=rng.choice([0, 0, 1]),
                         not_on=f"gpu-{rng.randint(0, 4)}" if rng.random() < 0.3 else None,
                         tolerates=rng.random() < 0.3, memory_gib=rng.choice([4, 8, 12]) if rng.random() < 0.2 else 0)
    for oid in rng.sample(live, k=min(len(live), rng.randint(0, 2))):
        live.remove(oid)
        events += [succeeded(oid, at=t(i), attempt=states[0].ops[oid].attempt)]
    queued = sorted(o for o, r in states[0].ops.items() if r.status.name == "QUEUED")
    if queued and rng.random() < 0.2:  # a user stops a waiting op now and then
        events.append(OperationStopped(op_id=rng.choice(queued), at=t(i), reason="stopped"))
    if rng.random() < 0.1:  # the cluster changes now and then
        tainted = [taint("dedicated", "ml")] if rng.random() < 0.3 else []  # only tolerating ops may use it
        events.append(node(f"gpu-{rng.randint(0, 4)}", gpus=rng.choice([1, 2, 4]), product="H100", taints=tainted,
                           at=t(i)) if rng.random() < 0.7 else node_removed(f"gpu-{rng.randint(0, 4)}"))
    for state in states:
        fold(*events, state=state)


def statuses(state: AdmissionState) -> dict[str, Status]:
    return {op_id: op.status for op_id, op in state.ops.items()}


def assert_moves_allowed(before: dict[str, Status], state: AdmissionState) -> None:
    """Every status an op moved to since ``before`` is a move of the lifecycle's status machine."""
    for op_id, now in statuses(state).items():
        was = before.get(op_id, Status.PENDING)
        assert was == now or allowed(was, now), f"{op_id}: {was.label} -> {now.label}"


@pytest.mark.parametrize("seed", range(200))
def test_cycles_decide_the_same_with_and_without_parking(seed, monkeypatch):
    rng = random.Random(seed)
    nodes = [node(f"gpu-{j}", gpus=2, product="H100") for j in range(3)] + [shared_node("share-0")]
    parked, unparked = fold(*nodes), fold(*nodes)
    live: list[str] = []
    real_skip = parking.skip
    for i in range(40):
        before = statuses(parked)
        _step(rng, [parked, unparked], LAB, i, live)
        assert_moves_allowed(before, parked)
        now, before = t(100 + i), statuses(parked)
        monkeypatch.setattr(parking, "skip", real_skip)
        with_parking = [(type(d).__name__, d.op_id) for d in cycle.decide(parked, LAB, now, NS)]
        assert_moves_allowed(before, parked)
        monkeypatch.setattr(parking, "skip", lambda *_: False)
        without = [(type(d).__name__, d.op_id) for d in cycle.decide(unparked, LAB, now, NS)]
        assert with_parking == without, f"cycle {i}"
        for state in (parked, unparked):
            for kind, oid in with_parking:
                if kind == OperationAdmitted.__name__:
                    fold(running(oid, at=now, node=None, attempt=state.ops[oid].attempt), state=state)
        live += [oid for kind, oid in with_parking if kind == OperationAdmitted.__name__]
        live = [oid for oid in live if parked.ops[oid].status.active]


def test_an_op_parked_before_the_nodes_were_known_is_rejected_once_they_show_it_can_never_fit():
    state = fold(gpu_op("huge", 9, "solo"))
    assert cycle.decide(state, LAB, t(10), NS) == [] and "solo" in state.queues.parked
    fold(node("gpu-a", gpus=2, product="H100"), state=state)
    decisions = cycle.decide(state, LAB, t(11), NS)
    assert [(type(d).__name__, d.op_id) for d in decisions] == [("OperationRejected", "huge")]
