"""Failures that are not the op's, on the bus (in memory and a real nats-server): a dependency that is
unavailable for a while is waited out (the message handled once, never dead-lettered, readiness saying
what the service waits for); a handler bug that repeats ends the op and frees its quota."""
from __future__ import annotations

from opsched.bus.errors import DependencyUnavailable
from opsched.proto import subjects
from opsched.proto.events import (
    DispatchDelayed,
    OperationAdmitted,
    OperationDispatched,
    OperationRejected,
    RetryScheduled,
)
from opsched.proto.reasons import Failure, Reason
from opsched.rules.failures import MAX_INFRASTRUCTURE_RETRIES
from opsched.services.runtime.health import HealthServer
from opsched.services.runtime.runner import report
from tests.builders import op

QUEUES = """
defaultQueue: default
retryBackoff: {baseSeconds: 0, factor: 2, maxSeconds: 0}
queues:
  - name: default
"""
FAST = dict(dependency_backoff_base_s=0.01, dependency_backoff_cap_s=0.05)


async def start(stack_factory, tmp_path, client, **overrides):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    stack = await stack_factory(queues_file=path, dispatcher_mode="null", **overrides)
    return stack, client


def replace_handler(service, kind: type, make):
    """Swap the handler of ``kind`` on ``service``'s consumer for ``make(original)``."""
    [subscription] = [s for s in service.subscriptions if kind in s.handlers]
    subscription.handlers[kind] = make(subscription.handlers[kind])


async def test_an_api_server_down_for_a_while_is_waited_out_and_the_op_dispatched_once(stack_factory, tmp_path,
                                                                                        bus, client, events):
    stack, client = await start(stack_factory, tmp_path, client, **FAST)
    dispatcher = stack.service("dispatcher")
    deliveries: list[int] = []
    readiness: list[dict] = []

    def flaky(original):
        async def handle(event, ctx):
            deliveries.append(ctx.num_delivered)
            if len(deliveries) == 3:
                readiness.append(report([dispatcher], [True]))
            if len(deliveries) <= 3:
                delayed = DispatchDelayed(op_id=event.op_id, at=ctx.clock.now(), attempt=event.attempt,
                                          message="503 Service Unavailable")
                raise DependencyUnavailable("kubernetes", "503 Service Unavailable", events=[delayed])
            return await original(event, ctx)
        return handle
    replace_handler(dispatcher, OperationAdmitted, flaky)

    op_id = await client.submit(op("train").build())
    await events.expect(OperationDispatched, op_id)
    assert deliveries == [1, 1, 1, 1]  # one delivery, tried four times
    assert len(events.of(op_id, OperationDispatched)) == 1 and len(events.of(op_id, DispatchDelayed)) == 1
    waiting = readiness[0]["waiting_for"]["dispatcher"]["kubernetes"]
    assert waiting["failures"] == 2 and "503" in waiting["detail"]
    health = HealthServer(lambda: readiness[0])
    assert health._answer("/readyz")[0].startswith("503") and health._answer("/healthz")[0].startswith("200")
    assert report([dispatcher], [True])["waiting_for"] == {}
    assert dispatcher.stats.dead_lettered == 0 and await bus.read_all(subjects.DLQ_STREAM, subjects.DLQ_ALL) == []


async def test_a_dispatch_that_keeps_failing_ends_the_op_and_frees_its_quota(stack_factory, tmp_path, client, events):
    stack, client = await start(stack_factory, tmp_path, client, max_deliver=1)

    def broken(original):
        async def handle(event, ctx):
            raise KeyError("a bug in the dispatcher")
        return handle
    replace_handler(stack.service("dispatcher"), OperationAdmitted, broken)

    op_id = await client.submit(op("train").build())
    ended = await events.expect(OperationRejected, op_id, timeout=30)
    assert ended.reason == Reason.HANDLER_FAILED and "KeyError" in ended.message
    retries = events.of(op_id, RetryScheduled)
    assert len(retries) == MAX_INFRASTRUCTURE_RETRIES and {r.reason for r in retries} == {Failure.HANDLER_GAVE_UP}
    admission = stack.service("admission")
    assert not admission.state.ops[op_id].holds_quota and admission.state.usage.active.get("default", set()) == set()
    assert (await client.queues()).queues[0].running == 0
