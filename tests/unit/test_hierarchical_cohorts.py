"""Nested cohorts through the admission cycle, in Kueue's table style: a tree of cohorts and queues, ops running
(started in order, each borrowing as the tree lets it), one op arriving; what is admitted, who is asked to give way,
why the op waits. Each case names the Kueue test it follows (``pkg/scheduler/scheduler_test.go``,
``pkg/scheduler/preemption/preemption_hierarchical_test.go``), or says it has none."""
from __future__ import annotations

import pytest

from opsched.proto.queues import Preemption
from tests.builders import book, case, case_name, cohort, fold, queue, quota, succeeded, t
from tests.unit.preemption_scenarios import admitted_ids, codes, decide, gpu_op, preemptions, start, victims

ANY = Preemption(reclaim_within_cohort="Any")


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


# ---- reclaim walks down -------------------------------------------------------------------------------------

#            r
#       /    |      \
#    c (2)  q-borrowing (0)  q-nominal (2)
#    /   \
#   q (0)  q-same-cohort (0)
# (each case has q and the queues it names, as Kueue's; q's and c's quota as the case says)
def kueue_tree(*others: str, q: int = 0, c: int = 2):
    every = {"q-borrowing": queue("q-borrowing", cohort="r", gpus={"h100": 0}, preemption=ANY),
             "q-nominal": queue("q-nominal", cohort="r", gpus={"h100": 2}, preemption=ANY),
             "q-same-cohort": queue("q-same-cohort", cohort="c", gpus={"h100": 0}, preemption=ANY)}
    return book(queue("q", cohort="c", gpus={"h100": q}, preemption=ANY), *(every[n] for n in others),
                cohorts=[cohort("r"), cohort("c", "r", gpus={"h100": c})])


#           org
#       /    |     \
#  dept-a  dept-b    c (0)
#    |     /    \
#  a (2)  b (0)  b2 (2)
def two_departments():
    return book(queue("a", cohort="dept-a", gpus={"h100": 2}, preemption=ANY),
                queue("b", cohort="dept-b", gpus={"h100": 0}), queue("b2", cohort="dept-b", gpus={"h100": 2}),
                queue("c", cohort="org", gpus={"h100": 0}),
                cohorts=[cohort("org"), cohort("dept-a", "org"), cohort("dept-b", "org")])


