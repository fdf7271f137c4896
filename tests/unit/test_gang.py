"""Gangs: what an attempt's pods mean together, when a gang has waited too long, and deletions the
dispatcher made on purpose (preempt, stop, evict), which are never failures."""
from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime

import pytest
from kubernetes.client import (
    V1Container, V1ContainerState, V1ContainerStateTerminated, V1ContainerStatus, V1ObjectMeta, V1Pod, V1PodSpec,
    V1PodStatus,
)

from proto.events import (
    OperationEvicted, OperationFailed, OperationPreempted, OperationRunning, OperationStopped, OperationSucceeded,
    PreemptRequested, StopRequested,
)
from services.dispatcher.gang import (
    DELETED_REASON, EVICTED, GANG_FAILED, GANG_TIMEOUT, PREEMPTED, STOPPED, PodView, assess, gang_backoff,
    release_of, timed_out,
)
from services.dispatcher.podspec import (
    ANNOTATION_EVICTED, ANNOTATION_PREEMPT_REASON, ANNOTATION_PREEMPTED_BY, ANNOTATION_STOPPED, LABEL_ATTEMPT,
    LABEL_GANG_SIZE, LABEL_OP, LABEL_REPLICA, MANAGED_BY, MANAGER,
)
from services.dispatcher.podstatus import event_for, view_of
from services.dispatcher.preempt import Releaser, check_gangs
from services.dispatcher.watcher import PodWatcher
from services.runtime.clock import FakeClock
from services.runtime.logging import get as get_log
from services.runtime.settings import Settings
from tests.builders import T0, case, case_name, t

SETTINGS = Settings(gang_timeout_s=120, gang_backoff_base_s=10, gang_backoff_max_s=300)
PREEMPTED_BY = {ANNOTATION_PREEMPTED_BY: "urgent", ANNOTATION_PREEMPT_REASON: "within_queue"}
STOPPED_ANN = {ANNOTATION_STOPPED: "true"}
TIMEOUT_ANN = {ANNOTATION_EVICTED: GANG_TIMEOUT}


def pod(replica: str = "main", phase: str | None = "Running", *, size: int = 3, attempt: int = 0,
        created: datetime = T0, **fields) -> PodView:
    """One pod of attempt ``attempt`` of op ``g`` (a gang of ``size``)."""
    name = "op-g-0" if replica == "main" else f"op-g-0-{replica}"
    failure = ("Error", "boom", 1) if phase == "Failed" else None
    return PodView(name=name, namespace="ns", op_id="g", attempt=attempt, replica=replica, gang_size=size,
                   phase=phase, node="n1", created=created, failure=failure, **fields)


def gang(*phases: str | None, size: int | None = None, **fields) -> list[PodView]:
    """The main pod with the first phase, ``worker-<i>`` with the others."""
    size = size or len(phases)
    return [pod("main" if i == 0 else f"worker-{i - 1}", p, size=size, **fields) for i, p in enumerate(phases)]


def gone(view: PodView, **fields) -> PodView:
    return dataclasses.replace(view, gone=True, **fields)


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


# ---- the gang timeout -------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [
    case("a gang not all running after the timeout is evicted", views=gang("Running", "Running", "Pending"),
         at=120, evicted=True),
    case("a gang just under the timeout waits", views=gang("Running", "Running", "Pending"), at=119.9,
         evicted=False),
    case("a gang all running is never evicted", views=gang("Running", "Running", "Running"), at=1000,
         evicted=False),
    case("a single pod is never a gang", views=gang("Pending"), at=1000, evicted=False),
    case("a gang with a failed pod is left to the failure", views=gang("Running", "Failed", "Pending"), at=1000,
         evicted=False),
    case("a gang being preempted is left to the preemption",
         views=gang("Running", "Pending", annotations=PREEMPTED_BY), at=1000, evicted=False),
    case("a gang being deleted is left to whoever deletes it",
         views=gang("Running", "Pending", deleting=True), at=1000, evicted=False),
    case("a gang annotated evicted but not yet deleted (a crash in between) is evicted again",
         views=gang("Running", "Pending", annotations=TIMEOUT_ANN), at=1000, evicted=True),
    case("a gang whose main pod was not seen yet waits", views=gang("Running", "Pending")[1:], at=1000,
         evicted=False),
], ids=case_name)
def test_gang_timeout_decision(c):
    event = timed_out(c.views, t(c.at), SETTINGS)
    assert (event is not None) == c.evicted
    if event is not None:
        assert event.reason == GANG_TIMEOUT and event.at == t(c.at)


