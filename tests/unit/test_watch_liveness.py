"""Liveness of the dispatcher's watch threads: a pod or node watch whose thread died (an exception escaped
its loop) or that makes no progress (a call hung despite its timeouts) makes /healthz answer 503, naming
the watch, so that Kubernetes restarts the dispatcher. An API server that refuses calls is no such thing:
the loop retries, which is progress."""
from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

from kubernetes import client

from opsched.bus.logging import get as get_log
from opsched.services.dispatcher.listwatch import STUCK_AFTER_S
from opsched.services.dispatcher.service import Dispatcher
from opsched.services.dispatcher.watcher import PodWatcher
from opsched.services.runtime.health import HealthServer
from opsched.services.runtime.runner import report
from opsched.services.runtime.settings import Settings
from tests.builders import T0
from tests.builders.clock import FakeClock
from tests.waiting import eventually


class Killed(BaseException):
    """What escapes the watch loop (its ``except Exception`` does not catch it)."""


class Core:
    """A CoreV1Api whose pod list does what the test says: raise, block, or answer nothing."""

    def __init__(self, behave) -> None:
        self.behave = behave
        self.lists = 0

    def list_pod_for_all_namespaces(self, **kwargs: Any) -> client.V1PodList:
        self.lists += 1
        return self.behave()


def dispatcher_watching(core: Core, clock: FakeClock) -> Dispatcher:
    """A dispatcher (null mode: no kubeconfig needed) given a pod watcher on ``core``."""
    dispatcher = Dispatcher(Settings(dispatcher_mode="null"), clock)
    dispatcher.watchers = [PodWatcher(core, publish=None, clock=clock, log=get_log("test"))]  # type: ignore[arg-type]
    return dispatcher


def healthz(dispatcher: Dispatcher) -> tuple[str, dict]:
    server = HealthServer(lambda: report([dispatcher], [True]))
    return server._answer("/healthz")


async def test_a_watch_thread_killed_by_an_exception_makes_healthz_503_naming_the_watch():
    def die() -> None:
        raise Killed("injected")
    dispatcher = dispatcher_watching(Core(die), FakeClock(T0))
    assert healthz(dispatcher)[0] == "200 OK"  # not started yet: nothing to judge
    dispatcher.watchers[0].start()
    await asyncio.to_thread(dispatcher.watchers[0]._thread.join, 10)

    status, body = healthz(dispatcher)
    assert status == "503 Service Unavailable"
    assert list(body["not_alive"]["dispatcher"]) == ["pod_watch"]
    assert "died" in body["not_alive"]["dispatcher"]["pod_watch"] and "injected" in body["not_alive"]["dispatcher"]["pod_watch"]


async def test_a_watch_thread_stuck_in_a_call_longer_than_its_timeouts_allow_makes_healthz_503():
    release = threading.Event()
    core = Core(lambda: release.wait(30) and SimpleNamespace(data=b'{"items": []}'))
    clock = FakeClock(T0)
    dispatcher = dispatcher_watching(core, clock)
    dispatcher.watchers[0].start()
    try:
        await eventually(lambda: _true(core.lists > 0), "the watch thread to call the API")
        clock.advance(STUCK_AFTER_S - 1)
        assert healthz(dispatcher)[0] == "200 OK"  # a silent watch within its timeouts is fine
        clock.advance(2)
        status, body = healthz(dispatcher)
        assert status == "503 Service Unavailable" and "no progress" in body["not_alive"]["dispatcher"]["pod_watch"]
    finally:
        dispatcher.watchers[0].stop()
        release.set()
        await asyncio.to_thread(dispatcher.watchers[0]._thread.join, 10)
    assert healthz(dispatcher)[0] == "200 OK"  # stopped (draining): not a failure


async def test_an_api_server_that_refuses_every_call_keeps_the_watch_alive():
    def refuse() -> None:
        raise ConnectionRefusedError("connection refused")
    core = Core(refuse)
    clock = FakeClock(T0)
    dispatcher = dispatcher_watching(core, clock)
    dispatcher.watchers[0].start()
    try:
        for tries in (1, 2):  # each retry (1 s apart) is progress
            clock.advance(STUCK_AFTER_S - 1)
            await eventually(lambda n=tries: _true(core.lists > n), "the watch loop to retry", timeout=10)
            assert healthz(dispatcher)[0] == "200 OK"
    finally:
        dispatcher.watchers[0].stop()
        await asyncio.to_thread(dispatcher.watchers[0]._thread.join, 10)


async def _true(value: bool) -> bool:
    return value
