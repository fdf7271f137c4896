"""Gangs: the releaser annotates every pod of an attempt first, then deletes them (preempt, stop,
a timed-out gang)."""
from __future__ import annotations

import asyncio

from opsched.bus.logging import get as get_log
from opsched.proto.events import (
    OperationEvicted,
    OperationPreempted,
    OperationStopped,
    PreemptRequested,
    StopRequested,
)
from opsched.services.dispatcher.gang import GANG_TIMEOUT
from opsched.services.dispatcher.preempt import Releaser, check_gangs
from opsched.services.runtime.settings import Settings
from tests.builders import T0, t
from tests.builders.clock import FakeClock
from tests.unit.gang_pods import PREEMPTED_BY, STOPPED_ANN, TIMEOUT_ANN, pod

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

    async def delete_service(self, name, namespace) -> bool:
        self.calls.append(("delete_service", name))
        return True

    async def delete_config_map(self, name, namespace) -> bool:
        self.calls.append(("delete_config_map", name))
        return False

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
    assert [c[0] for c in kube.calls] == ["annotate", "annotate", "delete", "delete", "delete_service",
                                          "delete_config_map"]
    assert kube.calls[-2:] == [("delete_service", "op-g-0"), ("delete_config_map", "op-g-0-hostfile")]  # its rendezvous
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
    assert [c[0] for c in kube.calls if c[0] != "list"] == [
        "annotate", "annotate", "publish", "delete", "delete", "delete_service", "delete_config_map"]
    (published,) = [c[1] for c in kube.calls if c[0] == "publish"]
    assert published == OperationEvicted(op_id="g", at=t(120), attempt=0, reason=GANG_TIMEOUT,
                                         message="1/2 pods running after 120s", retry_after_s=10.0)
    assert all(c[2] == TIMEOUT_ANN for c in kube.calls if c[0] == "annotate")
    assert kube.pods == set()