def test_the_timeout_counts_from_the_main_pods_creation_and_says_how_many_run():
    views = [pod("main", created=t(0)), pod("worker-0", created=t(50)), pod("worker-1", "Pending", created=t(50))]
    event = timed_out(views, t(120), SETTINGS)
    assert event == OperationEvicted(op_id="g", at=t(120), attempt=0, reason=GANG_TIMEOUT,
                                     message="2/3 pods running after 120s", retry_after_s=10.0)


@pytest.mark.parametrize("c", [
    case("the first attempt waits the base", attempt=0, wait=10),
    case("the second waits twice as long", attempt=1, wait=20),
    case("the fourth waits eight times the base", attempt=3, wait=80),
    case("the backoff is capped", attempt=5, wait=300),
    case("a very late attempt is capped too", attempt=40, wait=300),
], ids=case_name)
def test_backoff_grows_with_the_attempt_and_is_capped(c):
    assert gang_backoff(c.attempt, SETTINGS) == c.wait
    views = [pod("main", attempt=c.attempt), pod("worker-0", "Pending", attempt=c.attempt)]
    assert timed_out(views, t(500), SETTINGS).retry_after_s == c.wait


# ---- from the API objects -------------------------------------------------------------------------

def v1pod(name: str = "op-g-0", phase: str = "Running", *, replica: str | None = "main", size: str | None = "2",
          annotations: dict | None = None, deleting: bool = False, exit_code: int | None = None) -> V1Pod:
    labels = {MANAGED_BY: MANAGER, LABEL_OP: "g", LABEL_ATTEMPT: "1"}
    labels.update({k: v for k, v in ((LABEL_REPLICA, replica), (LABEL_GANG_SIZE, size)) if v is not None})
    statuses = None
    if exit_code is not None:
        term = V1ContainerState(terminated=V1ContainerStateTerminated(exit_code=exit_code))
        statuses = [V1ContainerStatus(name="main", image="i", image_id="", ready=False, restart_count=0, state=term)]
    return V1Pod(
        metadata=V1ObjectMeta(name=name, namespace="ns", labels=labels, annotations=annotations,
                              creation_timestamp=T0, deletion_timestamp=t(1) if deleting else None),
        spec=V1PodSpec(containers=[V1Container(name="main")], node_name="n1"),
        status=V1PodStatus(phase=phase, container_statuses=statuses))


def test_a_pod_is_read_as_a_member_of_its_attempt():
    view = view_of(v1pod("op-g-1-worker-0", "Failed", replica="worker-0", size="3", exit_code=2,
                         annotations={"other": "x", ANNOTATION_STOPPED: "true"}))
    assert (view.key, view.replica, view.gang_size, view.created, view.node) == (("g", 1), "worker-0", 3, T0, "n1")
    assert view.annotations == {ANNOTATION_STOPPED: "true"}
    assert view.failure == ("Error", "container main exited with code 2", 2)


def test_a_pod_from_before_gangs_is_the_main_pod_of_a_gang_of_one():
    view = view_of(v1pod(replica=None, size=None))
    assert (view.replica, view.gang_size) == ("main", 1)
    assert isinstance(event_for(v1pod(replica=None, size=None), T0), OperationRunning)


def test_a_single_pod_means_what_it_meant_before_gangs():
    assert isinstance(event_for(v1pod(size="1", phase="Succeeded"), T0), OperationSucceeded)
    assert event_for(v1pod(size="1", phase="Failed", exit_code=1, deleting=True), T0) is None


# ---- the watcher: grouping, dedup, releases, re-lists ------------------------------------------------------

class Published(list):
    async def __call__(self, event) -> None:
        self.append(event)


@pytest.fixture
async def watcher():
    freed: list = []

    async def free(views, annotations):
        freed.append(([v.name for v in views], annotations))

    w = PodWatcher(core=None, publish=Published(), clock=FakeClock(T0), log=get_log("test"), free=free)
    w._loop = asyncio.get_running_loop()
    w.freed = freed
    return w


