"""Placement policies (``services.admission.model.placement``): which node of those a pod fits admission picks
under binpack, spread and firstFit; which policy an op gets; and the preferred node its pods carry."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto.events import OperationAdmitted
from opsched.proto.queues import Flavor
from opsched.rules.podspec import PREFERRED, build_pods
from opsched.services.admission.model import placement
from opsched.services.admission.model.nodes import NodeInfo
from opsched.services.admission.model.placement import Rule
from opsched.services.admission.state.capacity import Capacity
from tests.builders import GPU, admitted, book, case, case_name, gpu_flavor, node, op, queue
from tests.builders.admission import fold, queued
from tests.unit.admission_scenarios import decide

HOST = "kubernetes.io/hostname"


def cluster(**used: tuple[int, int]) -> Capacity:
    """``cluster(a=(8, 3))``: node a with 8 GPUs of which 3 are in use."""
    cap = Capacity.of({name: NodeInfo.of(node(name, gpus=total, labels={HOST: f"host-{name}"}))
                       for name, (total, _) in used.items()})
    for name, (_, busy) in used.items():
        cap.take(name, {GPU: float(busy)})
    return cap


@pytest.mark.parametrize("c", [
    case("binpack puts a pod on the fullest node that fits it",
         nodes={"a": (8, 0), "b": (8, 5), "c": (8, 7)}, pods=[1], policy="binpack", placed=["c"]),
    case("binpack skips a fuller node the pod does not fit",
         nodes={"a": (8, 0), "b": (8, 5), "c": (8, 7)}, pods=[2], policy="binpack", placed=["b"]),
    case("spread puts a pod on the emptiest node",
         nodes={"a": (8, 4), "b": (8, 0), "c": (8, 7)}, pods=[1], policy="spread", placed=["b"]),
    case("firstFit takes the first node by name that fits",
         nodes={"a": (8, 4), "b": (8, 0), "c": (8, 7)}, pods=[1], policy="firstFit", placed=["a"]),
    case("equally full nodes go by name under binpack",
         nodes={"b": (8, 2), "a": (8, 2)}, pods=[1], policy="binpack", placed=["a"]),
    case("equally empty nodes go by name under spread",
         nodes={"b": (8, 0), "a": (8, 0)}, pods=[1], policy="spread", placed=["a"]),
    case("a gang under binpack fills the fuller node before it opens the next",
         nodes={"a": (8, 0), "b": (8, 4)}, pods=[2, 2, 2, 2], policy="binpack", placed=["b", "b", "a", "a"]),
    case("a gang under spread takes turns between nodes as they fill",
         nodes={"a": (8, 0), "b": (8, 4)}, pods=[2, 2, 2, 2], policy="spread", placed=["a", "a", "a", "b"]),
    case("a pod that fits no node is not placed, whatever the policy",
         nodes={"a": (8, 4), "b": (8, 6)}, pods=[8], policy="binpack", placed=None),
    case("a gang is placed whole or not at all",
         nodes={"a": (8, 4), "b": (8, 6)}, pods=[4, 4], policy="binpack", placed=None),
], ids=case_name)
def test_where_a_policy_places_pods(c):
    pods = [{GPU: float(g)} for g in c.pods]
    assert cluster(**c.nodes).place(pods, {}, [], None, Rule(c.policy)) == c.placed


def test_binpack_keeps_a_whole_node_free_for_an_eight_gpu_op_where_first_fit_does_not():
    def after_small_ops(policy: str) -> list[str] | None:
        cap = cluster(a=(8, 0), b=(8, 1))
        for _ in range(3):
            cap.take_all(cap.place([{GPU: 1.0}], {}, [], None, Rule(policy)), [{GPU: 1.0}])
        return cap.place([{GPU: 8.0}], {}, [], None, Rule(policy))
    assert after_small_ops("binpack") == ["a"]
    assert after_small_ops("firstFit") is None


def test_a_pod_that_asks_no_accelerator_is_placed_first_fit_and_prefers_no_node():
    cap = cluster(a=(8, 0), b=(8, 7))
    cpu_pod = {"cpu": 1.0}
    assert cap.place([cpu_pod], {}, [], None, Rule("binpack")) == ["a"]
    assert placement.preferred_hosts(Rule("binpack"), ["a"], lambda n: cap.nodes[n].labels, [cpu_pod]) == []


@pytest.mark.parametrize("c", [
    case("an op gets its accelerator flavor's placement", flavor="spread", config="binpack", policy="spread"),
    case("a flavor that sets none leaves the configuration's", flavor=None, config="spread", policy="spread"),
    case("the configuration's default is binpack", flavor=None, config=None, policy="binpack"),
], ids=case_name)
def test_which_placement_an_op_gets(c):
    b = book(queue("q", gpus={"a100": 4}), flavors=[msgspec.structs.replace(gpu_flavor("a100"), placement=c.flavor)])
    if c.config:
        b.config = msgspec.structs.replace(b.config, placement=c.config)
    assert placement.rule_of(b, {GPU: "a100"}).policy == c.policy
    assert placement.rule_of(b, {}).policy == (c.config or "binpack")  # a queue without flavors


def test_each_pod_prefers_its_node_s_hostname_and_first_fit_prefers_none():
    cap = cluster(a=(8, 0), b=(8, 0))
    labels = {"a": {HOST: "host-a"}, "b": {}}.__getitem__
    pods = [{GPU: 1.0}, {GPU: 1.0}]
    assert placement.preferred_hosts(Rule("spread"), ["a", "b"], labels, pods) == ["host-a", ""]
    assert placement.preferred_hosts(Rule("firstFit"), ["a", "b"], labels, pods) == []
    assert placement.preferred_hosts(Rule("binpack"), None, labels, pods) == []
    assert cap.nodes["a"].labels[HOST] == "host-a"


def admitted_on(policy: str, *nodes) -> OperationAdmitted:
    flavor = Flavor(name="a100", node_labels={"nvidia.com/gpu.product": "A100"}, placement=policy)
    b = book(queue("default", gpus={"a100": 16}), flavors=[flavor])
    state = fold(*nodes, queued(op("big").gpus(1, product="A100").build(), op_id="big"))
    (event,) = [d for d in decide(state, b) if isinstance(d, OperationAdmitted)]
    return event


def test_the_admitted_event_carries_the_preferred_host_of_the_node_admission_placed_the_pod_on():
    nodes = [node(n, gpus=g, product="A100", labels={HOST: f"host-{n}"}) for n, g in (("a", 8), ("b", 4))]
    packed = admitted_on("binpack", *nodes)
    assert packed.preferred_hosts == ["host-b"] and packed.node_selector == {"nvidia.com/gpu.product": "A100"}
    assert admitted_on("spread", *nodes).preferred_hosts == ["host-a"]
    assert admitted_on("firstFit", *nodes).preferred_hosts == []


def test_each_pod_of_the_attempt_prefers_its_host_beside_the_op_s_own_affinity():
    own = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
    spec = op("ddp").gpus(1).replicas("worker", 2).affinity(own).build()
    event = msgspec.structs.replace(admitted(spec, op_id="ddp"), preferred_hosts=["host-a", "", "host-b"])
    pods = build_pods(event)
    terms = [p["spec"]["affinity"]["nodeAffinity"][PREFERRED] for p in pods]
    assert [t[-1]["preference"]["matchExpressions"][0]["values"] for t in (terms[0], terms[2])] == [
        ["host-a"], ["host-b"]]
    assert terms[0][-1]["weight"] == 100 and terms[0][-1]["preference"]["matchExpressions"][0]["key"] == HOST
    assert terms[1] == own["nodeAffinity"][PREFERRED]  # "": no preference of admission's for that pod
    for pod in pods:
        assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == \
            own["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert spec.environment.affinity == own  # the op's own spec is left as it was
    plain = build_pods(msgspec.structs.replace(admitted(op("one").gpus(1).build()), preferred_hosts=["host-c"]))
    assert plain[0]["spec"]["affinity"] == {"nodeAffinity": {PREFERRED: [
        {"weight": 100, "preference": {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["host-c"]}]}}]}}


def test_a_placement_opsched_does_not_know_is_refused_naming_the_field(tmp_path):
    from opsched.rules.queues_file import QueuesConfigError, load_queues

    path = tmp_path / "queues.yaml"
    path.write_text("flavors:\n  - {name: a100, nodeLabels: {x: y}, placement: packed}\nqueues:\n  - {name: default}\n")
    with pytest.raises(QueuesConfigError, match=r"Invalid enum value 'packed' - at `\$.flavors\[0\].placement`"):
        load_queues(path)
    path.write_text("placement: spread\nflavors:\n  - {name: a100, nodeLabels: {x: y}, placement: firstFit}\n")
    config = load_queues(path)
    assert config.placement == "spread" and config.flavors[0].placement == "firstFit"


RACK = "topology.kubernetes.io/rack"


def racked(**nodes: tuple[str, int, int]) -> Capacity:
    """``racked(a=("r1", 8, 3))``: node a in rack r1 with 8 GPUs, 3 of them in use ("" rack: no label)."""
    cap = Capacity.of({name: NodeInfo.of(node(name, gpus=total, labels={HOST: name, **({RACK: rack} if rack else {})}))
                       for name, (rack, total, _) in nodes.items()})
    for name, (_, _, busy) in nodes.items():
        cap.take(name, {GPU: float(busy)})
    return cap


@pytest.mark.parametrize("c", [
    case("a gang goes within the one rack that can take it all, though another node by name comes first",
         nodes={"a": ("r1", 8, 6), "b": ("r2", 8, 4), "c": ("r2", 8, 4)}, pods=[4, 4], policy="firstFit",
         placed=["b", "c"]),
    case("binpack picks the tightest rack that fits the whole gang",
         nodes={"a": ("r1", 8, 0), "b": ("r1", 8, 0), "c": ("r2", 8, 4), "d": ("r2", 8, 4)}, pods=[4, 4],
         policy="binpack", placed=["c", "d"]),
    case("spread picks the roomiest rack",
         nodes={"a": ("r1", 8, 0), "b": ("r1", 8, 0), "c": ("r2", 8, 4), "d": ("r2", 8, 4)}, pods=[4, 4],
         policy="spread", placed=["a", "b"]),
    case("a gang no rack can take whole is placed across racks rather than not at all",
         nodes={"a": ("r1", 8, 4), "b": ("r2", 8, 4)}, pods=[4, 4], policy="binpack", placed=["a", "b"]),
    case("nodes without the label belong to no rack but still take a gang that fits no rack",
         nodes={"a": ("r1", 8, 6), "x": ("", 8, 0)}, pods=[4, 4], policy="binpack", placed=["x", "x"]),
    case("a single pod is placed by the policy alone",
         nodes={"a": ("r1", 8, 6), "b": ("r2", 8, 0)}, pods=[2], policy="binpack", placed=["a"]),
], ids=case_name)
def test_a_gang_is_kept_within_one_topology_domain_when_one_can_take_it(c):
    pods = [{GPU: float(g)} for g in c.pods]
    assert racked(**c.nodes).place(pods, {}, [], None, Rule(c.policy, RACK)) == c.placed


def test_a_gang_in_a_domain_prefers_its_nodes_even_under_first_fit_and_its_flavor_names_the_key():
    rule = Rule("firstFit", RACK)
    pods = [{GPU: 4.0}, {GPU: 4.0}]
    assert placement.preferred_hosts(rule, ["b", "c"], lambda n: {HOST: n}, pods) == ["b", "c"]
    assert placement.preferred_hosts(rule, ["b"], lambda n: {HOST: n}, pods[:1]) == []  # one pod: no gang
    flavor = msgspec.structs.replace(gpu_flavor("a100"), topology_key=RACK, placement="spread")
    b = book(queue("q", gpus={"a100": 4}), flavors=[flavor])
    assert placement.rule_of(b, {GPU: "a100"}) == Rule("spread", RACK)
