"""Liveness: a handler loop stuck on a call that never returns makes /healthz 503, naming the consumer, the
message and since when, so Kubernetes restarts the process; a loop waiting out a dependency is alive
(/healthz 200) and only not ready (/readyz 503). The services' own health endpoint, over HTTP."""
from __future__ import annotations

import asyncio
import json

from opsched.bus.errors import DependencyUnavailable
from opsched.proto import subjects
from opsched.proto.events import OperationAdmitted, OperationSubmitted
from opsched.services.runtime.health import HealthServer
from opsched.services.runtime.runner import report
from tests.builders import op
from tests.service.test_outages import replace_handler
from tests.waiting import eventually

QUEUES = """
defaultQueue: default
queues:
  - name: default
"""
BOUND_S = 2.0  # OPSCHED_HANDLER_STUCK_S, short for the test (300 s by default); above an idle loop's 0.5 s fetch
# wait with room for a loaded machine (at 0.5 s an idle loop of another service was once seen "stuck")


async def get(port: int, path: str) -> tuple[int, dict]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


async def health_of(stack):
    server = HealthServer(lambda: report(stack.services, [True] * len(stack.services)))
    return server, await server.start()


async def start(stack_factory, tmp_path, **overrides):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    return await stack_factory(queues_file=path, dispatcher_mode="null", handler_stuck_s=BOUND_S, **overrides)


async def test_a_handler_that_never_returns_makes_healthz_503_naming_it(stack_factory, tmp_path, client):
    stack = await start(stack_factory, tmp_path)
    cost = stack.service("cost")
    [estimates] = [s for s in cost.subscriptions if s.durable == subjects.COST_ESTIMATOR]
    release = asyncio.Event()

    async def hangs(event, ctx):
        await release.wait()  # a call that never returns (a black-holed peer)
    estimates.handlers[OperationSubmitted] = hangs
    server, port = await health_of(stack)
    try:
        assert (await get(port, "/healthz"))[0] == 200
        op_id = await client.submit(op("hangs").build())

        async def dead() -> dict | None:
            status, body = await get(port, "/healthz")
            return body if status == 503 else None
        body = await eventually(dead, "/healthz 503", timeout=20)
        problem = body["not_alive"]["cost"][subjects.COST_ESTIMATOR]
        assert f"handling {subjects.event('submitted', op_id)} since " in problem and "no progress" in problem
        assert (await get(port, "/readyz"))[0] == 503
        assert list(body["not_alive"]) == ["cost"]  # the other services are alive
        release.set()
        await eventually(lambda: _alive(port), "/healthz 200 again once the handler returned", timeout=20)
    finally:
        release.set()
        await server.stop()


async def _alive(port: int) -> bool:
    return (await get(port, "/healthz"))[0] == 200


async def test_a_handler_waiting_out_a_dependency_is_alive_and_not_ready(stack_factory, tmp_path, client, events):
    # each wait between two tries (2.4-3 s) is longer than the bound: only the wait keeps it alive
    stack = await start(stack_factory, tmp_path, dependency_backoff_base_s=3.0, dependency_backoff_cap_s=3.0)
    dispatcher = stack.service("dispatcher")
    outage = asyncio.Event()
    outage.set()

    def unavailable(original):
        async def handle(event, ctx):
            if outage.is_set():
                raise DependencyUnavailable("kubernetes", "connection refused")
            return await original(event, ctx)
        return handle
    replace_handler(dispatcher, OperationAdmitted, unavailable)
    server, port = await health_of(stack)
    try:
        op_id = await client.submit(op("waits").build())
        loop = await eventually(lambda: _quiet_and_waiting(dispatcher), "a wait past the bound", timeout=20)
        assert loop.subject == subjects.event("admitted", op_id)
        status, body = await get(port, "/healthz")
        assert status == 200 and body["not_alive"] == {}
        status, body = await get(port, "/readyz")
        assert status == 503 and "kubernetes" in body["waiting_for"]["dispatcher"]
    finally:
        outage.clear()
        await server.stop()
    await events.expect(OperationAdmitted, op_id)


async def _quiet_and_waiting(service):
    """The dispatcher's loop, once it waits for a dependency and has shown no sign of life for over the bound."""
    loop = service.handler_loops.loops.get(subjects.DISPATCHER_ADMITTED)
    hand = loop.oldest() if loop is not None else None
    if hand is None or not hand.waiting:
        return None
    quiet = (service.clock.now() - hand.beat).total_seconds()
    return hand if quiet > BOUND_S else None