async def seen(w: PodWatcher, *changes: tuple[str, V1Pod]) -> list:
    """Hand pod events to the watcher as its thread would."""
    def run() -> None:
        for kind, obj in changes:
            w.observe(kind, obj)
    await asyncio.to_thread(run)
    return w.publish


async def test_a_gang_is_running_once_both_pods_run_and_is_reported_once(watcher):
    published = await seen(watcher, ("ADDED", v1pod()), ("ADDED", v1pod("op-g-1-w-0", "Pending", replica="w-0")))
    assert published == []
    await seen(watcher, ("MODIFIED", v1pod("op-g-1-w-0", replica="w-0")), ("MODIFIED", v1pod()))
    assert [type(e) for e in published] == [OperationRunning]


async def test_a_failed_gang_is_reported_and_its_other_pods_are_released(watcher):
    published = await seen(watcher, ("ADDED", v1pod()),
                           ("MODIFIED", v1pod("op-g-1-w-0", "Failed", replica="w-0", exit_code=1)))
    assert [(type(e), e.pod_name) for e in published] == [(OperationFailed, "op-g-1-w-0")]
    assert watcher.freed == [(["op-g-0"], {ANNOTATION_EVICTED: GANG_FAILED})]


async def test_a_preempted_gang_is_reported_when_its_last_pod_is_deleted(watcher):
    main, worker = v1pod(annotations=PREEMPTED_BY), v1pod("op-g-1-w-0", replica="w-0", annotations=PREEMPTED_BY)
    published = await seen(watcher, ("ADDED", main), ("ADDED", worker), ("DELETED", main))
    assert published == []
    await seen(watcher, ("DELETED", worker))
    assert [(type(e), e.preemptor) for e in published] == [(OperationPreempted, "urgent")]
    assert watcher.attempts == {} and watcher.reported == {}


async def test_a_stopped_pod_deleted_after_a_restart_is_no_failure(watcher):
    published = await seen(watcher, ("MODIFIED", v1pod(size="1", annotations=STOPPED_ANN, deleting=True)),
                           ("DELETED", v1pod(size="1", phase="Failed", annotations=STOPPED_ANN, exit_code=143)))
    assert published == []


async def test_a_pod_deleted_by_someone_else_fails_its_attempt(watcher):
    published = await seen(watcher, ("ADDED", v1pod(size="1")), ("DELETED", v1pod(size="1")))
    assert [type(e) for e in published] == [OperationRunning, OperationFailed]
    assert published[1].reason == DELETED_REASON


async def test_a_relist_treats_pods_no_longer_listed_as_deleted(watcher):
    await seen(watcher, ("ADDED", v1pod(annotations=PREEMPTED_BY)),
               ("ADDED", v1pod("op-g-1-w-0", replica="w-0", annotations=PREEMPTED_BY)))
    await asyncio.to_thread(watcher.listed, [], "9")
    assert [type(e) for e in watcher.publish] == [OperationPreempted]


async def test_a_preemption_whose_pods_all_vanished_unseen_is_reported_after_a_list(watcher):
    request = PreemptRequested(op_id="g", at=T0, attempt=1, pod_names=["op-g-1"], namespace="ns",
                               preemptor="urgent", reason="reclaim")
    done = OperationPreempted(op_id="h", at=T0, attempt=0)
    watcher.seed_preemptions([request, PreemptRequested(op_id="h", at=T0, pod_names=[], namespace="ns",
                                                        preemptor="x", reason="reclaim")], [done])
    assert set(watcher.preempting) == {("g", 1)}
    await asyncio.to_thread(watcher.listed, [], "9")
    assert [(type(e), e.op_id, e.preemptor, e.reason) for e in watcher.publish] == [
        (OperationPreempted, "g", "urgent", "reclaim")]
    assert watcher.preempting == {}


async def test_a_preemption_whose_pods_are_still_listed_waits_for_their_deletion(watcher):
    watcher.expect_preemption(PreemptRequested(op_id="g", at=T0, attempt=1, pod_names=["op-g-0"], namespace="ns",
                                               preemptor="urgent", reason="reclaim"))
    await asyncio.to_thread(watcher.listed, [v1pod()], "9")
    assert watcher.publish == []


# ---- the releaser: annotate first, then delete --------------------------------------------------------

