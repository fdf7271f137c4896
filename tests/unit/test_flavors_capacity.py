"""Flavor assignment (candidates, combos, placement) and node capacity (find, ever, take, taints)."""
from __future__ import annotations

import msgspec
import pytest

from opsched.services.admission.model.nodes import NodeInfo, describe, tolerates
from opsched.services.admission.policies.flavors import candidates, combos, placement
from opsched.services.admission.state.capacity import Capacity
from tests.builders import (
    GPU,
    GPU_PRODUCT,
    book,
    case,
    case_name,
    first_fit,
    gpu_flavor,
    node,
    queue,
    taint,
)

GPU_QUEUE = book(queue("gpu", gpus={"h100": 2, "a100": 4, "default": 8}),
                 flavors=[gpu_flavor("spot-a100", "A100", **{"cloud/spot": "true"})])


# ---- candidates -------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("an op without a node selector may use every flavor, in the queue's order",
         selector={}, flavors=["h100", "a100", "default"]),
    case("an op pinned to A100 skips the H100 flavor",
         selector={GPU_PRODUCT: "A100"}, flavors=["a100", "default"]),
    case("an op pinned to H100 skips the A100 flavor",
         selector={GPU_PRODUCT: "H100"}, flavors=["h100", "default"]),
    case("a selector on a label no flavor sets contradicts none",
         selector={"team": "vision"}, flavors=["h100", "a100", "default"]),
    case("an op pinned to a product no flavor offers keeps only the label-free default flavor",
         selector={GPU_PRODUCT: "T4"}, flavors=["default"]),
], ids=case_name)
def test_flavor_candidates_skip_flavors_contradicting_the_node_selector(c):
    assert candidates(GPU_QUEUE, "gpu", GPU, c.selector) == c.flavors


def test_a_flavor_with_several_labels_is_skipped_when_any_one_contradicts():
    b = book(queue("q", gpus={"spot-a100": 2, "a100": 2}), flavors=[gpu_flavor("spot-a100", "A100", spot="true")])
    assert candidates(b, "q", GPU, {GPU_PRODUCT: "A100", "spot": "false"}) == ["a100"]
    assert candidates(b, "q", GPU, {GPU_PRODUCT: "A100", "spot": "true"}) == ["spot-a100", "a100"]


def test_a_resource_the_queue_sets_no_quota_for_has_no_candidates():
    assert candidates(GPU_QUEUE, "gpu", "amd.com/gpu", {}) == []


# ---- combos -----------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("combos follow the queue's flavor order",
         queue=queue("q", gpus={"h100": 2, "a100": 2}), request={GPU: 1},
         combos=[{GPU: "h100"}, {GPU: "a100"}]),
    case("the same flavors in the other order give the other order",
         queue=queue("q", gpus={"a100": 2, "h100": 2}), request={GPU: 1},
         combos=[{GPU: "a100"}, {GPU: "h100"}]),
    case("every resource with quota is assigned, the first resource varying slowest",
         queue=queue("q", gpus={"h100": 2, "a100": 2}, resources={"cpu": {"default": 64}}),
         request={GPU: 1, "cpu": 4.0}, combos=[{GPU: "h100", "cpu": "default"}, {GPU: "a100", "cpu": "default"}]),
    case("a resource the queue sets no quota for is not assigned",
         queue=queue("q", gpus={"h100": 2}), request={GPU: 1, "memory": 2.0**30}, combos=[{GPU: "h100"}]),
    case("a resource requested at zero is not assigned",
         queue=queue("q", gpus={"h100": 2}, resources={"cpu": {"default": 64}}), request={GPU: 1, "cpu": 0.0},
         combos=[{GPU: "h100"}]),
    case("an op that requests nothing the queue limits gets one empty assignment",
         queue=queue("q", gpus={"h100": 2}), request={"cpu": 1.0}, combos=[{}]),
], ids=case_name)
def test_combos(c):
    assert combos(book(c.queue), "q", c.request, {}) == c.combos


def test_combos_skip_flavors_contradicting_the_selector():
    b = book(queue("q", gpus={"h100": 2, "a100": 2}))
    assert combos(b, "q", {GPU: 1}, {GPU_PRODUCT: "A100"}) == [{GPU: "a100"}]
    assert combos(b, "q", {GPU: 1}, {GPU_PRODUCT: "T4"}) == []  # a limited resource with no flavor left


# ---- placement --------------------------------------------------------------------------------

