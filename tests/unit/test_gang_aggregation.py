"""Gangs: what an attempt's pods mean together, and deletions the dispatcher made on purpose
(preempt, stop, evict), which are never failures."""
from __future__ import annotations

import dataclasses

import pytest

from opsched.proto.events import (
    OperationFailed,
    OperationPreempted,
    OperationRunning,
    OperationSucceeded,
)
from opsched.rules.podspec import ANNOTATION_EVICTED
from opsched.services.dispatcher.gang import (
    DELETED_REASON,
    EVICTED,
    GANG_FAILED,
    PREEMPTED,
    STOPPED,
    assess,
    release_of,
)
from tests.builders import T0, case, case_name, t
from tests.unit.gang_pods import PREEMPTED_BY, STOPPED_ANN, TIMEOUT_ANN, gang, gone, pod

# ---- aggregation --------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a gang whose pods all run is running", views=gang("Running", "Running", "Running"),
         expected=OperationRunning),
    case("a gang with a pod still pending is not running yet", views=gang("Running", "Running", "Pending"),
         expected=None),
    case("a gang with a pod not created yet is not running", views=gang("Running", "Running", size=3),
         expected=None),
    case("a gang whose worker already succeeded while the others run is running",
         views=gang("Running", "Succeeded", "Running"), expected=OperationRunning),
    case("a gang whose main pod succeeded has succeeded, even with workers still running",
         views=gang("Succeeded", "Running", "Running"), expected=OperationSucceeded),
    case("the main pod's success wins over a worker that failed after it",
         views=gang("Succeeded", "Failed", "Running"), expected=OperationSucceeded),
    case("a gang with any failed pod has failed", views=gang("Running", "Running", "Failed"),
         expected=OperationFailed),
    case("a gang with a failed pod still pending elsewhere has failed", views=gang("Pending", "Failed", None),
         expected=OperationFailed),
    case("a single pending pod means nothing yet", views=gang("Pending"), expected=None),
    case("a single running pod is running", views=gang("Running"), expected=OperationRunning),
    case("a single succeeded pod has succeeded", views=gang("Succeeded"), expected=OperationSucceeded),
    case("a single failed pod has failed", views=gang("Failed"), expected=OperationFailed),
], ids=case_name)
def test_what_the_pods_of_an_attempt_mean(c):
    event = assess(c.views, None, t(5))
    assert (type(event) if event is not None else None) is c.expected
    if event is not None:
        assert (event.op_id, event.attempt, event.at) == ("g", 0, t(5))


def test_running_and_succeeded_name_the_main_pod_and_a_failure_names_the_failed_pod():
    assert assess(gang("Running", "Running"), None, T0).pod_name == "op-g-0"
    assert assess(gang("Succeeded", "Running"), None, T0).pod_name == "op-g-0"
    failed = assess(gang("Running", "Running", "Failed"), None, T0)
    assert (failed.pod_name, failed.reason, failed.message, failed.exit_code) == ("op-g-0-worker-1", "Error", "boom", 1)


def test_running_names_the_node_of_each_pod_in_pod_name_order_the_main_first():
    views = [dataclasses.replace(pod(replica), node=node) for replica, node in (("worker-1", "b"), ("main", "m"),
                                                                                ("worker-0", None))]
    running = assess(views, None, T0)
    assert isinstance(running, OperationRunning)
    assert (running.node, running.nodes) == ("m", ["m", "", "b"])  # a pod with no node known yet: ""


def test_nothing_more_is_reported_once_the_attempt_ended():
    for reported in ("succeeded", "failed"):
        assert assess(gang("Running", "Failed"), reported, T0) is None
        assert assess([gone(p) for p in gang("Running", "Running")], reported, T0) is None


@pytest.mark.parametrize("c", [
    case("a pod deleted by someone else before the attempt ended fails it",
         views=[pod("main"), gone(pod("worker-0"))], reported="running", failed=True),
    case("a single pod deleted by someone else before it ended fails it",
         views=[gone(pod(size=1))], reported="running", failed=True),
    case("a worker that had succeeded and was then deleted had ended",
         views=[pod("main"), gone(pod("worker-0", "Succeeded"))], reported="running", failed=False),
    case("a pod being deleted by someone is not reported until it is gone",
         views=[pod("main"), pod("worker-0", "Failed", deleting=True)], reported="running", failed=False),
], ids=case_name)
def test_pods_deleted_by_someone_else(c):
    event = assess(c.views, c.reported, T0)
    if c.failed:
        assert isinstance(event, OperationFailed) and event.reason == DELETED_REASON
    else:
        assert not isinstance(event, OperationFailed)


# ---- deletions made on purpose are never failures -----------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a preempted pod that failed while being killed", annotations=PREEMPTED_BY),
    case("a stopped pod that failed while being killed", annotations=STOPPED_ANN),
    case("a gang evicted after its timeout", annotations=TIMEOUT_ANN),
    case("the rest of a gang released after another pod failed", annotations={ANNOTATION_EVICTED: GANG_FAILED}),
], ids=case_name)
def test_annotated_deletions_are_never_failures(c):
    views = [pod("main", "Failed", annotations=c.annotations), pod("worker-0", "Running", annotations=c.annotations)]
    for state in (views, [gone(v) for v in views], [views[0], gone(views[1])]):
        for reported in (None, "running"):
            event = assess(state, reported, T0)
            assert not isinstance(event, (OperationFailed, OperationRunning, OperationSucceeded)), event


def test_a_preempted_attempt_is_preempted_once_every_pod_is_gone():
    views = [pod("main", annotations=PREEMPTED_BY), pod("worker-0", annotations=PREEMPTED_BY)]
    assert assess([gone(views[0]), views[1]], "running", T0) is None
    event = assess([gone(v) for v in views], "running", t(3))
    assert event == OperationPreempted(op_id="g", at=t(3), attempt=0, preemptor="urgent", reason="within_queue")


def test_one_annotated_pod_marks_the_whole_attempt_released():
    views = [gone(pod("main", annotations=PREEMPTED_BY)), gone(pod("worker-0"))]
    assert isinstance(assess(views, None, T0), OperationPreempted)


@pytest.mark.parametrize("c", [
    case("preempted", annotations=PREEMPTED_BY, kind=PREEMPTED),
    case("stopped", annotations=STOPPED_ANN, kind=STOPPED),
    case("evicted", annotations=TIMEOUT_ANN, kind=EVICTED),
    case("not released", annotations={}, kind=None),
], ids=case_name)
def test_the_release_is_read_from_the_annotations(c):
    release = release_of([pod(annotations=c.annotations)])
    assert (release.kind if release else None) == c.kind