class FakeKube:
    def __init__(self, *pods: str, labelled: tuple[str, ...] = ()) -> None:
        self.pods = set(pods)
        self.labelled = list(labelled)
        self.calls: list[tuple] = []

    async def annotate_pod(self, name, namespace, annotations) -> bool:
        self.calls.append(("annotate", name, dict(annotations)))
        return name in self.pods

    async def delete_pod(self, name, namespace, grace_s) -> bool:
        self.calls.append(("delete", name, grace_s))
        found = name in self.pods
        self.pods.discard(name)
        return found

    async def pod_names(self, namespace, selector) -> list[str]:
        self.calls.append(("list", selector))
        return [n for n in self.labelled if n in self.pods]


def releaser(kube: FakeKube) -> Releaser:
    return Releaser(kube, Settings(preempt_grace_s=7, stop_grace_s=11, gang_timeout_s=120), get_log("test"))


def preempt_request(*names: str) -> PreemptRequested:
    return PreemptRequested(op_id="g", at=T0, attempt=0, pod_names=list(names), namespace="ns",
                            preemptor="urgent", reason="within_queue", message="for a higher priority")


async def test_preemption_annotates_each_pod_before_deleting_it_with_the_preempt_grace():
    kube = FakeKube("op-g-0", "op-g-0-w-0")
    assert await releaser(kube).preempt(preempt_request("op-g-0", "op-g-0-w-0"), T0) is None  # the watcher reports
    annotate = [c for c in kube.calls if c[0] == "annotate"]
    assert annotate[0][2] == {**PREEMPTED_BY, "opsched.io/preempt-message": "for a higher priority"}
    assert [c[0] for c in kube.calls] == ["annotate", "annotate", "delete", "delete"]
    assert {c[2] for c in kube.calls if c[0] == "delete"} == {7}


async def test_preemption_of_pods_already_gone_is_reported_at_once():
    event = await releaser(FakeKube()).preempt(preempt_request("op-g-0", "op-g-0-w-0"), t(2))
    assert event == OperationPreempted(op_id="g", at=t(2), attempt=0, preemptor="urgent", reason="within_queue",
                                       message="for a higher priority")


async def test_stop_releases_every_pod_of_the_attempt_found_by_its_labels():
    kube = FakeKube("op-g-0", "op-g-0-w-0", "op-g-0-w-1", labelled=("op-g-0", "op-g-0-w-0", "op-g-0-w-1"))
    request = StopRequested(op_id="g", at=T0, attempt=0, pod_name="op-g-0", namespace="ns")
    event = await releaser(kube).stop(request, t(1))
    assert event == OperationStopped(op_id="g", at=t(1), attempt=0)
    assert kube.pods == set()
    assert ("list", "app.kubernetes.io/managed-by=opsched,opsched.io/op-id=g,opsched.io/attempt=0") in kube.calls
    assert all(c[2] == STOPPED_ANN for c in kube.calls if c[0] == "annotate")
    assert {c[2] for c in kube.calls if c[0] == "delete"} == {11}


async def test_a_timed_out_gang_is_annotated_then_evicted_then_deleted_once():
    kube = FakeKube("op-g-0", "op-g-0-worker-0", labelled=("op-g-0", "op-g-0-worker-0"))
    clock, stop = FakeClock(T0), asyncio.Event()
    views = [pod("main", size=2), pod("worker-0", "Pending", size=2)]

    async def publish(event):
        kube.calls.append(("publish", event))

    async def tick(seconds: float) -> None:
        clock.advance(seconds)
        for _ in range(20):
            await asyncio.sleep(0)

    task = asyncio.create_task(check_gangs(lambda: [views], releaser(kube), publish, clock, stop))
    await tick(119)
    assert kube.calls == []  # created at T0: not yet
    await tick(1)
    await tick(1)
    await tick(1)
    stop.set()
    await asyncio.wait_for(task, 2)
    assert [c[0] for c in kube.calls if c[0] != "list"] == ["annotate", "annotate", "publish", "delete", "delete"]
    (published,) = [c[1] for c in kube.calls if c[0] == "publish"]
    assert published == OperationEvicted(op_id="g", at=t(120), attempt=0, reason=GANG_TIMEOUT,
                                         message="1/2 pods running after 120s", retry_after_s=10.0)
    assert all(c[2] == TIMEOUT_ANN for c in kube.calls if c[0] == "annotate")
    assert kube.pods == set()
