"""What each service can build is what its NATS user may publish (issue 27): the subject table
(``proto.permissions``) is checked against the wire messages each service's code constructs, found by reading its
source. A service that can build an event its user may not publish fails here — not on a user's scheduler, where
the server refuses the publish (a cache hit's ``succeeded`` once wedged admission this way).

What a service builds: every wire class called (``OperationAdmitted(...)``), or chosen as a value and called
later (``kind = OperationFailed if failed else OperationRejected``), in ``services/<name>/``; what
``services/runtime`` and ``bus`` build for every service (the error event and ``handler_failed`` of a dead letter,
and the leader's claim for a service that leads); and what a ``proto`` or ``rules`` helper it calls builds
(``SpendTotals.rollups`` → ``spend_rolled``)."""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from opsched.proto import cluster, commands, config, events, leases, permissions, queue_stops, schedules, subjects
from tests.builders.streams import matches

ROOT = Path(__file__).resolve().parents[2]
MODULES = (events, schedules, config, leases, cluster, commands, queue_stops)
WIRE = {name: cls for module in MODULES for name, cls in vars(module).items()
        if isinstance(cls, type) and issubclass(cls, msgspec.Struct) and cls.__struct_config__.tag is not None}


def tag_of(cls: type) -> str:
    return cls.__struct_config__.tag  # type: ignore[attr-defined]


def sample_subjects(cls: type) -> list[str]:
    """The subjects a message of ``cls`` may go on (as ``bus.addressing.subject_for`` puts it)."""
    kind = tag_of(cls)
    if issubclass(cls, events.Event):
        routed = [subjects.routed(kind, "op-1", "agent-2")] if "agent" in cls.__struct_fields__ else []
        return [subjects.event(kind, "op-1"), *routed]
    return {
        config.QueuesConfigured: [subjects.CONFIG_QUEUES], config.PricesConfigured: [subjects.CONFIG_PRICES],
        queue_stops.QueueStopSet: [subjects.queue_stop_subject("gpu")],
        leases.LeaderClaimed: [subjects.lease_claim(subjects.ADMISSION_ROLE)],
        cluster.NodeObserved: [subjects.node("gpu-0"), subjects.node("gpu-0", "agent-2")],
        cluster.NodeRemoved: [subjects.node("gpu-0")], cluster.AgentHeartbeat: [subjects.agent_heartbeat("agent-2")],
        commands.SubmitOperation: [subjects.submit("gpu", "admission")],  # a schedule's runs, as admission
        config.SetQueues: [subjects.command(subjects.SET_QUEUES, "dispatcher")],  # the queue resources', as the dispatcher
    }.get(cls, [f"<no subject for {cls.__name__}>"])


def _sources(folder: Path) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(folder.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _built(tree: ast.AST) -> set[str]:
    """Wire classes called, or picked as a value to call later (an assignment or a conditional expression)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in WIRE:
            found.add(node.func.id)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
            found.update(v.id for v in values if isinstance(v, ast.Name) and v.id in WIRE)
    return found


def _called_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def proto_builders() -> dict[str, set[str]]:
    """Functions and methods of ``proto`` and ``rules`` that build wire messages: name -> the classes they build."""
    found: dict[str, set[str]] = {}
    for path, tree in [*_sources(ROOT / "proto"), *_sources(ROOT / "rules")]:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _built(node):
                found.setdefault(node.name, set()).update(_built(node))
    return found


def _uses_leadership(name: str) -> bool:
    return any("Leadership(" in path.read_text() for path in (ROOT / "services" / name).rglob("*.py"))


def built_by(name: str) -> dict[str, str]:
    """Every wire class service ``name`` can build -> where (for the failure message)."""
    where: dict[str, str] = {}
    helpers = proto_builders()
    for path, tree in _sources(ROOT / "services" / name):
        for cls in _built(tree):
            where.setdefault(cls, str(path.relative_to(ROOT)))
        for called in _called_names(tree) & helpers.keys():
            for cls in helpers[called]:
                where.setdefault(cls, f"{path.relative_to(ROOT)} (calls proto's {called})")
    for path, tree in [*_sources(ROOT / "services" / "runtime"), *_sources(ROOT / "bus")]:
        for cls in _built(tree):
            if cls != "LeaderClaimed" or _uses_leadership(name):
                where.setdefault(cls, f"{path.relative_to(ROOT)} (the runtime, for every service)")
    return where


def may_publish(p: permissions.Permissions, subject: str) -> bool:
    return any(matches(allowed, subject) for allowed in p.publish) and not any(
        matches(denied, subject) for denied in p.deny)


# Built but never published: the command that admission's restart and copy hand to its own submit handler.
NOT_PUBLISHED = {"admission": {"SubmitOperation"}}


@pytest.mark.parametrize("name", permissions.SERVICES)
def test_every_message_a_service_builds_is_one_its_nats_user_may_publish(name):
    allowed = permissions.service(name)
    refused = {cls: f"{where}: {subject}" for cls, where in built_by(name).items()
               for subject in sample_subjects(WIRE[cls])
               if not may_publish(allowed, subject) and cls not in NOT_PUBLISHED.get(name, ())}
    assert not refused, (f"{name} can build messages its NATS user may not publish (proto/permissions.py EMITS): "
                         f"{refused}")


@pytest.mark.parametrize("name", permissions.SERVICES)
def test_every_event_a_service_may_publish_is_one_it_can_build(name):
    """The other way round: the table grants no event kind that nothing in the service builds."""
    built = [subject for cls in built_by(name) for subject in sample_subjects(WIRE[cls])]
    granted = permissions.EMITS[name] + permissions.SHARED_EMITS
    unused = [kind for kind in granted if not any(matches(subjects.events_of(kind), s) for s in built)]
    assert not unused, f"{name} is granted events it never builds: {unused}"


def test_the_scan_finds_what_it_must():
    """The scan itself: known builders are found (a scan that finds nothing would pass everything)."""
    admission, dispatcher = built_by("admission"), built_by("dispatcher")
    assert {"OperationAdmitted", "OperationSucceeded", "SpendRolled", "LeaderClaimed", "ErrorRaised",
            "HandlerFailed", "OperationFailed", "ScheduleFired"} <= admission.keys()
    assert {"OperationRunning", "NodeObserved", "AgentHeartbeat"} <= dispatcher.keys()
    assert "LeaderClaimed" not in built_by("cache")


def test_a_removed_permission_is_caught(monkeypatch):
    """Take ``succeeded`` (a cache hit's end) away from admission: the check above names it."""
    emits = dict(permissions.EMITS)
    emits["admission"] = tuple(k for k in emits["admission"] if k != "succeeded")
    monkeypatch.setattr(permissions, "EMITS", emits)
    with pytest.raises(AssertionError, match="OperationSucceeded"):
        test_every_message_a_service_builds_is_one_its_nats_user_may_publish("admission")
