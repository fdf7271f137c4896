"""GPU memory sharing (aliyun.com/gpu-mem) counted as GiB of memory, fitted per card, never as GPUs;
and pods without an NVIDIA GPU get NVIDIA_VISIBLE_DEVICES=void."""
from __future__ import annotations

import re

import msgspec
import pytest

from opsched.polyaxonfile import SpecError
from opsched.proto.cluster import NodeObserved
from opsched.proto.events import OperationAdmitted, OperationOnHold
from opsched.proto.queues import (
    ApprovalPolicy,
    Budget,
    FlavorQuota,
    Queue,
    QueuesConfig,
    ResourceQuota,
)
from opsched.proto.resources import (
    GPU_MEMORY,
    accelerators,
    gpu_memory_gib,
    is_device,
    requested,
)
from opsched.rules.podspec import build_pod
from opsched.services.admission.model.gpu_sharing import pack
from opsched.services.admission.model.nodes import NodeInfo
from opsched.services.admission.model.queues import compile_book
from opsched.services.admission.state.capacity import Capacity
from tests.builders import T0, admitted, case, case_name, first_fit, fold, op, queued
from tests.unit.admission_scenarios import decide
from tests.unit.polyaxonfile_texts import component, parse

MEM = GPU_MEMORY


def shared_node(name="share", cards=2, gib=16) -> NodeObserved:
    """A node of the gpushare device plugin: ``cards`` GPUs of ``gib`` GiB each."""
    return NodeObserved(node=name, at=T0, allocatable={"cpu": "32", "memory": "128Gi", MEM: str(cards * gib),
                                                        "aliyun.com/gpu-count": str(cards)})


def ask(gib) -> dict[str, float]:
    return {MEM: float(gib)}


@pytest.mark.parametrize("c", [
    case("a plain number is GiB, the device plugin's unit", value="8", gib=8),
    case("a quantity with a unit is bytes", value="8Gi", gib=8),
    case("MiB that make whole GiB are accepted", value="4096Mi", gib=4),
], ids=case_name)
def test_gpu_memory_is_counted_in_gib(c):
    assert gpu_memory_gib(c.value) == c.gib
    assert requested({MEM: c.value}, {}) == {MEM: float(c.gib)}


@pytest.mark.parametrize("value", ["0.5", "512Mi", "8G", "-1", "two"])
def test_gpu_memory_that_is_not_whole_gib_is_refused_at_the_edge_and_by_the_contract(value):
    with pytest.raises(SpecError) as raised:
        parse(component(**{"limits: {nvidia.com/gpu: 1}": f"limits: {{{MEM}: '{value}'}}"}))
    assert any(e.loc.endswith(MEM) for e in raised.value.errors)
    with pytest.raises(ValueError, match=re.escape(f"container.resources.limits['{MEM}']")):
        op("a").limits(**{MEM: value}).build()


def test_gpu_memory_is_not_a_gpu():
    assert not is_device(MEM) and is_device("nvidia.com/gpu")
    assert accelerators({MEM: "8Gi", "nvidia.com/gpu": "1"}) == {"nvidia.com/gpu": 1}


@pytest.mark.parametrize("c", [
    case("asks are packed onto the fullest card that fits", asks=[10, 4], used=[14.0, 0.0]),
    case("a card that cannot hold the ask is skipped", asks=[10, 10], used=[10.0, 10.0]),
    case("largest first: the order asks came in does not matter", asks=[4, 12, 4, 12], used=[16.0, 16.0]),
    case("an ask no card can hold does not fit even if the total would", asks=[10, 10, 12], used=None),
], ids=case_name)
def test_shared_gpu_memory_is_packed_per_card(c):
    assert pack([float(a) for a in c.asks], (2, 16.0)) == c.used


def test_capacity_fits_gpu_memory_per_card_not_by_the_node_total():
    cap = Capacity.of({"share": NodeInfo.of(shared_node())})
    for gib in (10, 10):
        cap.take(first_fit(cap, ask(gib), {}, []), ask(gib))
    assert cap.free["share"][MEM] == 12  # 12 GiB free in all, 6 on each card
    assert first_fit(cap, ask(12), {}, []) is None
    assert first_fit(cap, ask(6), {}, []) == "share"
    cap.give_back("share", ask(10))
    assert first_fit(cap, ask(12), {}, []) == "share"
    assert cap.ever(ask(16), {}, []) and not cap.ever(ask(17), {}, [])