NO_SCHEDULE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SPOT = {"key": "cloud/spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


@pytest.mark.parametrize("c", [
    case("the flavor's labels are added to the queue's node selector",
         assignment={GPU: "spot-h100"},
         selector={"pool": "ml", GPU_PRODUCT: "H100", "cloud/spot": "true"}, tolerations=[NO_SCHEDULE_GPU, SPOT]),
    case("the default flavor adds only the queue's own selector and tolerations",
         assignment={GPU: "default"}, selector={"pool": "ml"}, tolerations=[NO_SCHEDULE_GPU]),
    case("a flavor toleration the queue already has is not repeated",
         assignment={GPU: "a100"}, selector={"pool": "ml", GPU_PRODUCT: "A100"}, tolerations=[NO_SCHEDULE_GPU]),
    case("no assignment gives the queue's own placement",
         assignment={}, selector={"pool": "ml"}, tolerations=[NO_SCHEDULE_GPU]),
], ids=case_name)
def test_placement_merges_the_queue_and_flavor_node_selectors_and_tolerations(c):
    b = book(queue("q", gpus={"spot-h100": 1, "a100": 1, "default": 1}, node_selector={"pool": "ml"},
                   tolerations=[NO_SCHEDULE_GPU]),
             flavors=[gpu_flavor("spot-h100", "H100", tolerations=[SPOT], **{"cloud/spot": "true"}),
                      gpu_flavor("a100", tolerations=[NO_SCHEDULE_GPU])])
    selector, tolerations = placement(b, "q", c.assignment)
    assert selector == c.selector
    assert tolerations == c.tolerations


def test_placement_does_not_change_the_queue_config():
    b = book(queue("q", gpus={"h100": 1}, node_selector={"pool": "ml"}))
    placement(b, "q", {GPU: "h100"})
    assert b.queues["q"].node_selector == {"pool": "ml"}


# ---- capacity ---------------------------------------------------------------------------------

def capacity(*nodes) -> Capacity:
    return Capacity.of({n.node: NodeInfo.of(n) for n in nodes})


def test_a_node_observed_is_read_as_numbers():
    info = NodeInfo.of(node("gpu-a", gpus=2, product="A100", cpu="500m", memory="1Gi"))
    assert info.allocatable == {"cpu": 0.5, "memory": 2.0**30, GPU: 2.0}
    assert info.labels == {GPU_PRODUCT: "A100", "opsched.io/agent": ""}  # admission's own: the default agent


def test_a_node_quantity_that_does_not_parse_is_left_out():
    bad = msgspec.structs.replace(node("gpu-a"), allocatable={GPU: "two", "cpu": "8"})
    assert NodeInfo.of(bad).allocatable == {"cpu": 8.0}


@pytest.mark.parametrize("c", [
    case("the first node by name with room is picked",
         nodes=[node("gpu-b", gpus=4), node("gpu-a", gpus=4)], request={GPU: 2}, selector={}, node="gpu-a"),
    case("a node without room is passed over for one with room",
         nodes=[node("gpu-a", gpus=1), node("gpu-b", gpus=4)], request={GPU: 2}, selector={}, node="gpu-b"),
    case("a node whose labels do not match the selector is passed over",
         nodes=[node("gpu-a", gpus=8, product="A100"), node("gpu-b", gpus=8, product="H100")],
         request={GPU: 8}, selector={GPU_PRODUCT: "H100"}, node="gpu-b"),
    case("no node has room",
         nodes=[node("gpu-a", gpus=1), node("gpu-b", gpus=1)], request={GPU: 2}, selector={}, node=None),
    case("an unschedulable node is skipped",
         nodes=[node("gpu-a", gpus=8, schedulable=False), node("gpu-b", gpus=8)], request={GPU: 1}, selector={},
         node="gpu-b"),
    case("a node without the resource at all has no room for it",
         nodes=[node("cpu-a")], request={GPU: 1}, selector={}, node=None),
    case("every resource of the request must fit on the same node",
         nodes=[node("gpu-a", gpus=4, cpu="2"), node("gpu-b", gpus=1, cpu="64")],
         request={GPU: 2, "cpu": 8.0}, selector={}, node=None),
], ids=case_name)
def test_find_picks_a_node_with_room(c):
    assert first_fit(capacity(*c.nodes), c.request, c.selector, []) == c.node


@pytest.mark.parametrize("c", [
    case("a node big enough but busy could still take it some day",
         nodes=[node("gpu-a", gpus=8, product="H100")], busy={"gpu-a": 8}, request={GPU: 8}, ever=True),
    case("no node is big enough",
         nodes=[node("gpu-a", gpus=4, product="H100"), node("gpu-b", gpus=4, product="H100")], busy={},
         request={GPU: 8}, ever=False),
    case("the big node has another product",
         nodes=[node("gpu-a", gpus=8, product="A100"), node("gpu-b", gpus=2, product="H100")], busy={},
         request={GPU: 8}, ever=False),
], ids=case_name)
def test_ever_says_whether_any_node_could_take_the_request(c):
    cap = capacity(*c.nodes)
    for name, used in c.busy.items():
        cap.take(name, {GPU: used})
    assert cap.ever(c.request, {GPU_PRODUCT: "H100"}, []) is c.ever


def test_take_reduces_the_free_capacity_of_that_node_only():
    cap = capacity(node("gpu-a", gpus=4), node("gpu-b", gpus=4))
    cap.take("gpu-a", {GPU: 3, "cpu": 2.0, "example.com/fpga": 1})
    assert cap.free["gpu-a"][GPU] == 1 and cap.free["gpu-a"]["cpu"] == 62
    assert "example.com/fpga" not in cap.free["gpu-a"]
    assert cap.free["gpu-b"][GPU] == 4
    assert first_fit(cap, {GPU: 2}, {}, []) == "gpu-b"
    assert cap.nodes["gpu-a"].allocatable[GPU] == 4  # allocatable is not touched


def test_take_of_no_node_or_an_unknown_node_changes_nothing():
    cap = capacity(node("gpu-a", gpus=4))
    cap.take(None, {GPU: 4})
    cap.take("ghost", {GPU: 4})
    assert cap.free == {"gpu-a": {"cpu": 64.0, "memory": 256 * 2.0**30, GPU: 4.0}}


def test_capacity_is_known_only_once_a_node_is_observed():
    assert not capacity().known
    assert capacity(node("gpu-a")).known


# ---- taints and tolerations -------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a NoSchedule taint blocks an op without tolerations",
         taints=[taint("gpu", "true")], tolerations=[], ok=False),
    case("a NoExecute taint blocks too",
         taints=[taint("gpu", "true", "NoExecute")], tolerations=[], ok=False),
    case("a PreferNoSchedule taint does not block",
         taints=[taint("gpu", "true", "PreferNoSchedule")], tolerations=[], ok=True),
    case("an Equal toleration with the same key and value tolerates",
         taints=[taint("gpu", "true")], tolerations=[{"key": "gpu", "operator": "Equal", "value": "true"}], ok=True),
    case("an Equal toleration is the default operator",
         taints=[taint("gpu", "true")], tolerations=[{"key": "gpu", "value": "true"}], ok=True),
    case("an Equal toleration with another value does not tolerate",
         taints=[taint("gpu", "true")], tolerations=[{"key": "gpu", "operator": "Equal", "value": "false"}],
         ok=False),
    case("an Exists toleration of the key tolerates any value",
         taints=[taint("gpu", "whatever")], tolerations=[{"key": "gpu", "operator": "Exists"}], ok=True),
    case("an Exists toleration of another key does not tolerate",
         taints=[taint("gpu", "true")], tolerations=[{"key": "tpu", "operator": "Exists"}], ok=False),
    case("an Exists toleration without a key tolerates every taint",
         taints=[taint("gpu", "true"), taint("spot", "yes", "NoExecute")], tolerations=[{"operator": "Exists"}],
         ok=True),
    case("a toleration for another effect does not tolerate",
         taints=[taint("gpu", "true", "NoExecute")],
         tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}], ok=False),
    case("a toleration for the same effect tolerates",
         taints=[taint("gpu", "true", "NoExecute")],
         tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}], ok=True),
    case("every blocking taint must be tolerated",
         taints=[taint("gpu", "true"), taint("spot", "yes")], tolerations=[{"key": "gpu", "operator": "Exists"}],
         ok=False),
], ids=case_name)
def test_taints_block_unless_tolerated(c):
    n = node("gpu-a", gpus=2, taints=c.taints)
    assert tolerates(NodeInfo.of(n), c.tolerations) is c.ok
    cap = capacity(n)
    assert (first_fit(cap, {GPU: 1}, {}, c.tolerations) == "gpu-a") is c.ok
    assert cap.ever({GPU: 1}, {}, c.tolerations) is c.ok


# ---- describe ---------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("GPUs of a product", request={GPU: 8.0}, selector={GPU_PRODUCT: "H100"},
         text="8 x nvidia.com/gpu of product H100"),
    case("GPUs of any product", request={GPU: 2.0}, selector={}, text="2 x nvidia.com/gpu"),
    case("only accelerators are named when there are some", request={GPU: 1.0, "cpu": 4.0}, selector={},
         text="1 x nvidia.com/gpu"),
    case("other labels are named after the product", request={GPU: 1.0},
         selector={GPU_PRODUCT: "A100", "pool": "ml"}, text="1 x nvidia.com/gpu of product A100 on nodes labelled pool=ml"),
    case("the GKE accelerator label is a product too", request={"cloud-tpus.google.com/v4": 4.0},
         selector={"cloud.google.com/gke-accelerator": "tpu-v4"}, text="4 x cloud-tpus.google.com/v4 of product tpu-v4"),
    case("without accelerators the plain resources are named", request={"cpu": 2.0}, selector={},
         text="2 cpu"),
], ids=case_name)
def test_describe_says_what_is_requested(c):
    assert describe(c.request, c.selector) == c.text
