"""Nested cohorts through the admission cycle, in Kueue's table style: a tree of cohorts and queues, ops running
(started in order, each borrowing as the tree lets it), one op arriving; what is admitted, who is asked to give way,
why the op waits. Each case names the Kueue test it follows (``pkg/scheduler/scheduler_test.go``,
``pkg/scheduler/preemption/preemption_hierarchical_test.go``), or says it has none."""
from __future__ import annotations

import pytest

from tests.builders import book, case, case_name, cohort, fold, queue, quota, t
from tests.unit.preemption_scenarios import admitted_ids, codes, decide, gpu_op, start, victims


def run(c) -> tuple:
    """Start ``c.running`` ((id, queue, gpus, priority), one per cycle), then decide once with ``c.incoming``."""
    state = fold()
    for n, (op_id, q, gpus, priority) in enumerate(c.running):
        fold(gpu_op(op_id, gpus, queue=q, priority=priority, at=n), state=state)
        start(state, c.tree, 10 + 2 * n, op_id)
    op_id, q, gpus, priority = c.incoming
    fold(gpu_op(op_id, gpus, queue=q, priority=priority, at=50), state=state)
    return state, decide(state, c.tree, t(100))


# ---- borrowing walks up -----------------------------------------------------------------------------------

#   child: lender (4, lendingLimit 2), borrower (2)
def lender_borrower(under_root: bool = True):
    return book(queue("lender", cohort="child", gpus=[quota("h100", 4, lend=2)]),
                queue("borrower", cohort="child", gpus={"h100": 2}),
                cohorts=[cohort("root"), cohort("child", "root")] if under_root else [])


#        org
#       /    \
#   dept-a   dept-b
#     |        |
#     a (1)    b (2)
def cousins(dept_a=None, dept_b=None, org=None):
    return book(queue("a", cohort="dept-a", gpus={"h100": 1}), queue("b", cohort="dept-b", gpus={"h100": 2}),
                cohorts=[cohort("org", gpus=org), cohort("dept-a", "org", gpus=dept_a),
                         cohort("dept-b", "org", gpus=dept_b)])


@pytest.mark.parametrize("c", [
    case("a queue borrows its sibling's lendable quota, up to the sibling's lending limit",
         kueue="scheduler_test: hierarchical cohort allows borrowing up to lending limit",
         tree=lender_borrower(), running=[("b1", "borrower", 2, 0)], incoming=("b2", "borrower", 2, 0),
         admitted=["b2"], waits=[]),
    case("a queue may not borrow past its sibling's lending limit",
         kueue="scheduler_test: hierarchical cohort respects lending limit when borrowing",
         tree=lender_borrower(), running=[("b1", "borrower", 2, 0)], incoming=("b2", "borrower", 3, 0),
         admitted=[], waits=["quota_exhausted"]),
    case("a queue borrows a cousin's unused quota two levels away",
         kueue="none (resource_node.go available: the recursion to the root)",
         tree=cousins(), running=[("a1", "a", 1, 0)], incoming=("a2", "a", 2, 0), admitted=["a2"], waits=[]),
    case("a queue borrows a grandparent's own quota",
         kueue="none (resource_node.go available: a cohort's own nominal in its subtree quota)",
         tree=book(queue("a", cohort="dept", gpus={"h100": 1}),
                   cohorts=[cohort("org", gpus={"h100": 2}), cohort("dept", "org")]),
         running=[("a1", "a", 1, 0)], incoming=("a2", "a", 2, 0), admitted=["a2"], waits=[]),
    case("a department's borrowing limit caps what its queues take from the rest of the tree",
         kueue="none (resource_node.go available: borrowingLimit at each level)",
         tree=cousins(dept_a=[quota("h100", 0, borrow=1)]), running=[("a1", "a", 1, 0)],
         incoming=("a2", "a", 2, 0), admitted=[], waits=["quota_exhausted"]),
    case("a department's lending limit keeps part of its queues' quota from other departments",
         kueue="none (resource_node.go localQuota of a cohort)",
         tree=cousins(dept_b=[quota("h100", 0, lend=1)]), running=[("a1", "a", 1, 0)],
         incoming=("a2", "a", 2, 0), admitted=[], waits=["quota_exhausted"]),
    case("within a department's lending limit its quota is lent",
         kueue="none (resource_node.go localQuota of a cohort)",
         tree=cousins(dept_b=[quota("h100", 0, lend=1)]), running=[("a1", "a", 1, 0)],
         incoming=("a2", "a", 1, 0), admitted=["a2"], waits=[]),
], ids=case_name)
def test_borrowing_walks_up_the_tree(c):
    state, decisions = run(c)
    assert admitted_ids(decisions) == c.admitted
    assert codes(state, c.incoming[0]) == c.waits
    assert victims(decisions) == []
    if c.admitted:
        assert state.ops[c.incoming[0]].borrowing


def test_a_department_borrowing_limit_is_named_in_why():
    c = case("", tree=cousins(dept_a=[quota("h100", 0, borrow=1)]), running=[("a1", "a", 1, 0)],
             incoming=("a2", "a", 2, 0))
    state, _ = run(c)
    assert "borrowing limit 1 of cohort dept-a reached" in state.ops["a2"].blocked[0].message
