"""Admission onto node pools that scale from zero: the nodes a pool may still add count as room (virtual nodes), real
nodes first; a gang fits the pool's maxNodes at once or never; a pool at maxNodes or with its budget spent waits."""
from __future__ import annotations

from dataclasses import fields
from datetime import timedelta

import pytest

from opsched.proto.events import BudgetExceeded, OperationAdmitted, OperationRejected
from opsched.proto.queues import NodePool
from opsched.services.admission import cycle, queries
from opsched.services.admission.state.admission_state import AdmissionState, OpRecord, snapshot_of
from opsched.services.admission.state.snapshot import same
from opsched.view import OpsView
from tests.builders import GPU, book, dispatched, fold, gpu_flavor, node, op, queue, queued, running, t, taint

NS = "opsched"
CPU_NODE = node("cpu-0", cpu="8")


def pool_book(max_nodes: int = 4, gpus_per_node: int = 8, placement: str | None = None, **pool):
    flavor = gpu_flavor("a100")
    flavor.pool = NodePool(name="a100", allocatable={GPU: gpus_per_node, "cpu": 96, "memory": "1000Gi"},
                           max_nodes=max_nodes, provisioning_seconds=60, provisioning_timeout_seconds=600, **pool)
    flavor.placement = placement
    return book(queue("gpu", gpus={"a100": 64}), flavors=[flavor])


def single(op_id: str, gpus: int, at: float = 0) -> list:
    return queued(op(op_id).gpus(gpus).build(), op_id=op_id, queue="gpu", at=t(at))


def gang(op_id: str, pods: int, gpus: int = 1) -> list:
    return queued(op(op_id).gpus(gpus).replicas("worker", pods - 1).build(), op_id=op_id, queue="gpu", at=t(0))


def a100(name: str, gpus: int = 8, **kw):
    return node(name, gpus=gpus, product="A100", **kw)


def decide(state: AdmissionState, b, now: float = 1) -> list:
    return cycle.decide(state, b, t(now), NS)


def admitted(decisions) -> dict[str, OperationAdmitted]:
    return {d.op_id: d for d in decisions if isinstance(d, OperationAdmitted)}


def test_an_op_onto_a_pool_with_no_node_is_admitted_waiting_for_one():
    state = fold(CPU_NODE, single("x", 8))
    out = admitted(decide(state, pool_book()))
    assert out["x"].provisioning == ["a100"]
    assert out["x"].provisioning_timeout_s == 600
    assert out["x"].preferred_hosts == []  # a new node has no name yet
    assert state.ops["x"].provisioning == {"a100": 1} and state.ops["x"].provisioning_since == t(1)


def test_an_op_onto_a_node_that_exists_waits_for_none():
    state = fold(CPU_NODE, a100("a100-0"), single("x", 8))
    out = admitted(decide(state, pool_book()))
    assert out["x"].provisioning == [] and out["x"].provisioning_timeout_s is None
    assert state.ops["x"].provisioning == {}


@pytest.mark.parametrize("placement", ["binpack", "spread", "firstFit"])
def test_a_real_node_with_room_is_preferred_over_a_new_one(placement):
    # a100-0 has 2 of 8 free, so spread would pick an empty new node were virtual nodes not last
    b = pool_book(placement=placement)
    state = fold(CPU_NODE, a100("a100-0"), single("big", 6))
    assert admitted(decide(state, b))["big"].provisioning == []
    fold(running("big", at=t(1), node="a100-0"), single("x", 2, at=1), state=state)
    assert admitted(decide(state, b, now=2))["x"].provisioning == []


def test_a_gang_needing_more_nodes_than_max_nodes_is_unfittable_and_rejected():
    state = fold(CPU_NODE, gang("g", 3))
    decisions = decide(state, pool_book(max_nodes=2, gpus_per_node=1))
    rejected = [d for d in decisions if isinstance(d, OperationRejected)]
    assert [d.op_id for d in rejected] == ["g"]
    assert "a gang of 3 pods (1 x nvidia.com/gpu each) in pool a100 (maxNodes 2)" in rejected[0].message


def test_a_gang_that_fits_max_nodes_is_admitted_onto_as_many_new_nodes():
    state = fold(CPU_NODE, gang("g", 3))
    out = admitted(decide(state, pool_book(max_nodes=3, gpus_per_node=1)))
    assert out["g"].provisioning == ["a100", "a100", "a100"]
    assert state.ops["g"].provisioning == {"a100": 3}


