"""Node pools (``rules.node_pools``): leaving taints, reach, which pool a node is of, a node's token."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from opsched.proto.queues import Flavor, FlavorQuota, NodePool, Queue, QueuesConfig, ResourceQuota
from opsched.rules.node_pools import (
    LEAVING_TAINTS,
    leaving,
    membership,
    pool_of,
    pools_of,
    reach,
    shape_labels,
    token_of,
)

GPU = "nvidia.com/gpu"
A100 = {"nvidia.com/gpu.product": "A100"}


def a100_pool(**kw) -> NodePool:
    return NodePool(name=kw.pop("name", "a100"), allocatable={GPU: 8, "cpu": 96}, max_nodes=kw.pop("max_nodes", 4),
                    **kw)


def config(*flavors: Flavor, queues: list[Queue] | None = None) -> QueuesConfig:
    return QueuesConfig(flavors=list(flavors), queues=queues or [Queue(name="default")])


# ---- leaving -------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", LEAVING_TAINTS)
@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_a_blocking_taint_of_each_autoscaler_marks_the_node_leaving(key, effect):
    assert leaving([{"key": key, "value": "1700000000", "effect": effect}])


@pytest.mark.parametrize("key", LEAVING_TAINTS)
def test_a_prefer_no_schedule_taint_does_not_mark_the_node_leaving(key):
    # cluster-autoscaler's DeletionCandidateOfClusterAutoscaler is PreferNoSchedule: a candidate, not yet leaving
    assert not leaving([{"key": key, "effect": "PreferNoSchedule"}])


def test_other_taints_do_not_mark_the_node_leaving():
    assert not leaving([])
    assert not leaving([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    assert not leaving([{"key": "DeletionCandidateOfClusterAutoscaler", "effect": "PreferNoSchedule"}])


# ---- reach ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("existing, blocked, expected", [
    (0, False, 4),   # an empty pool may add maxNodes
    (1, False, 3),
    (4, False, 0),   # at max
    (6, False, 0),   # above max (maxNodes lowered): never negative
    (0, True, 0),    # its budget spent: no new node at all
    (2, True, 0),
])
def test_reach_is_max_nodes_minus_existing_and_none_while_the_budget_is_spent(existing, blocked, expected):
    assert reach(a100_pool(max_nodes=4), existing, blocked) == expected


def test_leaving_nodes_count_in_existing_so_they_take_a_slot_of_max_nodes():
    # one live node and one leaving: the caller counts both (existing = 2) and 2 of 4 remain
    assert reach(a100_pool(max_nodes=4), existing=2, budget_blocked=False) == 2


# ---- membership and pool_of ----------------------------------------------------------------------

def test_membership_and_a_new_nodes_labels_are_the_flavor_labels_and_the_pool_labels():
    flavor = Flavor(name="a100", node_labels=A100, pool=a100_pool(node_labels={"karpenter.sh/nodepool": "gpu"}))
    assert flavor.pool is not None
    expected = {**A100, "karpenter.sh/nodepool": "gpu"}
    assert membership(flavor, flavor.pool) == expected
    assert shape_labels(flavor, flavor.pool) == expected


def test_pools_of_lists_only_flavors_with_a_pool_in_order():
    with_pool = Flavor(name="a100", node_labels=A100, pool=a100_pool())
    t4 = Flavor(name="t4", node_labels={"nvidia.com/gpu.product": "T4"}, pool=a100_pool(name="t4"))
    cfg = config(with_pool, Flavor(name="cpu"), t4)
    assert [(f.name, p.name) for f, p in pools_of(cfg)] == [("a100", "a100"), ("t4", "t4")]


def test_a_node_is_of_the_pool_when_its_labels_hold_the_flavor_and_pool_labels():
    cfg = config(Flavor(name="a100", node_labels=A100, pool=a100_pool(node_labels={"karpenter.sh/nodepool": "gpu"})))
    assert pool_of(cfg, "", {**A100, "karpenter.sh/nodepool": "gpu", "kubernetes.io/hostname": "n1"}) == "a100"
    assert pool_of(cfg, "", A100) == ""  # not the pool's own label: an A100 node of another group
    assert pool_of(cfg, "", {"karpenter.sh/nodepool": "gpu"}) == ""
    assert pool_of(cfg, "", {**A100, "karpenter.sh/nodepool": "cpu"}) == ""


def test_a_node_is_of_the_pool_only_in_the_pools_agents_cluster():
    own = config(Flavor(name="a100", node_labels=A100, agent="west", pool=a100_pool()))
    assert pool_of(own, "west", A100) == "a100"
    assert pool_of(own, "", A100) == ""
    assert pool_of(own, "east", A100) == ""
    # a flavor without an agent: the agents of the queues whose quota names it
    quota = [ResourceQuota(resource=GPU, flavors=[FlavorQuota(name="a100", nominal=8)])]
    by_queue = config(Flavor(name="a100", node_labels=A100, pool=a100_pool()),
                      queues=[Queue(name="q", agent="east", resources=quota), Queue(name="default")])
    assert pool_of(by_queue, "east", A100) == "a100"
    assert pool_of(by_queue, "", A100) == ""
    # nobody names it: the default agent's
    assert pool_of(config(Flavor(name="a100", node_labels=A100, pool=a100_pool())), "", A100) == "a100"


def test_the_first_matching_pool_wins():
    cfg = config(Flavor(name="spot", node_labels={**A100, "spot": "true"}, pool=a100_pool(name="spot")),
                 Flavor(name="a100", node_labels=A100, pool=a100_pool()))
    assert pool_of(cfg, "", {**A100, "spot": "true"}) == "spot"
    assert pool_of(cfg, "", A100) == "a100"


# ---- token_of ------------------------------------------------------------------------------------

def test_a_nodes_token_is_stable_and_tells_apart_agents_names_and_lives():
    t0 = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)
    t1 = datetime(2026, 11, 28, 13, 0, tzinfo=timezone.utc)
    token = token_of("", "a100-0", t0)
    assert token == token_of("", "a100-0", t0)
    assert token.startswith("node-") and len(token) == len("node-") + 20
    assert len({token, token_of("west", "a100-0", t0), token_of("", "a100-1", t0), token_of("", "a100-0", t1)}) == 4


def test_a_pool_budget_never_covers_an_op_even_of_a_project_of_the_same_name():
    from opsched.proto.queues import Budget
    from opsched.services.admission.policies.budgets import covering
    budgets = [Budget(scope="pool", name="a100", window="day", money=10),
               Budget(scope="project", name="a100", window="day", money=20)]
    assert [b.scope for b in covering(budgets, "a100", "a100")] == ["project"]
