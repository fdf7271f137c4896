"""Nested cohorts in the queue file: each mistake refused with a message naming its path; the compiled tree
(parents, subtree quota, the part each node keeps from its parent) computed by hand."""
from __future__ import annotations

import pytest

from opsched.proto.limits import MAX_COHORT_DEPTH
from opsched.rules.queues_file import QueuesConfigError, parse_queues
from tests.builders import case, case_name

FLAVORS = "flavors: [{name: h100}, {name: a100}]\n"


def gpu(nominal: int | str = 0, extra: str = "", flavor: str = "h100") -> str:
    """One GPU quota line in flow style."""
    return f"[{{resource: nvidia.com/gpu, flavors: [{{name: {flavor}, nominal: {nominal}{extra}}}]}}]"


def text(cohorts: str, queues: str = "  - {name: a, cohort: team, resources: " + gpu(2) + "}\n") -> str:
    return f"{FLAVORS}defaultQueue: a\ncohorts:\n{cohorts}queues:\n{queues}"


ORG = "  - {name: org, resources: " + gpu(4) + "}\n  - {name: team, parent: org}\n"


def test_a_tree_of_declared_cohorts_parses():
    config = parse_queues(text(ORG))
    assert [(c.name, c.parent) for c in config.cohorts] == [("org", None), ("team", "org")]


@pytest.mark.parametrize("c", [
    case("a cohort name that is not a DNS label", cohorts="  - {name: Org_1}\n",
         says=["cohorts[0].name: 'Org_1' must be lowercase letters, digits and dashes"]),
    case("a cohort declared twice", cohorts="  - {name: org}\n  - {name: org}\n",
         says=["cohorts: the name 'org' is used twice"]),
    case("a cohort named as a queue", cohorts="  - {name: a}\n",
         says=["cohorts[0].name: 'a' is also a queue's name"]),
    case("a parent nobody declares (a typo)", cohorts="  - {name: team, parent: ogr}\n",
         says=["cohorts[0].parent: 'ogr' is not a declared cohort (declared: team)"]),
    case("a cycle of parents", cohorts="  - {name: team, parent: dept}\n  - {name: dept, parent: team}\n",
         says=["cohorts[0].parent: the cohorts form a cycle team → dept → team"]),
    case("a cohort its own parent", cohorts="  - {name: team, parent: team}\n",
         says=["the cohorts form a cycle team → team"]),
    case("a misspelt field of a cohort", cohorts="  - {name: team, parnet: org}\n",
         says=["unknown field `parnet`", "cohorts[0]"]),
    case("a root cohort with a borrowing limit", cohorts="  - {name: team, resources: " + gpu(2, ", borrowingLimit: 1")
         + "}\n", says=["cohorts[0].resources[0].flavors[0].borrowingLimit: cohort 'team' has no parent"]),
    case("a root cohort with a lending limit", cohorts="  - {name: team, resources: " + gpu(2, ", lendingLimit: 1")
         + "}\n", says=["cohorts[0].resources[0].flavors[0].lendingLimit: cohort 'team' has no parent"]),
    case("cohort quota of a flavor no queue under it lists",
         cohorts="  - {name: org, resources: " + gpu(4, flavor="a100") + "}\n  - {name: team, parent: org}\n",
         says=["cohorts[0].resources[0].flavors[0].name: no queue under cohort 'org' lists nvidia.com/gpu flavor "
               "'a100'"]),
    case("cohort quota that is not a quantity", cohorts="  - {name: team, resources: " + gpu("lots") + "}\n",
         says=["cohorts[0].resources[0].flavors[0].nominal: 'lots' is not a Kubernetes quantity"]),
    case("cohort quota of an unknown flavor", cohorts="  - {name: team, resources: " + gpu(1, flavor="t4") + "}\n",
         says=["cohorts[0].resources[0].flavors[0].name: unknown flavor 't4'"]),
], ids=case_name)
def test_a_bad_cohort_gives_a_readable_error_naming_the_path(c):
    with pytest.raises(QueuesConfigError) as info:
        parse_queues(text(c.cohorts), "org.yaml")
    message = str(info.value)
    assert message.startswith("org.yaml: ")
    for said in c.says:
        assert said in message


