"""What ran on each node and when (``services.cost.occupancy``): pod intervals from ``running.nodes`` and the
attempts' ends, and a node's accelerator-seconds split into busy, stranded and idle."""
from __future__ import annotations

from opsched.proto.events import CostRecorded, OperationRunning
from opsched.services.cost.occupancy import Occupancy, PodInterval, Split, devices_per_pod, split_of
from tests.builders import T0, failed, op, submitted, succeeded, t

HOUR = 3600.0


def gang(name: str = "gang") -> object:
    return op(name).gpus(4).replicas("worker", 1).build()


def test_each_pod_holds_its_devices_in_name_order():
    assert devices_per_pod("op-1", op().gpus(4).build()) == [4.0]
    assert devices_per_pod("op-1", gang()) == [4.0, 4.0]
    assert devices_per_pod("op-1", op().cpu("2").build()) == [0.0]


def test_a_pod_runs_on_its_node_from_running_to_its_attempts_end():
    occ = Occupancy()
    occ.fold(submitted(op().gpus(4).build()))
    occ.fold(OperationRunning(op_id="op-1", at=t(10), pod_name="p", node="gpu-a"))
    assert occ.on("gpu-a") == [PodInterval("op-1", 0, 0, 4.0, t(10))]
    occ.fold(succeeded(at=t(70)))
    assert occ.on("gpu-a") == [PodInterval("op-1", 0, 0, 4.0, t(10), t(70))]
    assert occ.on("gpu-b") == []


def test_a_gang_across_two_nodes_counts_one_pod_on_each():
    occ = Occupancy()
    occ.fold(submitted(gang()))
    occ.fold(OperationRunning(op_id="op-1", at=T0, pod_name="p", node="gpu-a", nodes=["gpu-a", "gpu-b"]))
    occ.fold(failed(at=t(HOUR)))
    assert [(p.pod, p.accelerators) for p in occ.on("gpu-a")] == [(0, 4.0)]
    assert [(p.pod, p.accelerators) for p in occ.on("gpu-b")] == [(1, 4.0)]
    assert occ.split("gpu-b", T0, t(2 * HOUR), 8) == Split(busy=4 * HOUR, stranded=4 * HOUR, idle=8 * HOUR)


def test_a_charge_closes_the_attempt_when_its_end_was_not_seen():
    occ = Occupancy()
    occ.fold(submitted(op().gpus(1).build()))
    occ.fold(OperationRunning(op_id="op-1", at=T0, pod_name="p", node="gpu-a"))
    occ.fold(CostRecorded(op_id="op-1", at=t(60), amount=1.0, seconds=60.0, queue="q"))
    assert occ.on("gpu-a")[0].until == t(60)


def test_a_replayed_stream_gives_the_same_split():
    events = [submitted(op().gpus(2).build()),
              OperationRunning(op_id="op-1", at=t(100), pod_name="p", node="gpu-a"),
              OperationRunning(op_id="op-1", at=t(100), pod_name="p", node="gpu-a"),  # published again
              succeeded(at=t(400))]
    first, second = Occupancy(), Occupancy()
    for e in events:
        first.fold(e)
    for e in events:
        second.fold(e)
    assert first.split("gpu-a", T0, t(1000), 4) == second.split("gpu-a", T0, t(1000), 4) \
        == Split(busy=600.0, stranded=600.0, idle=2800.0)


def test_the_split_sums_to_the_whole_node():
    pods = [PodInterval("a", 0, 0, 3.0, t(0), t(50)), PodInterval("b", 0, 0, 8.0, t(20), None)]
    split = split_of(pods, T0, t(100), 8)
    assert split.total == 8 * 100
    assert split.busy == 3 * 20 + 8 * 30 + 8 * 50  # never more than the node has
    assert split.idle == 0.0


def test_a_node_without_accelerators_splits_its_seconds():
    assert split_of([PodInterval("a", 0, 0, 0.0, t(0), t(30))], T0, t(100), 0) == Split(busy=30.0, idle=70.0)


def test_an_interval_outside_the_nodes_life_counts_nothing():
    assert split_of([PodInterval("a", 0, 0, 1.0, t(-50), t(-10))], T0, t(10), 1) == Split(idle=10.0)
    assert split_of([], t(10), T0, 1) == Split()
