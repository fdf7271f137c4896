"""The simulated autoscaler's decisions (``opsched.localcluster.autoscaling``): numbers only, fixed times."""
from __future__ import annotations

import msgspec

from opsched.localcluster.autoscaling import (
    TO_BE_DELETED_TAINT,
    Autoscaling,
    NodeToAdd,
    NodeView,
    PodView,
    Pool,
    pools_from,
    taint_for_deletion,
)
from opsched.proto.queues import QueuesConfig

GPU = "nvidia.com/gpu"
A100 = {"nvidia.com/gpu.product": "A100"}
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATE = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)


def pool(**kw: object) -> Pool:
    base: dict[str, object] = dict(name="a100", labels=dict(A100), allocatable={GPU: 1.0, "cpu": 8.0},
                                   taints=(TAINT,), min_nodes=0, max_nodes=4, provisioning_seconds=3.0,
                                   unneeded_seconds=20.0)
    return Pool(**{**base, **kw})  # type: ignore[arg-type]


def waiting(name: str, gpus: float = 1.0, selector: dict[str, str] | None = None,
            tolerations: tuple[dict[str, str], ...] = TOLERATE) -> PodView:
    return PodView(key=f"ops/{name}", unschedulable=True, selector=dict(A100) if selector is None else selector,
                   tolerations=tolerations, requests={GPU: gpus, "cpu": 1.0})


def running(name: str, node: str, gpus: float = 1.0) -> PodView:
    return PodView(key=f"ops/{name}", node=node, phase="Running", selector=dict(A100), tolerations=TOLERATE,
                   requests={GPU: gpus})


def node(name: str, *, marked: bool = False, gpus: float = 1.0) -> NodeView:
    taints = (TAINT, taint_for_deletion(1)) if marked else (TAINT,)
    return NodeView(name, {**A100, "kubernetes.io/hostname": name}, taints, {GPU: gpus, "cpu": 8.0})


def test_one_unschedulable_pod_adds_one_node_due_after_provisioning_seconds() -> None:
    actions = Autoscaling([pool()]).plan(100.0, [waiting("p")], [], [])
    assert actions.add == [NodeToAdd(103.0, "a100", "a100-0")]
    assert not (actions.taint or actions.untaint or actions.delete)


def test_a_pending_add_is_not_added_twice() -> None:
    scaler = Autoscaling([pool()])
    first = scaler.plan(100.0, [waiting("p")], [], [])
    assert scaler.plan(101.0, [waiting("p")], [], first.add).add == []


def test_a_node_that_came_with_room_is_not_added_twice_while_the_pod_waits_for_the_scheduler() -> None:
    assert Autoscaling([pool()]).plan(104.0, [waiting("p")], [node("a100-0")], []).add == []


def test_a_node_a_waiting_pod_will_take_is_needed_not_idle() -> None:
    scaler = Autoscaling([pool()])
    scaler.plan(0.0, [], [node("a100-0")], [])
    # past the unneeded time, but kube-scheduler has yet to retry the pod that waits for it
    actions = scaler.plan(30.0, [waiting("p")], [node("a100-0")], [])
    assert actions.taint == [] and actions.add == []
    # once the pod is gone, the idle time counts from the last pass that needed it
    assert scaler.plan(49.0, [], [node("a100-0")], []).taint == []
    assert scaler.plan(50.0, [], [node("a100-0")], []).taint == ["a100-0"]


def test_three_one_gpu_pods_add_three_one_gpu_nodes() -> None:
    pods = [waiting(f"p{i}") for i in range(3)]
    assert [a.name for a in Autoscaling([pool()]).plan(0.0, pods, [], []).add] == ["a100-0", "a100-1", "a100-2"]


def test_max_nodes_caps_the_adds() -> None:
    pods = [waiting(f"p{i}") for i in range(3)]
    assert len(Autoscaling([pool(max_nodes=2)]).plan(0.0, pods, [], []).add) == 2


def test_stock_caps_the_adds() -> None:
    pods = [waiting(f"p{i}") for i in range(3)]
    assert len(Autoscaling([pool()], stock={"a100": 2}).plan(0.0, pods, [], []).add) == 2


def test_existing_and_pending_nodes_count_toward_the_caps() -> None:
    pods = [waiting(f"p{i}") for i in range(3)]
    pending = [NodeToAdd(5.0, "a100", "a100-1")]
    actions = Autoscaling([pool(max_nodes=3)]).plan(0.0, pods, [node("a100-0")], pending)
    # a100-0 and a100-1 take two of the pods: one more node, the third of maxNodes
    assert [a.name for a in actions.add] == ["a100-2"]


def test_pods_are_first_fit_into_bigger_nodes() -> None:
    pods = [waiting(f"p{i}", gpus=3) for i in range(3)]
    assert len(Autoscaling([pool(allocatable={GPU: 8.0, "cpu": 96.0})]).plan(0.0, pods, [], []).add) == 2


def test_a_pod_no_pool_takes_adds_nothing() -> None:
    scaler = Autoscaling([pool()])
    assert scaler.plan(0.0, [waiting("other", selector={"nvidia.com/gpu.product": "T4"})], [], []).add == []
    assert scaler.plan(0.0, [waiting("intolerant", tolerations=())], [], []).add == []
    assert scaler.plan(0.0, [waiting("too-big", gpus=2)], [], []).add == []
    scheduled_elsewhere = PodView(key="ops/x", selector=dict(A100), tolerations=TOLERATE, requests={GPU: 1.0})
    assert scaler.plan(0.0, [scheduled_elsewhere], [], []).add == []  # not (yet) marked Unschedulable


