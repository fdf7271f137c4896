"""Gangs from the API objects: a pod read as a member of its attempt, and the pod watcher (grouping,
dedup, releases, re-lists)."""
from __future__ import annotations

import asyncio

import pytest

from opsched.bus.logging import get as get_log
from opsched.proto.events import (
    OperationFailed,
    OperationPreempted,
    OperationRunning,
    OperationSucceeded,
    PreemptRequested,
)
from opsched.rules.podspec import ANNOTATION_EVICTED, ANNOTATION_STOPPED
from opsched.services.dispatcher.gang import DELETED_REASON, GANG_FAILED, GANG_FINISHED, assess
from opsched.services.dispatcher.kobjects import Pod
from opsched.services.dispatcher.podstatus import view_of
from opsched.services.dispatcher.watcher import PodWatcher
from tests.builders import T0
from tests.builders.clock import FakeClock
from tests.unit.gang_pods import PREEMPTED_BY, STOPPED_ANN, v1pod

# ---- from the API objects -------------------------------------------------------------------------


def event_for(pod, now):
    """What one pod alone means (a gang of one), as the watcher would assess it."""
    view = view_of(pod)
    return None if view is None else assess([view], None, now)

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


async def seen(w: PodWatcher, *changes: tuple[str, Pod]) -> list:
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


async def test_a_gang_whose_master_succeeded_releases_its_workers_still_running(watcher):
    published = await seen(watcher, ("ADDED", v1pod("op-g-1-w-0", replica="w-0")),
                           ("MODIFIED", v1pod(phase="Succeeded")))
    assert [type(e) for e in published] == [OperationSucceeded]
    assert watcher.freed == [(["op-g-1-w-0"], {ANNOTATION_EVICTED: GANG_FINISHED})]


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


async def test_an_attempt_is_forgotten_only_once_its_last_event_is_published(watcher):
    main, worker = v1pod(annotations=PREEMPTED_BY), v1pod("op-g-1-w-0", replica="w-0", annotations=PREEMPTED_BY)
    published = await seen(watcher, ("ADDED", main), ("ADDED", worker), ("DELETED", main))

    async def unavailable(event):
        raise ConnectionError("NATS is down")

    watcher.publish = unavailable
    await seen(watcher, ("DELETED", worker))
    assert ("g", 1) in watcher.attempts  # kept: the preemption is still to be reported
    watcher.publish = published
    await asyncio.to_thread(watcher.listed, [], "2")  # the next re-list retries it
    assert [type(e) for e in published] == [OperationPreempted]
    assert watcher.attempts == {}


async def test_a_final_event_not_published_is_tried_again_when_the_server_ends_a_watch(watcher):
    """A healthy watch may never re-list: each watch the server ends (every minute) retries too."""
    published = await seen(watcher, ("ADDED", v1pod(size="1")))

    async def unavailable(event):
        raise ConnectionError("NATS is down")

    watcher.publish = unavailable
    await seen(watcher, ("DELETED", v1pod(size="1")))
    assert ("g", 1) in watcher.attempts
    watcher.publish = published
    await asyncio.to_thread(watcher.resumed)
    assert [type(e) for e in published] == [OperationRunning, OperationFailed]
    assert published[1].reason == DELETED_REASON and watcher.attempts == {}
