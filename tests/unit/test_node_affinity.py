"""Required node affinity evaluated as kube-scheduler does, and admission placing ops only where their
pods can go: affinity, taints and tolerations, the `accelerator` product label."""
from __future__ import annotations

import pytest

from opsched.proto.events import OperationAdmitted, OperationRejected
from opsched.proto.resources import GPU_PRODUCT_LABELS, is_accelerator
from opsched.services.admission.model.node_affinity import matches, required_terms
from opsched.services.admission.model.nodes import NodeInfo, tolerates
from tests.builders import case, case_name, fold, node, op, queued, taint
from tests.unit.admission_scenarios import decide


def expr(key, operator, *values):
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def affinity(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


LABELS = {"zone": "a", "tier": "gold", "gpus": "8"}


@pytest.mark.parametrize("c", [
    case("In holds when the label is one of the values", term={"matchExpressions": [expr("zone", "In", "a", "b")]},
         ok=True),
    case("In fails when the label is absent", term={"matchExpressions": [expr("rack", "In", "a")]}, ok=False),
    case("NotIn holds when the label is absent", term={"matchExpressions": [expr("rack", "NotIn", "r1")]}, ok=True),
    case("NotIn fails when the label is one of the values", term={"matchExpressions": [expr("zone", "NotIn", "a")]},
         ok=False),
    case("Exists holds for a present label", term={"matchExpressions": [expr("tier", "Exists")]}, ok=True),
    case("DoesNotExist fails for a present label", term={"matchExpressions": [expr("tier", "DoesNotExist")]},
         ok=False),
    case("Gt compares as integers", term={"matchExpressions": [expr("gpus", "Gt", "4")]}, ok=True),
    case("Lt compares as integers", term={"matchExpressions": [expr("gpus", "Lt", "10")]}, ok=True),
    case("Gt on a label that is not an integer fails", term={"matchExpressions": [expr("zone", "Gt", "1")]},
         ok=False),
    case("every expression of a term must hold",
         term={"matchExpressions": [expr("zone", "In", "a"), expr("tier", "In", "silver")]}, ok=False),
    case("matchFields selects by node name", term={"matchFields": [expr("metadata.name", "In", "n1")]}, ok=True),
    case("matchFields NotIn excludes the node", term={"matchFields": [expr("metadata.name", "NotIn", "n1")]},
         ok=False),
    case("an empty term matches no node", term={}, ok=False),
], ids=case_name)
def test_a_required_term_holds_as_kube_scheduler_says(c):
    assert matches("n1", LABELS, required_terms(affinity(c.term))) is c.ok


def test_terms_are_ored_and_no_required_affinity_allows_every_node():
    terms = required_terms(affinity({"matchExpressions": [expr("zone", "In", "z")]},
                                    {"matchExpressions": [expr("tier", "Exists")]}))
    assert matches("n1", LABELS, terms)
    assert required_terms({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}) is None
    assert matches("n1", LABELS, required_terms(None))


@pytest.mark.parametrize("c", [
    case("an Exists toleration with no key tolerates every taint", tol=[{"operator": "Exists"}], ok=True),
    case("an Equal toleration needs the same key and value", tol=[{"key": "gpu", "value": "x"}], ok=True),
    case("a different value does not tolerate", tol=[{"key": "gpu", "value": "y"}], ok=False),
    case("an effect that differs does not tolerate", tol=[{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}],
         ok=False),
    case("no toleration does not tolerate", tol=[], ok=False),
], ids=case_name)
def test_tolerations_follow_kubernetes_rules(c):
    info = NodeInfo.of(node("n1", gpus=1, taints=[taint("gpu", "x")]))
    assert tolerates(info, c.tol) is c.ok


def admitted_to(decisions):
    return {d.op_id: d for d in decisions if isinstance(d, OperationAdmitted)}


def test_an_op_is_admitted_only_where_its_affinity_lets_its_pod_go():
    excluded = affinity({"matchExpressions": [expr("kubernetes.io/hostname", "NotIn", "big")]})
    state = fold(node("big", gpus=4, labels={"kubernetes.io/hostname": "big"}),
                 node("small", gpus=1, labels={"kubernetes.io/hostname": "small"}),
                 queued(op("a").gpus(1).affinity(excluded).build(), op_id="a"),
                 queued(op("b").gpus(1).affinity(excluded).build(), op_id="b"))
    decisions = admitted_to(decide(state))
    assert list(decisions) == ["a"]  # only one GPU is on a node the affinity allows
    assert state.ops["b"].blocked[0].code == "no_capacity"


def test_an_op_no_node_could_ever_take_is_rejected_naming_its_affinity():
    nowhere = affinity({"matchExpressions": [expr("zone", "In", "mars")]})
    state = fold(node("n1", gpus=4, labels={"zone": "a"}), queued(op("a").gpus(1).affinity(nowhere).build(), op_id="a"))
    [rejected] = [d for d in decide(state) if isinstance(d, OperationRejected)]
    assert rejected.reason == "unfittable" and "node affinity (zone In [mars])" in rejected.message


def test_a_tainted_gpu_node_takes_only_ops_that_tolerate_it():
    state = fold(node("tainted", gpus=2, taints=[taint("dedicated", "ml")]), node("plain", gpus=1),
                 queued(op("a").gpus(1).build(), op_id="a"), queued(op("b").gpus(1).build(), op_id="b"),
                 queued(op("c").gpus(1).toleration(key="dedicated", value="ml", effect="NoSchedule").build(), op_id="c"))
    decisions = admitted_to(decide(state))
    assert set(decisions) == {"a", "c"}
    assert state.ops["b"].blocked[0].code == "no_capacity"


def test_the_accelerator_label_names_a_gpu_product_and_google_tpu_is_an_accelerator():
    assert "accelerator" in GPU_PRODUCT_LABELS
    assert is_accelerator("google.com/tpu")
