"""The dispatcher's Kubernetes path: each call runs on the dispatcher's own threads and reads its raw body
(which hands the connection back to the pool), the pool holds a connection per call in flight and per watch,
and the reconciler and the expiry check read the pod watchers' pods while they are synced, listing only
when one is not."""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from opsched.bus.logging import get as get_log
from opsched.services.dispatcher.k8s import Kube, load_api_client
from opsched.services.dispatcher.service import Dispatcher, _connections
from opsched.services.dispatcher.watcher import PodWatcher
from opsched.services.runtime.settings import Settings
from tests.builders import T0
from tests.builders.clock import FakeClock
from tests.unit.gang_pods import v1pod

POD = b'{"metadata": {"name": "op-l-0", "namespace": "ns", "labels": {"opsched.io/op-id": "l"}}}'
LISTED = b'{"items": [' + POD + b']}'


class Answer:
    """A raw answer (``_preload_content=False``) that records whether, and on which thread, it was read."""

    def __init__(self, body: bytes, reads: list[str]) -> None:
        self.body, self.reads = body, reads

    @property
    def data(self) -> bytes:
        self.reads.append(threading.current_thread().name)
        return self.body


class Core:
    def __init__(self) -> None:
        self.reads: list[str] = []
        self.lists = 0

    def __getattr__(self, name: str):
        def call(*args: Any, **kwargs: Any) -> Answer:
            assert kwargs["_preload_content"] is False
            self.lists += name.startswith("list_")
            return Answer(LISTED if name.startswith("list_") else POD if name.startswith("read_") else b"{}",
                          self.reads)
        return call


@pytest.fixture
def kube() -> Kube:
    k = Kube(client.ApiClient(), concurrency=4)
    k.core = Core()  # type: ignore[assignment]
    return k


def kubeconfig(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return path


async def test_every_call_reads_its_body_on_the_dispatchers_own_threads(kube):
    await kube.create_pod({"metadata": {"name": "op-a-0", "namespace": "ns"}})
    await kube.annotate_pod("op-a-0", "ns", {"k": "v"})
    await kube.delete_pod("op-a-0", "ns", 0)
    assert await kube.pod_labels("op-l-0", "ns") == {"opsched.io/op-id": "l"}
    assert await kube.pod_names("ns", "opsched.io/op-id=l") == ["op-l-0"]
    reads = kube.core.reads  # type: ignore[attr-defined]
    assert len(reads) == 5 and all(name.startswith("kube") for name in reads)  # not asyncio's default executor


def test_the_pool_holds_a_connection_per_call_in_flight_and_per_watch(tmp_path):
    settings = Settings(kube_concurrency=24, pod_namespaces="team-a,team-b")
    assert _connections(settings) == 24 + 2 + 1 + 7  # two pod watches, the node watch, a watch per queue resource kind
    assert _connections(Settings(kube_concurrency=24, pod_namespaces="team-a,team-b", queue_resources="off")) == 27
    assert _connections(Settings(kube_concurrency=24, pod_namespaces="team-a,team-b", agent="east")) == 27  # not watched
    api = load_api_client(kubeconfig(tmp_path / "kubeconfig"), _connections(settings))
    assert api.configuration.connection_pool_maxsize == 34
    assert api.rest_client.pool_manager.connection_pool_kw["maxsize"] == 34


async def watching(*held: list[str] | None) -> list[PodWatcher]:
    """Pod watchers that saw these pods (Pending), and one deleted (None: not synced)."""
    async def publish(event: Any) -> None:
        pass

    watchers = []
    for pods in held:
        w = PodWatcher(core=None, publish=publish, clock=FakeClock(T0), log=get_log("test"))  # type: ignore[arg-type]
        w._loop = asyncio.get_running_loop()
        changes = [("ADDED", v1pod(name, "Pending")) for name in pods or []] + [("DELETED", v1pod("op-gone-0"))]
        await asyncio.to_thread(lambda: [w.observe(kind, pod) for kind, pod in changes])  # as its thread does
        w.synced = pods is not None
        watchers.append(w)
    return watchers


async def test_while_every_pod_watch_is_synced_the_reconciler_reads_their_pods_and_lists_nothing(kube):
    dispatcher = Dispatcher(Settings(dispatcher_mode="null"))
    dispatcher.kube = kube
    dispatcher.watchers = await watching(["op-a-0", "op-b-0"], ["op-c-0"])
    assert [v.name for v in await dispatcher._list_pods()] == ["op-a-0", "op-b-0", "op-c-0"]  # not the deleted one
    assert [p.metadata.name for p in await dispatcher._pod_objects()] == ["op-a-0", "op-b-0", "op-c-0"]  # expiry's
    assert kube.core.lists == 0  # type: ignore[attr-defined]


async def test_with_a_pod_watch_not_synced_the_reconciler_lists_the_pods(kube):
    dispatcher = Dispatcher(Settings(dispatcher_mode="null"))
    dispatcher.kube = kube
    dispatcher.watchers = await watching(["op-a-0"], None)
    assert [v.name for v in await dispatcher._list_pods()] == ["op-l-0"]
    assert kube.core.lists == 1  # type: ignore[attr-defined]
