"""The quota rule over nested cohorts (``policies.quota.available``): on flat cohorts it is exactly the one-level
formula it replaced (kept here as the oracle), over random configurations and usages."""
from __future__ import annotations

import random

import pytest

from opsched.services.admission.policies.quota import Fit, available_to, check
from tests.builders import GPU, book, cohort, queue, quota

H100 = (GPU, "h100")


def old_room(b, usage, q: str) -> float:
    """The one-level rule before nested cohorts: own unused guaranteed part + the cohort pool's free part, capped at
    nominal + borrowingLimit − used, never below 0."""
    pool_cap = pool_used = own_free = 0.0
    members = b.cohorts[b.queues[q].cohort] if b.queues[q].cohort else [q]
    for m in members:
        line = b.quotas[m].get(H100)
        if line is None:
            continue
        guaranteed = line.nominal - line.lendable
        used = usage.get(m, {}).get(H100, 0.0)
        pool_cap += line.lendable
        pool_used += max(0.0, used - guaranteed)
        if m == q:
            own_free = max(0.0, guaranteed - used)
    line = b.quotas[q][H100]
    used = usage.get(q, {}).get(H100, 0.0)
    limit = line.nominal + line.borrowing_limit if line.borrowing_limit is not None else float("inf")
    return max(0.0, min(own_free + max(0.0, pool_cap - pool_used), limit - used))


def random_line(rng: random.Random):
    nominal = rng.randint(0, 6)
    pick = lambda top: rng.choice([None, rng.randint(0, top)])  # noqa: E731
    guaranteed = pick(nominal)
    return quota("h100", nominal, borrow=pick(4), lend=pick(6), guaranteed=guaranteed)


@pytest.mark.parametrize("seed", range(40))
def test_on_flat_cohorts_available_is_the_one_level_formula(seed):
    rng = random.Random(seed)
    queues = [queue(f"q{i}", cohort=rng.choice([None, "lab", "lab", "other"]), gpus=[random_line(rng)])
              for i in range(rng.randint(1, 5))]
    b = book(*queues)
    for _ in range(25):
        usage = {q.name: {H100: float(rng.randint(0, 9))} for q in queues if rng.random() < 0.8}  # over-admission too
        for q in queues:
            assert available_to(b, usage, q.name, H100) == pytest.approx(old_room(b, usage, q.name)), (seed, usage)


# ---- borrowing through two levels: hand-computed ------------------------------------------------------------
#
#          org (4)
#         /       \
#   dept (2, borrow 3)   c (1)
#     /      \
#  a (2)    b (1, lend 0)

def tree(**dept):
    return book(queue("a", cohort="dept", gpus={"h100": 2}), queue("b", cohort="dept", gpus=[quota("h100", 1, lend=0)]),
                queue("c", cohort="org", gpus={"h100": 1}),
                cohorts=[cohort("org", gpus={"h100": 4}), cohort("dept", "org", gpus=[quota("h100", 2, **dept)])])


def used(**n: float) -> dict:
    return {q: {H100: float(v)} for q, v in n.items()}


@pytest.mark.parametrize("usage, queue_name, expected", [
    (used(), "a", 2 + 2 + 4 + 1),  # own 2, dept's 2, org's 4, c's 1; b lends nothing
    (used(), "b", 1 + 2 + 2 + 4 + 1),  # b's own 1 kept locally, a's 2 through dept, dept's 2, org's 4, c's 1
    (used(a=6), "b", 1 + 3),  # b keeps its 1; org has 9 − 6 = 3 left
    (used(c=1), "a", 8),
    (used(a=9), "c", 0),  # the whole tree is used
], ids=["a borrows from dept and org", "b's own part is local", "usage bubbles up past dept", "c uses its own",
        "all used"])
def test_available_walks_up_the_tree(usage, queue_name, expected):
    assert available_to(tree(), usage, queue_name, H100) == expected


def test_a_cohort_borrowing_limit_caps_what_its_subtree_takes_from_above():
    b = tree(borrow=1)  # dept stores 4 (its own 2 + a's 2) in org and may take 1 more
    assert available_to(b, used(a=2), "a", H100) == 2 + 1
    result = check(b, used(a=4), "a", H100, 2)
    assert result.fit == Fit.NO and "borrowing limit 1 of cohort dept reached" in result.reason


def test_a_cohort_lending_limit_keeps_part_of_its_subtree_from_the_rest_of_the_tree():
    b = tree(lend=1)  # dept's subtree is 2 + 2 = 4: it lends 1 up, keeps 3
    assert available_to(b, used(), "c", H100) == 1 + 4 + 1
    assert available_to(b, used(), "a", H100) == 2 + 2 + 4 + 1  # inside dept all of it is seen


def test_a_tree_that_cannot_lend_names_the_cohorts_on_the_way_up():
    result = check(tree(), used(a=6, c=3), "a", H100, 1)
    assert result.fit == Fit.NO
    assert "6/2 used, needs 1" in result.reason and "the cohorts dept → org cannot lend enough" in result.reason


# ---- what check admits never breaks a limit, anywhere in a random tree ---------------------------------------

def random_tree(rng: random.Random):
    """A valid random tree: cohorts c0.. (each parent an earlier cohort or none), queues under them (or none)."""
    from opsched.proto.queues import Cohort, QueuesConfig
    from opsched.rules.queues_file import QueuesConfigError
    from opsched.services.admission.model.queues import compile_book
    from tests.builders import gpu_flavor, resource_quota

    while True:
        cohorts = []
        for i in range(rng.randint(1, 5)):
            parent = rng.choice([None, *[f"c{j}" for j in range(i)]]) if i else None
            line = random_line(rng) if parent else quota("h100", rng.randint(0, 4))
            cohorts.append(Cohort(name=f"c{i}", parent=parent,
                                  resources=[resource_quota(GPU, [line])] if rng.random() < 0.6 else []))
        queues = [queue(f"q{i}", cohort=rng.choice([None, *[c.name for c in cohorts]]), gpus=[random_line(rng)])
                  for i in range(rng.randint(1, 6))]
        try:
            return compile_book(QueuesConfig(queues=queues, default_queue="q0", cohorts=cohorts,
                                             flavors=[gpu_flavor("h100")]))
        except QueuesConfigError:
            continue  # e.g. cohort quota no queue under it lists: draw again


@pytest.mark.parametrize("seed", range(30))
def test_what_check_admits_keeps_every_node_within_its_quota_and_limits(seed):
    from opsched.services.admission.policies.quota import node_usage

    rng = random.Random(seed)
    b = random_tree(rng)
    tree = b.tree
    usage: dict = {}
    admitted = 0
    for _ in range(60):
        q = rng.choice(list(b.queues))
        amount = float(rng.randint(1, 3))
        if check(b, usage, q, H100, amount).fit != Fit.NO:
            usage.setdefault(q, {}).setdefault(H100, 0.0)
            usage[q][H100] += amount
            admitted += 1
        for node, parent in tree.parent.items():
            used, subtree = node_usage(tree, usage, node, H100), tree.subtree[node].get(H100, 0.0)
            limit = tree.borrowing_limit(node, H100)
            if parent is None:
                assert used <= subtree + 1e-9, (seed, node, usage)
            elif limit is not None:
                assert used <= subtree + limit + 1e-9, (seed, node, usage)
    assert admitted > 0 or all(tree.subtree[tree.top(n)].get(H100, 0.0) == 0 for n in tree.parent)
