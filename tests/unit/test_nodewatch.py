"""Node facts: a Kubernetes node → NodeObserved, and only changes are published."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from types import SimpleNamespace

import msgspec
import pytest

from opsched.bus.addressing import cloudevent_headers
from opsched.proto import codec, subjects
from opsched.proto.cluster import NodeObserved, NodeRemoved
from opsched.services.dispatcher.kobjects import NODES, Node, ObjectMeta, Taint
from opsched.services.dispatcher.nodewatch import (
    NodeFacts,
    NodeWatcher,
    fact_of,
    is_schedulable,
    observed,
)
from tests.builders import GPU, GPU_PRODUCT, T0, case, case_name, t
from tests.builders.clock import FakeClock

HEARTBEAT = datetime(2026, 1, 1, 11, 0, tzinfo=timezone.utc)


def node(name: str = "gpu-a", *, rv: str = "1", gpus: str = "2", product: str = "A100",
         ready: str | None = "True", unschedulable: bool | None = None, taints: list[Taint] | None = None,
         heartbeat: datetime = HEARTBEAT, labels: dict[str, str] | None = None,
         created: datetime | None = None) -> Node:
    """A node as the API server answers it (JSON, heartbeats and all), decoded as the watch decodes it."""
    beat = heartbeat.isoformat().replace("+00:00", "Z")
    conditions = [{"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": beat}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready, "lastHeartbeatTime": beat})
    return NODES.object.decode(msgspec.json.encode({
        "metadata": {"name": name, "resourceVersion": rv, "labels": {GPU_PRODUCT: product, **(labels or {})},
                     **({"creationTimestamp": created.isoformat().replace("+00:00", "Z")} if created else {})},
        "spec": {"unschedulable": unschedulable, "taints": taints},
        "status": {"allocatable": {GPU: gpus, "cpu": "32", "memory": "256Gi"}, "conditions": conditions},
    }))


# ---- translation ----------------------------------------------------------------------------------

def test_a_node_becomes_its_labels_allocatable_taints_and_schedulability():
    taints = [Taint(key=GPU, effect="NoSchedule"), Taint(key="pool", value="spot", effect="NoExecute")]
    event = observed(node("gpu-a", taints=taints), T0)
    assert event == NodeObserved(
        node="gpu-a", at=T0,
        labels={GPU_PRODUCT: "A100"},
        allocatable={GPU: "2", "cpu": "32", "memory": "256Gi"},
        taints=[{"key": GPU, "value": "", "effect": "NoSchedule"},
                {"key": "pool", "value": "spot", "effect": "NoExecute"}],
        schedulable=True,
    )


def test_a_node_without_status_or_spec_yet_is_observed_as_not_schedulable():
    event = observed(Node(metadata=ObjectMeta(name="fresh")), T0)
    assert event == NodeObserved(node="fresh", at=T0, labels={}, allocatable={}, taints=[], schedulable=False)


@pytest.mark.parametrize("c", [
    case("a ready node is schedulable", kw={}, expected=True),
    case("a ready node explicitly not cordoned is schedulable", kw={"unschedulable": False}, expected=True),
    case("a cordoned node is not schedulable", kw={"unschedulable": True}, expected=False),
    case("a node whose Ready condition is False is not schedulable", kw={"ready": "False"}, expected=False),
    case("a node whose Ready condition is Unknown is not schedulable", kw={"ready": "Unknown"}, expected=False),
    case("a node that never reported Ready is not schedulable", kw={"ready": None}, expected=False),
], ids=case_name)
def test_schedulable_means_ready_and_not_cordoned(c):
    assert is_schedulable(node(**c.kw)) is c.expected
    assert observed(node(**c.kw), T0).schedulable is c.expected


def test_the_event_round_trips_on_the_wire():
    event = observed(node(taints=[Taint(key="k", value="v", effect="NoSchedule")]), T0)
    assert codec.decode_cluster(codec.encode(event)) == event


def test_the_cloudevent_subject_of_a_node_fact_is_the_node():
    headers = cloudevent_headers(NodeRemoved(node="gpu-a", at=T0), "node.gpu-a.removed.9", "dispatcher")
    assert headers["ce-subject"] == "gpu-a"
    assert headers["ce-type"] == "io.opsched.node_removed"
    assert headers["ce-id"] == "node.gpu-a.removed.9"


# ---- change detection ---------------------------------------------------------------------------

def publish_all(facts: NodeFacts, *updates: tuple[str, Node]) -> list[tuple[object, str]]:
    """Feed watch events; 'publish' (mark) whatever the facts say to publish; return it."""
    out = []
    for i, (kind, n) in enumerate(updates):
        decided = facts.on_node(kind, n, t(i))
        if decided is not None:
            facts.mark(decided[0])
            out.append(decided)
    return out


def test_the_same_fact_twice_is_published_once():
    out = publish_all(NodeFacts(), ("ADDED", node(rv="1")), ("MODIFIED", node(rv="1")))
    assert [type(e) for e, _ in out] == [NodeObserved]


def test_a_heartbeat_only_update_is_not_published():
    later = datetime(2026, 1, 1, 11, 5, tzinfo=timezone.utc)
    out = publish_all(NodeFacts(), ("ADDED", node(rv="1")), ("MODIFIED", node(rv="2", heartbeat=later)))
    assert len(out) == 1


@pytest.mark.parametrize("c", [
    case("a label added", kw={"labels": {"pool": "spot"}}),
    case("allocatable changed", kw={"gpus": "1"}),
    case("a taint added", kw={"taints": [Taint(key="maintenance", effect="NoSchedule")]}),
    case("the node cordoned", kw={"unschedulable": True}),
    case("the node NotReady", kw={"ready": "False"}),
], ids=case_name)
def test_a_changed_fact_is_published_again(c):
    out = publish_all(NodeFacts(), ("ADDED", node(rv="1")), ("MODIFIED", node(rv="2", **c.kw)))
    assert len(out) == 2
    assert out[0][1] != out[1][1]


def test_a_fact_that_flips_back_gets_a_new_message_id_so_jetstream_does_not_drop_it():
    out = publish_all(NodeFacts(), ("ADDED", node(rv="1")), ("MODIFIED", node(rv="2", unschedulable=True)),
                      ("MODIFIED", node(rv="3")))
    assert [e.schedulable for e, _ in out] == [True, False, True]
    assert len({mid for _, mid in out}) == 3


def test_the_message_id_is_deterministic_for_one_version_of_a_node():
    a = NodeFacts().on_node("ADDED", node("gpu-a", rv="7"), T0)
    b = NodeFacts().on_node("MODIFIED", node("gpu-a", rv="7"), t(30))
    assert a is not None and b is not None
    assert a[1] == b[1]
    assert a[1].startswith("node.gpu-a.7.") and a[1].endswith(fact_of(a[0])[:16])


def test_a_deleted_node_is_removed_and_a_recreated_one_observed_again():
    out = publish_all(NodeFacts(), ("ADDED", node(rv="1")), ("DELETED", node(rv="2")), ("ADDED", node(rv="3")))
    assert [type(e) for e, _ in out] == [NodeObserved, NodeRemoved, NodeObserved]
    assert out[1][0] == NodeRemoved(node="gpu-a", at=t(1), labels={GPU_PRODUCT: "A100"},
                                    allocatable={GPU: "2", "cpu": "32", "memory": "256Gi"})
    assert out[1][1] == "node.gpu-a.removed.2"


CREATED = datetime(2026, 1, 1, 9, 0, tzinfo=timezone.utc)


def test_a_node_fact_carries_its_creation_time():
    assert observed(node(created=CREATED), T0).created == CREATED
    assert observed(node(), T0).created is None  # a node object without it (never from the API server)


def test_a_deleted_node_carries_its_last_labels_allocatable_and_creation_time():
    facts = NodeFacts("east")
    facts.on_node("ADDED", node(created=CREATED, labels={"pool": "a100"}), T0)
    (event, _mid) = facts.on_node("DELETED", node(rv="7", created=CREATED, labels={"pool": "a100"}), t(3))
    assert event == NodeRemoved(node="gpu-a", at=t(3), agent="east", created=CREATED,
                                labels={GPU_PRODUCT: "A100", "pool": "a100"},
                                allocatable={GPU: "2", "cpu": "32", "memory": "256Gi"})


def test_a_node_gone_at_a_relist_carries_its_last_published_fact():
    facts = NodeFacts()
    facts.seed([observed(node("gpu-b", created=CREATED), T0)])
    (event, _mid), = facts.gone([], "40", t(1))
    assert (event.created, event.labels, event.allocatable["cpu"]) == (CREATED, {GPU_PRODUCT: "A100"}, "32")


def test_facts_seeded_from_the_stream_are_not_republished():
    facts = NodeFacts()
    facts.seed([observed(node("gpu-a"), T0), observed(node("gpu-b"), T0), NodeRemoved(node="gpu-b", at=t(1))])
    assert facts.on_node("MODIFIED", node("gpu-a", rv="99"), t(5)) is None
    assert facts.on_node("MODIFIED", node("gpu-b", rv="99"), t(5)) is not None


def test_a_relist_removes_the_nodes_deleted_while_nobody_watched():
    facts = NodeFacts()
    facts.seed([observed(node("gpu-a"), T0), observed(node("gpu-b"), T0)])
    (removed, mid), = facts.gone(["gpu-a", "gpu-c"], "40", t(1))
    assert removed == NodeRemoved(node="gpu-b", at=t(1), labels={GPU_PRODUCT: "A100"},
                                  allocatable={GPU: "2", "cpu": "32", "memory": "256Gi"})
    assert mid == "node.gpu-b.removed.40"


# ---- the watcher hands its decisions to the bus -------------------------------------------------

class FakeCore:
    def __init__(self, *nodes: Node) -> None:
        self.nodes = list(nodes)

    def list_node(self, **_kwargs) -> SimpleNamespace:  # _request_timeout, _preload_content=False: raw JSON
        return SimpleNamespace(data=msgspec.json.encode({"metadata": {"resourceVersion": "10"}, "items": self.nodes}))


class FakeLog:
    def __getattr__(self, _name):
        return lambda *a, **kw: None


async def test_a_list_publishes_each_node_once_on_its_own_subject_and_removes_the_vanished():
    published: list[tuple[object, str, str]] = []

    async def publish(message, *, subject, msg_id):
        published.append((message, subject, msg_id))
        return SimpleNamespace(seq=len(published))

    core = FakeCore(node("gpu-a"), node("gpu.b"))
    watcher = NodeWatcher(core, publish, FakeClock(T0), FakeLog())
    watcher.facts.seed([observed(node("gone"), T0)])
    watcher._loop = asyncio.get_running_loop()
    assert await asyncio.to_thread(watcher._list) == "10"
    await asyncio.to_thread(watcher._list)  # nothing changed: nothing more

    assert [(type(m).__name__, m.node, s) for m, s, _ in published] == [
        ("NodeObserved", "gpu-a", subjects.node("gpu-a")),
        ("NodeObserved", "gpu.b", "cluster.node.gpu_b"),
        ("NodeRemoved", "gone", subjects.node("gone")),
    ]