def test_a_pod_goes_to_the_first_pool_that_takes_it_only() -> None:
    t4 = pool(name="t4", labels={"nvidia.com/gpu.product": "T4"})
    any_gpu = pool(name="any", labels={})
    actions = Autoscaling([any_gpu, t4]).plan(0.0, [waiting("p", selector={})], [], [])
    assert [a.pool for a in actions.add] == ["any"]


def test_an_empty_node_is_tainted_after_the_unneeded_time_then_deleted() -> None:
    scaler = Autoscaling([pool()])
    assert scaler.plan(0.0, [], [node("a100-0")], []).taint == []
    assert scaler.plan(19.9, [], [node("a100-0")], []).taint == []
    assert scaler.plan(20.0, [], [node("a100-0")], []).taint == ["a100-0"]
    actions = scaler.plan(20.5, [], [node("a100-0", marked=True)], [])
    assert actions.delete == ["a100-0"] and actions.taint == []


def test_a_busy_node_is_never_tainted_and_a_pod_bound_meanwhile_untaints() -> None:
    scaler = Autoscaling([pool()])
    assert scaler.plan(0.0, [running("p", "a100-0")], [node("a100-0")], []).taint == []
    assert scaler.plan(100.0, [running("p", "a100-0")], [node("a100-0")], []).taint == []
    # it ends: the unneeded time counts from then
    done = PodView(key="ops/p", node="a100-0", phase="Succeeded")
    assert scaler.plan(101.0, [done], [node("a100-0")], []).taint == []
    assert scaler.plan(121.0, [done], [node("a100-0")], []).taint == ["a100-0"]
    actions = scaler.plan(121.5, [running("q", "a100-0")], [node("a100-0", marked=True)], [])
    assert actions.untaint == ["a100-0"] and actions.delete == []


def test_never_below_min_nodes_and_min_nodes_come_at_once() -> None:
    scaler = Autoscaling([pool(min_nodes=1)])
    start = scaler.plan(50.0, [], [], [])
    assert start.add == [NodeToAdd(50.0, "a100", "a100-0")]
    nodes = [node("a100-0"), node("a100-1")]
    scaler.plan(60.0, [], nodes, [])
    actions = scaler.plan(100.0, [], nodes, [])
    assert actions.taint == ["a100-0"]  # one of the two; a100-1 stays for minNodes
    assert scaler.plan(200.0, [], [node("a100-0", marked=True), node("a100-1")], []).taint == []


def test_names_are_never_reused() -> None:
    scaler = Autoscaling([pool()])
    first = scaler.plan(0.0, [waiting("p")], [node("a100-4")], [])
    assert [a.name for a in first.add] == []  # a100-4 has room for it
    second = scaler.plan(0.0, [waiting("p"), waiting("q")], [node("a100-4")], [])
    assert [a.name for a in second.add] == ["a100-5"]
    # a100-5 came and went; the next is a100-6, not a100-5 again
    assert [a.name for a in scaler.plan(9.0, [waiting("r"), waiting("s")], [node("a100-4")], []).add] == ["a100-6"]


def test_pod_and_node_views_read_the_api_objects() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ops"},
           "spec": {"nodeSelector": A100, "tolerations": list(TOLERATE),
                    "containers": [{"name": "main", "resources": {"limits": {GPU: "1"}, "requests": {"cpu": "500m"}}}]},
           "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                          "reason": "Unschedulable"}]}}
    view = PodView.of(pod)
    assert view.waiting and view.requests == {GPU: 1.0, "cpu": 0.5}
    n = NodeView.of({"metadata": {"name": "a100-0", "labels": A100},
                     "spec": {"taints": [taint_for_deletion(7)]}, "status": {"allocatable": {GPU: "1", "cpu": "8"}}})
    assert n.marked and n.allocatable == {GPU: 1.0, "cpu": 8.0} and n.taints[0]["key"] == TO_BE_DELETED_TAINT


def test_pools_from_a_queue_configuration() -> None:
    config = msgspec.convert({"flavors": [
        {"name": "a100", "nodeLabels": A100, "tolerations": list(TOLERATE),
         "pool": {"name": "a100", "nodeLabels": {"karpenter.sh/nodepool": "gpu"}, "allocatable": {GPU: 8, "cpu": "96"},
                  "taints": [TAINT], "maxNodes": 2, "provisioningSeconds": 3, "scaleDownUnneededSeconds": 20}},
        {"name": "cpu"}]}, QueuesConfig, from_attributes=False, str_keys=True)
    [p] = pools_from(config)
    assert p.name == "a100" and p.labels == {**A100, "karpenter.sh/nodepool": "gpu"}
    assert p.allocatable == {GPU: 8.0, "cpu": 96.0} and p.quantities == {GPU: "8", "cpu": "96"}
    assert (p.max_nodes, p.provisioning_seconds, p.unneeded_seconds) == (2, 3.0, 20.0)
    assert pools_from(config, agent="elsewhere") == []
    # what the pool does not name, a new node offers as the simulated kubelet's nodes do
    [filled] = pools_from(config, defaults={"cpu": "32", "memory": "1Gi", "pods": "110"})
    assert filled.quantities == {GPU: "8", "cpu": "96", "memory": "1Gi", "pods": "110"}
    assert filled.allocatable["memory"] == 2.0 ** 30