def test_three_shared_ops_run_on_one_two_card_node_and_the_one_no_card_holds_waits():
    state = fold(shared_node(), *(queued(op(n).limits(**{MEM: f"{g}Gi"}).build(), op_id=n)
                                  for n, g in (("a", 10), ("b", 10), ("c", 6), ("d", 12))))
    admitted_ids = [d.op_id for d in decide(state) if isinstance(d, OperationAdmitted)]
    assert admitted_ids == ["a", "b", "c"]
    assert state.ops["d"].blocked[0].code == "no_capacity"
    assert "12 GiB of aliyun.com/gpu-mem on one card" in state.ops["d"].blocked[0].message


def test_gpu_memory_counts_as_gib_in_quota_and_never_as_gpus_in_approval_or_budgets():
    config = QueuesConfig(queues=[Queue(name="default", approval=ApprovalPolicy(gpus_above=1),
                                        resources=[ResourceQuota(resource=MEM,
                                                                 flavors=[FlavorQuota(name="default", nominal="20Gi")])])],
                          budgets=[Budget(scope="queue", name="default", window="day", gpu_hours=0.001)])
    book = compile_book(config)
    state = fold(shared_node(), queued(op("a").limits(**{MEM: "12"}).build(), op_id="a"),
                 queued(op("b").limits(**{MEM: "12"}).build(), op_id="b"))
    decisions = decide(state, book)
    assert [d.op_id for d in decisions if isinstance(d, OperationAdmitted)] == ["a"]  # 12 + 12 GiB > 20 GiB
    assert not [d for d in decisions if isinstance(d, OperationOnHold)]  # 12 GiB is not 12 GPUs
    assert state.ops["a"].gpus == 0 and state.ops["b"].blocked[0].code == "quota_exhausted"


def test_the_pod_asks_for_gpu_memory_in_the_device_plugin_s_unit():
    pod = build_pod(admitted(op("a").limits(**{MEM: "8Gi"}).build(), op_id="a"))
    container = pod["spec"]["containers"][0]
    assert container["resources"] == {"limits": {MEM: "8"}, "requests": {MEM: "8"}}
    assert "env" not in container or all(e["name"] != "NVIDIA_VISIBLE_DEVICES" for e in container["env"])


@pytest.mark.parametrize("c", [
    case("a CPU-only pod cannot reach the node's GPUs", spec=op("cpu").cpu("1").build(), void=True),
    case("an AMD GPU pod gets no NVIDIA devices either", spec=op("amd").gpus(1, resource="amd.com/gpu").build(),
         void=True),
    case("an NVIDIA GPU pod is left to its device plugin", spec=op("gpu").gpus(1).build(), void=False),
    case("a pod with a GPU limit of 0 gets no NVIDIA device", spec=op("zero").gpus(0).build(), void=True),
    case("a pod with a GPU limit of 0 written as a quantity gets none either", spec=op("z").gpus("0k").build(),
         void=True),
    case("a pod with shared GPU memory of 0 gets no NVIDIA device", spec=op("m0").limits(**{MEM: "0"}).build(),
         void=True),
    case("a pod with shared GPU memory is left to its device plugin", spec=op("m").limits(**{MEM: "8Gi"}).build(),
         void=False),
], ids=case_name)
def test_pods_without_an_nvidia_gpu_get_nvidia_visible_devices_void(c):
    env = build_pod(admitted(c.spec, op_id="x"))["spec"]["containers"][0].get("env", [])
    assert ({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in env) is c.void


def test_every_container_of_a_gang_without_an_nvidia_gpu_gets_void_and_only_those():
    from opsched.proto.spec import ReplicaGroup
    from opsched.rules.podspec import build_pods

    cpu = op("worker").cpu("1").build().container
    spec = msgspec.structs.replace(op("dist").gpus(1).build(), replicas=[ReplicaGroup(name="worker", count=2,
                                                                                       container=cpu)])
    void = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
    got = {p["metadata"]["name"]: [void in c["env"] for c in p["spec"]["containers"]]
           for p in build_pods(admitted(spec, op_id="g"))}
    assert got == {"op-g-0": [False], "op-g-0-worker-0": [True], "op-g-0-worker-1": [True]}


def test_the_ops_table_shows_gpu_memory_as_memory():
    from opsched.view import OpsView, gpus_text
    from tests.builders import submitted

    view = OpsView()
    row = view.fold(submitted(op("a").limits(**{MEM: "8Gi"}).replicas("worker", 2).build(), op_id="a"))
    assert row is not None and row.accelerators == {MEM: 24.0} and row.gpus == 0
    assert gpus_text(row.accelerators) == "24GiB-mem"  # the main pod and 2 workers (replicas copy the main container)