def test_a_gang_with_too_few_reachable_nodes_now_waits_all_or_nothing():
    # 2 of the 3 nodes exist, busy; the pool may add 1: the gang of 2 does not go half onto it
    state = fold(CPU_NODE, a100("a100-0", 1), a100("a100-1", 1), single("a", 1), single("b", 1),
                 running("a", node="a100-0"), running("b", node="a100-1"), gang("g", 2))
    decisions = decide(state, pool_book(max_nodes=3, gpus_per_node=1))
    assert "g" not in admitted(decisions)
    assert [r.code for r in state.ops["g"].blocked] == ["no_capacity"]


def test_a_pool_at_max_nodes_waits_with_pool_at_max():
    state = fold(CPU_NODE, a100("a100-0"), single("first", 8), running("first", node="a100-0"), single("x", 8, at=1))
    b = pool_book(max_nodes=1)
    decide(state, b)
    assert "x" not in admitted(decide(state, b, now=2))
    (reason,) = state.ops["x"].blocked
    assert reason.code == "pool_at_max"
    assert reason.message == ("pool a100 is at maxNodes (1/1) and none of its nodes has room for 8 x nvidia.com/gpu "
                              "of product A100")


def test_a_leaving_node_offers_no_room_but_counts_toward_max_nodes():
    leaving = taint("ToBeDeletedByClusterAutoscaler", "1700000000")
    state = fold(CPU_NODE, a100("a100-0", taints=[leaving]), single("x", 8))
    decisions = decide(state, pool_book(max_nodes=1))
    assert "x" not in admitted(decisions)
    (reason,) = state.ops["x"].blocked
    assert reason.code == "pool_at_max" and "(1/1, 1 leaving)" in reason.message
    # with room for one more node, the op goes onto a new one, not the leaving node
    state = fold(CPU_NODE, a100("a100-0", taints=[leaving]), single("x", 8))
    assert admitted(decide(state, pool_book(max_nodes=2)))["x"].provisioning == ["a100"]


def test_a_gang_is_not_unfittable_because_a_node_of_its_pool_is_leaving():
    """The node leaving is gone by the time the pool grows, and the pool may add one in its place: a gang that fits
    maxNodes nodes waits (pool_at_max now), it is never rejected (seen in the demo: a 3-pod gang onto a pool of at
    most 2 nodes of 2 GPUs while its one idle node was being removed)."""
    leaving = taint("ToBeDeletedByClusterAutoscaler", "1700000000")
    state = fold(CPU_NODE, a100("a100-0", 2, taints=[leaving]), gang("g", 3))
    decisions = decide(state, pool_book(max_nodes=2, gpus_per_node=2))
    assert not [d for d in decisions if isinstance(d, OperationRejected)]
    assert "g" not in admitted(decisions)   # now: one node leaving, room for one new one of 2 GPUs
    assert [r.code for r in state.ops["g"].blocked] == ["no_capacity"]


def spent(at: float, resets: float) -> BudgetExceeded:
    return BudgetExceeded(op_id="pool-a100", at=t(at), scope="pool", name="a100", window="day", limit=10, spent=10,
                          unit="USD", window_start=t(at), resets_at=t(resets))


def test_a_spent_pool_budget_adds_no_node_until_the_window_resets():
    state = fold(CPU_NODE, spent(0, 3600), single("x", 8))
    b = pool_book()
    assert "x" not in admitted(decide(state, b))
    (reason,) = state.ops["x"].blocked
    assert reason.code == "pool_budget"
    assert reason.message.startswith("pool a100 daily budget exhausted: no new nodes until ")
    assert reason.message.endswith("only its 0 node(s) that exist take ops")
    assert t(3600) in state.queues.timers  # a cycle when the window resets
    out = admitted(decide(state, b, now=3601))
    assert out["x"].provisioning == ["a100"]


def test_a_spent_pool_budget_still_lets_its_existing_nodes_take_ops():
    state = fold(CPU_NODE, a100("a100-0"), spent(0, 3600), single("x", 8))
    assert admitted(decide(state, pool_book()))["x"].provisioning == []


def test_the_tracked_snapshot_is_the_fresh_one_with_virtual_nodes():
    state = fold(CPU_NODE, a100("a100-0", 4), single("a", 4), gang("g", 2, gpus=8), single("c", 8))
    b = pool_book(max_nodes=4)
    decide(state, b)
    tracked = state.usage.current(b, t(1))
    assert same(tracked, snapshot_of(state, b, t(1))) == []
    assert any(name.startswith("~") for name in tracked.capacity.nodes)


