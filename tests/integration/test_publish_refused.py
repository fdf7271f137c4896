"""A publish the NATS server refuses is not an outage (issue 27): on a server with the users and permissions
`opsched up` generates, with TLS, a cache hit ends ``succeeded`` and the next op is admitted; with a permission
deliberately taken away, the op whose event is refused ends with the reason, its quota is released, the ops behind
it are decided, and readiness — /readyz, and each service's answer on the bus that the web view shows — names the
refused subject."""
from __future__ import annotations

from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path

import pytest

from opsched.embedded import ServicesInProcess
from opsched.proto import permissions
from opsched.proto.events import (
    CacheHit,
    ErrorRaised,
    HandlerFailed,
    OperationAdmitted,
    OperationRejected,
    OperationSucceeded,
)
from opsched.services.runtime.runner import report
from tests.builders import identities, op
from tests.eventlog import EventLog
from tests.securebus import SecureNats
from tests.waiting import eventually

QUEUES = "defaultQueue: default\nqueues:\n  - name: default\n    concurrency: 1\n"
OUTPUTS = {"model": "s3://bucket/model.pt"}


@asynccontextmanager
async def default_world(tmp_path: Path):
    """nats-server as `opsched up` starts it (``tests.securebus``: TLS, a user per service, ``admin``), the four
    services in process as their own users (dispatcher in null mode: the test reports a pod's end as the
    dispatcher's user, ``dispatcher``), an admin client, and the event log the tests' harness reads."""
    (tmp_path / "queues.yaml").write_text(QUEUES)
    nats = SecureNats(tmp_path).start()
    stack = await ServicesInProcess(nats.settings(queues_file=tmp_path / "queues.yaml", dispatcher_mode="null"),
                                    connect=nats.connect).start()
    admin = await nats.client()
    dispatcher = await nats.connect(name="test-dispatcher", identity=identities.service("dispatcher"))
    harness = await nats.connect(name="test-events", identity=identities.HARNESS)
    events = await EventLog(harness).start()
    try:
        yield stack, admin, dispatcher, events
    finally:
        await events.stop()
        await harness.close()
        await stack.close()
        await admin.close()
        await dispatcher.close()
        nats.stop()


@pytest.fixture
def without_cache_hit_end(monkeypatch):
    """Admission's user may not publish ``succeeded`` (the bug of issue 27, on purpose)."""
    emits = dict(permissions.EMITS)
    emits["admission"] = tuple(kind for kind in emits["admission"] if kind != "succeeded")
    monkeypatch.setattr(permissions, "EMITS", emits)


async def run_twice_then_another(tmp_path: Path):
    """Submit a cached op, end it with outputs, submit it again, then an op that is no cache hit."""
    async with default_world(tmp_path) as (stack, admin, dispatcher, events):
        spec = op("train").gpus(1).runs("python train.py").cache(disable=False).build()
        first = await admin.submit(spec)
        await events.expect(OperationAdmitted, first)
        await dispatcher.publish(OperationSucceeded(op_id=first, at=datetime.now(timezone.utc),
                                                    pod_name=f"op-{first}-0", outputs=OUTPUTS))
        second = await admin.submit(spec)
        await events.expect(CacheHit, second)
        other = await admin.submit(op("other").gpus(1).runs("python other.py").build())
        await events.expect(OperationAdmitted, other)  # concurrency 1: the hit holds nothing, nor blocks anyone
        health = {service: await admin.health(service) for service in permissions.SERVICES}  # as the web view asks
        return events, stack, second, health


async def test_under_the_default_configuration_a_cache_hit_succeeds_and_the_next_op_is_admitted(tmp_path):
    events, stack, second, health = await run_twice_then_another(tmp_path)
    done = events.of(second, OperationSucceeded)
    assert [e.reason for e in done] == ["cache_hit"] and done[0].outputs == OUTPUTS
    assert not report(stack.services, [True])["not_progressing"]
    assert {name: answer.problems for name, answer in health.items()} == {name: [] for name in permissions.SERVICES}
    assert health["admission"].role == "leader" and health["cost"].role == ""


async def test_a_refused_decision_ends_its_op_and_the_cycle_goes_on(tmp_path, without_cache_hit_end):
    events, stack, second, health = await run_twice_then_another(tmp_path)
    assert not events.of(second, OperationSucceeded)
    (ended,) = events.of(second, OperationRejected)
    assert ended.reason == "publish_refused" and f"ops.succeeded.{second}" in ended.message
    stalled = report(stack.services, [True])["not_progressing"]
    assert list(stalled) == ["admission"] and f"publish ops.succeeded.{second}" in stalled["admission"]
    (problem,) = health["admission"].problems  # what the web view shows, over the bus
    assert problem.kind == "not_progressing" and problem.what == f"publish ops.succeeded.{second}"
    assert "refused user 'admission'" in problem.detail and not health["cost"].problems


async def test_a_handler_whose_event_is_refused_gives_up_at_once_and_the_op_ends(tmp_path, monkeypatch):
    """Cost may not publish ``cost_estimated``: its handler gives up on the first delivery (no redeliveries with
    back-off), says so with ``handler_failed``, and admission ends the op, which waited on that estimate."""
    emits = dict(permissions.EMITS)
    emits["cost"] = tuple(kind for kind in emits["cost"] if kind != "cost_estimated")
    monkeypatch.setattr(permissions, "EMITS", emits)
    async with default_world(tmp_path) as (stack, admin, _, events):
        op_id = await admin.submit(op("train").gpus(1).runs("python train.py").build())
        failed = await events.expect(HandlerFailed, op_id)
        assert failed.service == "cost" and f"ops.cost_estimated.{op_id}" in failed.error
        ended = await events.expect(OperationRejected, op_id)
        assert ended.reason == "handler_failed"
        await events.expect(ErrorRaised, op_id)  # and its dead-letter copy
        cost = stack.service("cost")

        async def counted() -> bool:
            return cost.stats.dead_lettered == 1
        await eventually(counted, "cost counting its dead letter", 5.0, interval=0.02)
        assert cost.stats.retried == 0
        assert f"publish ops.cost_estimated.{op_id}" in report(stack.services, [True])["not_progressing"]["cost"]