def test_a_tree_deeper_than_the_bound_is_refused_naming_the_path():
    levels = [f"c{n}" for n in range(MAX_COHORT_DEPTH + 1)]  # c0 the root ... the queue's cohort the deepest
    cohorts = "".join(f"  - {{name: {n}" + (f", parent: {levels[i - 1]}" if i else "") + "}\n"
                      for i, n in enumerate(levels))
    queues = f"  - {{name: a, cohort: {levels[-1]}}}\n"
    message = str(pytest.raises(QueuesConfigError, parse_queues, text(cohorts, queues)).value)
    assert f"queues[0].cohort: {' → '.join(levels)} → a is {MAX_COHORT_DEPTH + 1} cohorts deep, more than " \
           f"{MAX_COHORT_DEPTH}" in message
    parse_queues(text(cohorts.replace(f"{levels[-1]}, parent", f"{levels[-1]}x, parent"),
                      f"  - {{name: a, cohort: {levels[-2]}}}\n"))  # one level less: fine


def test_a_queue_may_still_name_a_cohort_nobody_declares():
    config = parse_queues(text("  - {name: org}\n", "  - {name: a, cohort: lab}\n"))
    assert config.queues[0].cohort == "lab"


# ---- the compiled tree ----------------------------------------------------------------------------------------

TREE = text(
    "  - {name: org, resources: " + gpu(4) + "}\n"
    "  - {name: dept, parent: org, resources: " + gpu(2, ", lendingLimit: 3") + "}\n",
    "  - {name: team-a, cohort: dept, resources: " + gpu(2, ", guaranteed: 1") + "}\n"
    "  - {name: team-b, cohort: dept, resources: " + gpu(3, ", lendingLimit: 1") + "}\n"
    "  - {name: c, cohort: org, resources: " + gpu(1) + "}\n"
    "  - {name: solo, resources: " + gpu(1) + "}\n").replace("defaultQueue: a", "defaultQueue: c")


def test_subtree_quota_adds_what_each_child_lets_its_parent_use():
    from opsched.services.admission.model.cohorts import Node
    from opsched.services.admission.model.queues import compile_book
    from tests.builders import GPU

    tree = compile_book(parse_queues(TREE)).tree
    key = (GPU, "h100")
    org, dept = Node("org", cohort=True), Node("dept", cohort=True)
    # team-a keeps its guaranteed 1 of 2; team-b keeps 3 - lendingLimit 1 = 2
    assert (tree.subtree[Node("team-a")][key], tree.local[Node("team-a")][key]) == (2, 1)
    assert (tree.subtree[Node("team-b")][key], tree.local[Node("team-b")][key]) == (3, 2)
    # dept: its own 2 + 1 from team-a + 1 from team-b = 4, of which it lends up at most 3
    assert (tree.subtree[dept][key], tree.local[dept][key]) == (4, 1)
    # org: its own 4 + 3 from dept + 1 from c
    assert (tree.subtree[org][key], tree.local[org][key]) == (8, 0)
    assert tree.path("team-a") == [Node("team-a"), dept, org]
    assert tree.root_of("solo") == Node("solo") and tree.path("solo") == [Node("solo")]
    assert tree.queues_under(org) == ["team-a", "team-b", "c"]
    assert list(tree.cohorts()) == [org, dept]
    assert (tree.height(org), tree.height(dept), tree.height(Node("c"))) == (2, 1, 0)


def test_members_are_every_queue_under_the_root_as_before_for_flat_cohorts():
    from opsched.services.admission.model.queues import compile_book

    book = compile_book(parse_queues(TREE))
    assert book.members("team-a") == book.members("c") == ["team-a", "team-b", "c"]
    assert book.members("solo") == ["solo"]
    flat = compile_book(parse_queues(text("  - {name: org}\n", "  - {name: a, cohort: lab}\n"
                                          "  - {name: b}\n  - {name: d, cohort: lab}\n")))
    assert flat.members("d") == ["a", "d"] and flat.members("b") == ["b"]