@pytest.mark.parametrize("c", [
    case("a queue reclaims its cohort's quota from a queue borrowing it one level up",
         kueue="preemption_hierarchical_test: preempt with hierarchical advantage",
         tree=kueue_tree("q-borrowing"), running=[("admitted2", "q-borrowing", 2, 0)],
         incoming=("incoming", "q", 2, 0), victims=["admitted2"]),
    case("queues within their nominal quota are never reclaimed from",
         kueue="preemption_hierarchical_test: avoid queues within nominal quota",
         tree=kueue_tree("q-nominal", "q-borrowing"),
         running=[("admitted1", "q-nominal", 2, -10), ("admitted2", "q-borrowing", 2, 0)],
         incoming=("incoming", "q", 2, 0), victims=["admitted2"]),
    case("several borrowers are reclaimed from, of any priority, when the request fits the subtree",
         kueue="preemption_hierarchical_test: preempt multiple with hierarchical advantage",
         tree=kueue_tree("q-borrowing"),
         running=[("admitted1", "q-borrowing", 1, 1), ("admitted2", "q-borrowing", 1, 2)],
         incoming=("incoming", "q", 2, 0), victims=["admitted1", "admitted2"]),
    case("a borrower outside the subtree goes before a lower-priority op of the queue itself",
         kueue="preemption_hierarchical_test: prefer to preempt hierarchical candidate",
         tree=kueue_tree("q-borrowing"),
         running=[("admitted_same_queue", "q", 1, -2), ("admitted_borrowing", "q-borrowing", 1, 1)],
         incoming=("incoming", "q", 1, 0), victims=["admitted_borrowing"]),
    case("without the advantage a sibling's lower-priority borrower is not reclaimed to borrow in its place",
         kueue="preemption_hierarchical_test: forced to preempt priority candidate (differs: Kueue preempts there "
               "only through BorrowWithinCohort, which opsched does not have)",
         tree=kueue_tree("q-nominal", "q-same-cohort"), running=[("admitted_nominal", "q-nominal", 2, -10),
                                     ("admitted_same_cohort", "q-same-cohort", 2, -1)],
         incoming=("incoming", "q", 2, 0), victims=[]),
    case("a queue within its own nominal reclaims from borrowers of any priority at every level",
         kueue="preemption_hierarchical_test: incoming workload fits in CQ nominal quota",
         tree=kueue_tree("q-borrowing", "q-same-cohort", q=4),
         running=[("admitted-same-cohort", "q-same-cohort", 3, 10), ("admitted-borrowing", "q-borrowing", 3, 10)],
         incoming=("incoming", "q", 4, 0), victims=["admitted-borrowing", "admitted-same-cohort"]),
    case("the lowest-priority borrower goes first and an op within its queue's nominal is never taken",
         kueue="preemption_hierarchical_test: reclaim nominal quota from lowest priority workload, excluding "
               "non-borrowing",
         tree=kueue_tree("q-borrowing", "q-nominal", c=3),
         running=[("admitted-nominal", "q-nominal", 2, -2), ("prio-8", "q-borrowing", 1, 8),
                  ("prio-9", "q-borrowing", 1, 9), ("prio-10", "q-borrowing", 1, 9)],
         incoming=("incoming", "q", 1, 0), victims=["prio-8"]),
    case("a queue reclaims its quota from a cousin two levels away",
         kueue="none (hierarchical_preemption.go: the walk up to the shared cohort, then down)",
         tree=two_departments(), running=[("b1", "b", 2, 0), ("b3", "b", 2, 0)], incoming=("x", "a", 2, 0),
         victims=["b3"]),
    case("a department within its subtree quota is pruned, even with a lower-priority borrower in it",
         kueue="preemption_hierarchical_test: avoid queues within nominal quota (a cohort level)",
         tree=two_departments(), running=[("c1", "c", 2, 0), ("b1", "b", 2, -1)], incoming=("x", "a", 2, 0),
         victims=["c1"]),
], ids=case_name)
def test_reclaim_walks_down_the_tree(c):
    state, decisions = run(c)
    assert victims(decisions) == c.victims
    assert {d.reason for d in preemptions(decisions)} <= {"reclaim"}
    assert admitted_ids(decisions) == []
    assert codes(state, c.incoming[0]) == (["waiting_for_victims"] if c.victims else ["quota_exhausted"])


def test_a_reclaim_across_levels_names_both_paths():
    c = case("", tree=two_departments(), running=[("b1", "b", 2, 0), ("b3", "b", 2, 0)], incoming=("x", "a", 2, 0))
    _, decisions = run(c)
    (d,) = preemptions(decisions)
    assert d.message == ("x (queue a, priority 0) reclaims quota lent to b3 (queue b, priority 0); "
                         "preemptor path /org/dept-a/a; preemptee path /org/dept-b/b")


# ---- the rest of the cycle over a tree ---------------------------------------------------------------------

def test_a_borrower_fitting_its_own_department_goes_before_one_that_needs_the_whole_tree():
    """Kueue's FindHeightOfLowestSubtreeThatFits (hierarchical_preemption.go; no scheduler_test case of its own
    here): y's queue comes first by priority, but x borrows within dept-a only."""
    b = book(queue("a", cohort="dept-a", gpus={"h100": 0}), queue("s", cohort="dept-a", gpus={"h100": 1}),
             queue("b", cohort="dept-b", gpus={"h100": 0}, priority=10),
             cohorts=[cohort("org"), cohort("dept-a", "org"), cohort("dept-b", "org")])
    state = fold(gpu_op("y", 1, queue="b"), gpu_op("x", 1, queue="a", at=1))
    assert admitted_ids(decide(state, b, t(10))) == ["x"]
    assert codes(state, "y") == ["quota_exhausted"]


