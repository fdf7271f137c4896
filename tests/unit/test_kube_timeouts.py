"""Every Kubernetes call the dispatcher makes has a timeout, so a black-holed API server cannot hang it: the
calls through ``Kube`` (handlers, releases, expiry), the reconciler's list, and the lists and watches of the
pod and node watch threads (a client read timeout, and ``timeout_seconds`` on each watch)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client

from opsched.bus.logging import get as get_log
from opsched.services.dispatcher.k8s import Kube
from opsched.services.dispatcher.listwatch import ListWatch
from opsched.services.dispatcher.nodewatch import NodeWatcher
from opsched.services.dispatcher.service import Dispatcher
from opsched.services.dispatcher.watcher import PodWatcher
from opsched.services.runtime.settings import Settings
from tests.builders import T0
from tests.builders.clock import FakeClock

Call = tuple[str, dict[str, Any]]


class RecordingCore:
    """A CoreV1Api that records each call's keyword arguments and answers with nothing; the first watch
    call stops the watcher (``stop``) so that its thread ends."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.stop: ListWatch | None = None

    def _answer(self, name: str, kwargs: dict[str, Any]) -> Any:
        self.calls.append((name, kwargs))
        if kwargs.get("watch"):
            assert self.stop is not None
            self.stop.stop()
            raise ConnectionError("the test's API server ends every watch")
        return SimpleNamespace(data=b'{"items": [], "metadata": {"resourceVersion": "7"}}')

    def list_pod_for_all_namespaces(self, **kwargs: Any) -> client.V1PodList:
        return self._answer("list_pod_for_all_namespaces", kwargs)

    def list_node(self, **kwargs: Any) -> client.V1NodeList:
        return self._answer("list_node", kwargs)

    def list_namespaced_pod(self, namespace: str, **kwargs: Any) -> client.V1PodList:
        return self._answer("list_namespaced_pod", {"namespace": namespace, **kwargs})

    def create_namespaced_pod(self, namespace: str, body: Any, **kwargs: Any) -> Any:
        return self._answer("create_namespaced_pod", kwargs)

    def create_namespace(self, body: Any, **kwargs: Any) -> Any:
        return self._answer("create_namespace", kwargs)

    def patch_namespaced_pod(self, name: str, namespace: str, body: Any, **kwargs: Any) -> Any:
        return self._answer("patch_namespaced_pod", kwargs)

    def delete_namespaced_pod(self, name: str, namespace: str, **kwargs: Any) -> Any:
        return self._answer("delete_namespaced_pod", kwargs)


def untimed(calls: list[Call]) -> list[str]:
    return [name for name, kwargs in calls if not kwargs.get("_request_timeout")]


@pytest.fixture
def kube() -> Kube:
    k = Kube(client.ApiClient(), request_timeout_s=3.0)
    k.core = RecordingCore()  # type: ignore[assignment]
    return k


async def test_every_call_through_kube_has_the_request_timeout(kube):
    pod = {"metadata": {"name": "op-a-0", "namespace": "ns"}}
    await kube.create_pod(pod)
    await kube.annotate_pod("op-a-0", "ns", {"k": "v"})
    await kube.list_pods("opsched.io/op-id")
    await kube.pod_names("ns", "opsched.io/op-id=a")
    await kube.delete_pod("op-a-0", "ns", 0)
    calls = kube.core.calls  # type: ignore[attr-defined]
    assert len(calls) == 5 and untimed(calls) == []
    assert {kwargs["_request_timeout"] for _, kwargs in calls} == {3.0}
    assert all(kwargs["_preload_content"] is False for _, kwargs in calls)  # raw JSON: never the client's models


async def test_the_reconcilers_list_has_a_timeout(kube):
    dispatcher = Dispatcher(Settings(dispatcher_mode="null"))
    dispatcher.kube = kube
    assert await dispatcher._list_pods() == []
    assert [name for name, _ in kube.core.calls] == ["list_pod_for_all_namespaces"]  # type: ignore[attr-defined]
    assert untimed(kube.core.calls) == []  # type: ignore[attr-defined]


async def test_given_its_queue_namespaces_every_pod_list_is_one_of_them_with_a_timeout(kube):
    """RBAC grants the dispatcher pods in its queue namespaces only: it never lists every namespace then."""
    kube.namespaces = ("team-a", "team-b")
    dispatcher = Dispatcher(Settings(dispatcher_mode="null"))
    dispatcher.kube = kube
    assert await dispatcher._list_pods() == []  # the reconciler's
    assert await kube.list_pods("opsched.io/op-id") == []  # the expiry check's
    calls = kube.core.calls  # type: ignore[attr-defined]
    assert [(name, kwargs["namespace"]) for name, kwargs in calls] == [
        ("list_namespaced_pod", "team-a"), ("list_namespaced_pod", "team-b")] * 2
    assert untimed(calls) == []


@pytest.mark.parametrize("make", [
    lambda core: PodWatcher(core, publish=None, clock=FakeClock(T0), log=get_log("test")),  # type: ignore[arg-type]
    lambda core: PodWatcher(core, publish=None, clock=FakeClock(T0), log=get_log("test"),  # type: ignore[arg-type]
                            namespace="team-a"),
    lambda core: NodeWatcher(core, publish=None, clock=FakeClock(T0), log=get_log("test")),  # type: ignore[arg-type]
], ids=["pod_watch", "pod_watch_of_one_namespace", "node_watch"])
async def test_the_watch_threads_list_and_watch_with_timeouts(make):
    core = RecordingCore()
    watcher = core.stop = make(core)
    watcher.start()
    await asyncio.to_thread(watcher._thread.join, 10)
    assert not watcher._thread.is_alive()
    (listed, list_kwargs), (watched, watch_kwargs) = core.calls
    assert listed == watched and untimed(core.calls) == []
    assert list_kwargs.get("namespace") == watch_kwargs.get("namespace") == getattr(watcher, "namespace", None)
    assert watch_kwargs["watch"] is True and watch_kwargs["resource_version"] == "7"
    assert list_kwargs["_preload_content"] is watch_kwargs["_preload_content"] is False  # raw JSON, msgspec
    assert 0 < watch_kwargs["timeout_seconds"] < watch_kwargs["_request_timeout"][1]  # the server ends it first
