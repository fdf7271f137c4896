"""`opsched queues`' fragmentation figure (``services.admission.fragmentation``): accelerators free per flavor, and
those stranded on nodes with less free than the largest waiting pod of that flavor asks."""
from __future__ import annotations

from opsched.proto.queries import Fragmentation
from opsched.services.admission import queries
from opsched.services.admission.fragmentation import fragmentation
from opsched.services.admission.model.nodes import NodeInfo
from opsched.services.admission.state.capacity import Capacity
from tests.builders import GPU, GPU_PRODUCT, book, gpu_flavor, node, op, queue
from tests.builders.admission import fold, queued
from tests.unit.admission_scenarios import decide


def cluster(*nodes) -> Capacity:
    return Capacity.of({n.node: NodeInfo.of(n) for n in nodes})


def waiting(*gpus: int, product: str | None = None) -> list:
    state = fold(*[queued(op(f"w{i}").gpus(g, product=product).build(), op_id=f"w{i}") for i, g in enumerate(gpus)])
    return list(state.ops.values())


def test_free_gpus_on_nodes_with_less_free_than_the_largest_waiting_pod_asks_are_stranded():
    cap = cluster(*(node(n, gpus=8) for n in "abc"))
    cap.take("a", {GPU: 5.0})
    cap.take("c", {GPU: 6.0})
    b = book(queue("q"))
    assert fragmentation(cap, b, waiting(1, 4)) == [
        Fragmentation(resource=GPU, flavor="", nodes=3, free=13.0, stranded=5.0, largest_waiting=4.0)]
    assert fragmentation(cap, b, waiting(8))[0].stranded == 5.0  # b's 8 are free for it
    assert fragmentation(cap, b, [])[0].stranded == 0.0  # nothing waits: nothing is stranded
    assert fragmentation(cluster(), b, waiting(4)) == []  # no nodes known yet


def test_each_flavor_counts_its_own_nodes_and_the_pods_that_may_land_there():
    b = book(queue("q", gpus={"a100": 16, "t4": 4}), flavors=[gpu_flavor("a100", "A100"), gpu_flavor("t4", "T4")])
    cap = cluster(node("a1", gpus=8, product="A100"), node("a2", gpus=8, product="A100"),
                  node("t1", gpus=4, product="T4"))
    cap.take("a1", {GPU: 6.0})
    cap.take("t1", {GPU: 1.0})
    figures = {f.flavor: f for f in fragmentation(cap, b, waiting(8, product="T4"))}
    assert (figures["a100"].nodes, figures["a100"].free, figures["a100"].stranded) == (2, 10.0, 0.0)
    assert (figures["t4"].free, figures["t4"].stranded, figures["t4"].largest_waiting) == (3.0, 3.0, 8.0)
    assert figures["a100"].largest_waiting == 0.0  # a pod pinned to T4 cannot use A100 nodes


def test_the_queues_answer_carries_the_figure_as_admission_sees_the_cluster():
    b = book(queue("default", gpus={"a100": 16}), flavors=[gpu_flavor("a100", "A100")])
    state = fold(node("a", gpus=8, product="A100"), node("b", gpus=8, product="A100"),
                 queued(op("six").gpus(6, product="A100").build(), op_id="six"),
                 queued(op("four").gpus(4, product="A100").build(), op_id="four"))
    decide(state, b)  # four on a, six on b (neither fits beside the other): nothing waits
    (figure,) = queries.queues(state, b).fragmentation
    assert (figure.flavor, figure.free, figure.largest_waiting) == ("a100", 6.0, 0.0)
    fold(queued(op("eight").gpus(8, product="A100").build(), op_id="eight"), state=state)
    (figure,) = queries.queues(state, b).fragmentation
    assert (figure.stranded, figure.largest_waiting) == (6.0, 8.0)
    assert GPU_PRODUCT in b.flavors["a100"].node_labels