def test_an_op_ending_in_one_department_wakes_an_op_parked_in_another():
    b = two_departments()
    state = fold()
    for n, op_id in enumerate(("b1", "b3")):
        fold(gpu_op(op_id, 2, queue="b", at=n), state=state)
        start(state, b, 10 + 2 * n, op_id)
    fold(gpu_op("c1", 2, queue="c", at=20), state=state)  # c has no quota of its own: waits, parked
    assert decide(state, b, t(30)) == [] and "c" in state.queues.parked
    fold(succeeded("b3", at=t(40)), state=state)
    assert admitted_ids(decide(state, b, t(41))) == ["c1"]


def test_fair_share_is_flat_over_the_tree_with_the_cohorts_own_quota_in_the_totals():
    from types import SimpleNamespace

    from opsched.services.admission.policies.fairshare import share
    from tests.builders import GPU

    b = book(queue("a", cohort="dept", gpus={"h100": 2}), queue("c", cohort="org", gpus={"h100": 2}),
             cohorts=[cohort("org", gpus={"h100": 4}), cohort("dept", "org")])
    snap = SimpleNamespace(usage={"a": {(GPU, "h100"): 2.0}, "c": {}})
    assert share(b, snap, "a") == 2 / (2 + 2 + 4)  # type: ignore[arg-type]


def test_queues_answers_each_declared_cohort_and_each_queue_s_path_and_the_table_shows_them():
    from opsched.proto.queries import CohortUsage
    from opsched.services.admission import queries
    from opsched.tables import queues_table
    from tests.builders import GPU

    b = two_departments()
    state = fold()
    for n, op_id in enumerate(("b1", "b3")):
        fold(gpu_op(op_id, 2, queue="b", at=n), state=state)
        start(state, b, 10 + 2 * n, op_id)
    answer = queries.queues(state, b)
    assert {q.name: q.cohort_path for q in answer.queues} == {
        "a": ["dept-a", "org"], "b": ["dept-b", "org"], "b2": ["dept-b", "org"], "c": ["org"]}
    assert [(c.name, c.parent) for c in answer.cohorts] == [("org", None), ("dept-a", "org"), ("dept-b", "org")]
    dept_b = answer.cohorts[2]
    assert dept_b.usage == [CohortUsage(resource=GPU, flavor="h100", used=4.0, subtree=2.0, borrowed=2.0)]
    table = queues_table(answer)
    assert "COHORT  PARENT  USED/SUBTREE" in table
    assert "dept-b  org     nvidia.com/gpu[h100] 4/2  nvidia.com/gpu[h100] 2" in table
    flat = queries.queues(fold(), book(queue("a", cohort="lab")))
    assert flat.cohorts == [] and flat.queues[0].cohort_path == [] and "USED/SUBTREE" not in queues_table(flat)


def test_the_nested_cohorts_example_of_the_docs_computes_what_it_says():
    """docs/queues.md "Nested cohorts": the numbers its text gives."""
    from opsched.rules.queues_file import parse_queues
    from opsched.services.admission.model.cohorts import Node
    from opsched.services.admission.model.queues import compile_book
    from opsched.services.admission.policies.quota import available_to, check
    from tests.builders import GPU
    from tests.docs import snippet

    b = compile_book(parse_queues(snippet("queues-nested-cohorts")))
    key = (GPU, "h100")
    subtree = {n: b.tree.subtree[Node(n, cohort=True)][key] for n in ("ml", "infra", "org")}
    assert subtree == {"ml": 6, "infra": 4, "org": 12} and b.tree.local[Node("infra", cohort=True)][key] == 2
    assert (available_to(b, {}, "vision", key), available_to(b, {}, "platform", key)) == (10, 14)
    result = check(b, {"vision": {key: 4.0}}, "vision", key, 8)
    assert result.reason == ("quota of nvidia.com/gpu flavor h100 exhausted (4/4 used, needs 8; borrowing limit 4 of "
                             "cohort ml reached)")