def test_replaying_admitted_node_observed_and_running_rebuilds_the_same_records():
    state = fold(CPU_NODE, single("x", 8))
    decisions = decide(state, pool_book())
    events = [CPU_NODE, *single("x", 8), *decisions, a100("a100-0", at=t(30)), running("x", at=t(40), node="a100-0")]
    fold(*events[-2:], state=state)
    replayed = fold(*events)
    for s in (state, replayed):
        assert s.ops["x"].provisioning == {} and s.ops["x"].provisioning_since is None
    record = [f.name for f in fields(OpRecord) if f.name != "history"]
    assert {k: getattr(replayed.ops["x"], k) for k in record} == {k: getattr(state.ops["x"], k) for k in record}


def test_a_provisioning_op_is_placed_on_its_new_node_when_it_comes():
    state = fold(CPU_NODE, single("x", 8))
    b = pool_book(max_nodes=1)
    decide(state, b)
    fold(a100("a100-0", at=t(30)), state=state)
    snap = snapshot_of(state, b, t(31))
    assert snap.placed["x"] == ["a100-0"]
    assert not any(name.startswith("~") for name in snap.capacity.nodes)  # the pool is at max: no new node
    assert timedelta(seconds=state.ops["x"].provisioning_timeout_s or 0) == timedelta(seconds=600)


# ---- why and the ops view: waiting_for_node ------------------------------------------------------

WAITING = ("waiting for 1 new node(s) of pool a100 (provisioning since 12:00:01, usually 60s; released and retried "
           "at 12:10:01 if they have not come)")


def test_why_of_an_op_waiting_for_its_node_says_so_until_it_runs():
    state = fold(CPU_NODE, single("x", 8))
    b = pool_book()
    decide(state, b)
    (reason,) = queries.why(state, b, "x", t(5)).reasons
    assert (reason.code, reason.message) == ("waiting_for_node", WAITING)
    fold(dispatched("x", at=t(2)), state=state)
    assert queries.why(state, b, "x", t(5)).reasons[0].message == WAITING
    fold(a100("a100-0", at=t(30)), running("x", at=t(40), node="a100-0"), state=state)
    assert queries.why(state, b, "x", t(41)).reasons == []


def test_the_ops_view_shows_the_wait_for_a_node_until_the_op_runs():
    state = fold(CPU_NODE, single("x", 8))
    (admit,) = [d for d in decide(state, pool_book()) if isinstance(d, OperationAdmitted)]
    view = OpsView()
    for event in [*single("x", 8), admit, dispatched("x", at=t(2))]:
        view.fold(event)
    assert view.rows["x"].reason == WAITING
    view.fold(running("x", at=t(40), node="a100-0"))
    assert view.rows["x"].reason == ""


def test_a_pool_budget_announcement_is_no_op_row():
    view = OpsView()
    assert view.fold(spent(0, 3600)) is None and view.rows == {}


# ---- opsched queues: the pools table ---------------------------------------------------------------

def test_the_queues_answer_lists_each_pool_with_its_nodes_leaving_and_awaited():
    from opsched.tables import queues_table
    leaving = taint("ToBeDeletedByClusterAutoscaler", "1700000000")
    state = fold(CPU_NODE, a100("a100-0", taints=[leaving]), single("x", 8), single("y", 8, at=0.5))
    b = pool_book(max_nodes=4)
    decide(state, b)
    answer = queries.queues(state, b, t(2))
    (p,) = answer.pools
    assert (p.pool, p.flavor, p.nodes, p.leaving, p.min_nodes, p.max_nodes, p.awaited) == ("a100", "a100", 1, 1, 0, 4, 2)
    assert p.oldest_since == t(1) and p.budget_blocked_until is None
    text = queues_table(answer)
    assert "POOL  FLAVOR  NODES  LEAVING  MIN/MAX  AWAITED  OLDEST WAIT" in text
    assert "a100  a100    1      1        0/4      2        12:00:01" in text
    # virtual nodes are no free capacity in the fragmentation table
    assert all(f.free == 0 for f in answer.fragmentation if f.resource == GPU)


def test_pods_sharing_a_new_node_count_it_once():
    """A 3-pod gang of 1 GPU onto a pool of 2-GPU nodes waits for 2 new nodes, not 3 (why, ops, the pools' AWAITED)."""
    state = fold(CPU_NODE, gang("g", 3))
    out = admitted(decide(state, pool_book(max_nodes=2, gpus_per_node=2)))
    assert sorted(out["g"].provisioning) == ["", "a100", "a100"]
    assert state.ops["g"].provisioning == {"a100": 2}
