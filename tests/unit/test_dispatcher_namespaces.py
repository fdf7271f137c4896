"""Least privilege: the dispatcher uses pods in its queue namespaces only (OPSCHED_POD_NAMESPACES, one RBAC
Role each) and creates no namespace. A pod whose namespace is not one of them, does not exist or is forbidden
fails its attempt with a reason naming the namespace and the fix, never crashing nor creating a namespace."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from opsched.bus import logging as oplog
from opsched.proto.events import OperationFailed
from opsched.rules.failures import will_retry
from opsched.services.dispatcher.dispatch import dispatch
from opsched.services.dispatcher.k8s import Kube
from opsched.services.dispatcher.metrics import PodMeasures
from opsched.services.dispatcher.preempt import Releaser
from opsched.services.dispatcher.watcher import PodWatcher
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, admitted, op
from tests.builders.clock import FakeClock
from tests.builders.preemption import preempt_requested
from tests.waiting import eventually


class Core:
    """Records every call by name; ``create_namespaced_pod`` raises ``error`` when given one."""

    def __init__(self, error: ApiException | None = None) -> None:
        self.error, self.calls = error, []

    def __getattr__(self, name: str):
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name == "create_namespaced_pod" and self.error is not None:
                raise self.error
            return type("Answer", (), {"data": b'{"items": []}', "items": []})()
        return call


def api_error(status: int, body: dict) -> ApiException:
    error = ApiException(status=status, reason="Forbidden" if status == 403 else "Not Found")
    error.body = json.dumps(body)
    return error


async def failed_dispatch(core: Core, namespace: str, namespaces: tuple[str, ...] = ()) -> OperationFailed:
    kube = Kube.__new__(Kube)
    kube.core, kube.request_timeout_s, kube.namespaces = core, 5.0, namespaces  # type: ignore[assignment]
    kube.measures = PodMeasures()
    ctx = Context("dispatcher", FakeClock(T0), Settings(), oplog.get("dispatcher"))
    event = await dispatch(admitted(op("train").build(), namespace=namespace), ctx, kube,
                           Releaser(kube, Settings(), oplog.get("test")))
    assert isinstance(event, OperationFailed), event
    assert event.reason == "NamespaceRefused" and f"namespace {namespace} " in event.message
    assert "OPSCHED_POD_NAMESPACES" in event.message and "22-queue-namespace" in event.message  # the fix
    assert "create_namespace" not in core.calls
    assert not will_retry(event.reason, max_retries=3, retries_used=0)  # until an admin acts, retrying cannot help
    return event


async def test_a_pod_outside_the_dispatchers_queue_namespaces_is_refused_without_asking_the_api():
    core = Core()
    event = await failed_dispatch(core, "elsewhere", namespaces=("opsched", "team-a"))
    assert "is not one of the dispatcher's (opsched, team-a)" in event.message
    assert "create_namespaced_pod" not in core.calls


async def test_a_namespace_that_does_not_exist_fails_the_attempt_and_is_not_created():
    core = Core(api_error(404, {"message": 'namespaces "team-x" not found', "details": {"kind": "namespaces"}}))
    event = await failed_dispatch(core, "team-x")
    assert "does not exist (the dispatcher creates no namespace)" in event.message
    assert core.calls == ["create_namespaced_pod"]


async def test_a_namespace_whose_rbac_forbids_the_dispatcher_fails_the_attempt_with_the_api_reason():
    message = ('pods is forbidden: User "system:serviceaccount:opsched-system:opsched-dispatcher" cannot create '
               'resource "pods" in API group "" in the namespace "team-b"')
    event = await failed_dispatch(Core(api_error(403, {"message": message})), "team-b", namespaces=("team-b",))
    assert message in event.message


@pytest.mark.parametrize(("value", "expected"), [
    ("", ()), ("opsched", ("opsched",)), (" team-a, opsched,,team-a ", ("team-a", "opsched")),
])
def test_the_queue_namespaces_setting_is_a_comma_separated_list(monkeypatch, value, expected):
    monkeypatch.setenv("OPSCHED_POD_NAMESPACES", value)
    assert Settings().queue_namespaces() == expected


def test_a_namespaces_watcher_remembers_only_the_preemptions_of_its_namespace():
    """Else it would report another namespace's preemption as done: none of its pods are in its own list."""
    watcher = PodWatcher(core=None, publish=None, clock=FakeClock(T0), log=oplog.get("test"),  # type: ignore[arg-type]
                         namespace="team-a")
    watcher.seed_preemptions([preempt_requested("a", namespace="team-a"), preempt_requested("b", namespace="b")], [])
    assert set(watcher.preempting) == {("a", 0)}
    assert watcher.follows("team-a") and not watcher.follows("team-b")


class Warnings:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def warning(self, what: str, **fields: Any) -> None:
        self.seen.append((what, fields))

    error = info = warning


async def test_a_pod_watch_refused_by_rbac_says_which_grant_it_lacks():
    class Forbidding:
        def list_namespaced_pod(self, namespace: str, **kwargs: Any) -> Any:
            raise ApiException(status=403, reason="Forbidden")

    log = Warnings()
    watcher = PodWatcher(core=Forbidding(), publish=None, clock=FakeClock(T0), log=log,  # type: ignore[arg-type]
                         namespace="team-a")
    watcher.start()
    try:
        await eventually(lambda: _true(bool(log.seen)), "the refused list to be logged")
    finally:
        watcher.stop()
        await asyncio.to_thread(watcher._thread.join, 10)  # type: ignore[union-attr]
    what, fields = log.seen[0]
    assert what == "pod_watch_team-a_failed" and fields["status"] == 403
    assert "OPSCHED_POD_NAMESPACES" in fields["fix"] and "Role" in fields["fix"]


async def _true(value: bool) -> bool:
    return value


def test_opsched_up_creates_the_default_and_every_queues_namespace_as_the_admin(tmp_path):
    """The dispatcher creates none: `opsched up`'s local cluster (admin credentials) creates them first."""
    from opsched.embedded import namespace_levels_of

    queues = tmp_path / "queues.yaml"
    queues.write_text("queues:\n  - {name: a, concurrency: 1, namespace: team-a}\n  - {name: b, concurrency: 1}\n"
                      "  - {name: c, concurrency: 1, namespace: opsched}\ndefaultQueue: a\n")
    assert set(namespace_levels_of("opsched", queues)) == {"opsched", "team-a"}
    assert set(namespace_levels_of("opsched", None)) == {"opsched"}
    (tmp_path / "bad.yaml").write_text("queues: 7\n")
    assert set(namespace_levels_of("opsched", tmp_path / "bad.yaml")) == {"opsched"}  # admission refuses the file
