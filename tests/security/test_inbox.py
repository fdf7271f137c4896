"""Red team (issue 28): garbage on a service's pull consumer inbox. No client can put it there (the inbox is
``_INBOX.<service>.``, in the services' account: tested below, and in ``test_side_doors``); a connection of the
services' account allowed to publish there can (here the tests' harness, on the secured nats-server as `opsched up`
runs it; on an open bus, anyone). The service drops and counts the
garbage and handles the real deliveries at once; a forged JetStream delivery (a ``$JS.ACK`` reply subject) never
lands: the server refuses that publish."""
from __future__ import annotations

import asyncio

import nats

from opsched.bus.connecting import client_context
from opsched.proto import subjects
from opsched.services.runtime import inbox
from tests.builders import garbage, identities, op
from tests.builders.events import submitted

OPS = 5


async def test_garbage_in_a_services_inbox_neither_stops_it_nor_forges_a_delivery_and_no_client_can_put_it_there(
        nats_server, stack_factory, bus, events):
    stack = await stack_factory(("cost",), ack_wait_s=120.0)  # a lost batch would come back far too late
    cost = stack.service("cost")
    target = inbox.inbox_of(cost.pulls[subjects.COST_ESTIMATOR])
    assert target is not None and target.startswith("_INBOX.")
    refused: asyncio.Queue[Exception] = asyncio.Queue()

    async def on_error(exc: Exception) -> None:
        await refused.put(exc)
    ann = nats_server.credentials(identities.client("ann", "submitter"))
    submitter = await nats.connect(nats_server.url, name="ann", error_cb=on_error, allow_reconnect=False,
                                   tls=client_context(nats_server.ca), **ann.connect_options())
    try:
        await submitter.publish(target, b'{"garbage": true}')
        error = await asyncio.wait_for(refused.get(), timeout=10)
        assert "permissions violation" in str(error).lower() and target.lower() in str(error).lower()
    finally:
        await submitter.close()
    insider = nats_server.credentials(identities.HARNESS)
    mallory = await nats.connect(nats_server.url, name="mallory", error_cb=on_error, allow_reconnect=False,
                                 tls=client_context(nats_server.ca), **insider.connect_options())
    try:
        landed = await garbage.land(cost.pulls[subjects.COST_ESTIMATOR], publish=mallory.publish)
        for i in range(OPS):
            await bus.publish(submitted(op("real").build(), op_id=f"real-{i}"))
        forged = f"$JS.ACK.{subjects.OPS_STREAM}.{subjects.COST_ESTIMATOR}.1.1.1.1700000000000000000.0"
        await mallory.publish(target, b'{"forged": true}', reply=forged)  # a delivery of that very consumer
        error = await asyncio.wait_for(refused.get(), timeout=10)
        assert "permissions violation" in str(error).lower() and "$js.ack" in str(error).lower()
    finally:
        await mallory.close()

    await garbage.survived(events, cost, landed, [f"real-{i}" for i in range(OPS)])
