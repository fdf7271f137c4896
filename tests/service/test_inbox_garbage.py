"""Garbage on a service's delivery inbox (issue 28): messages that are no JetStream delivery of its consumer, put
on the inbox its pull subscription fetches from, are dropped and counted (``services.runtime.inbox``); they never
fail a fetch or the batch they arrive with, so the real deliveries pending beside them are handled at once. On the
in-memory bus (the garbage comes in the batch a fetch returns) and a real nats-server (published on the inbox)."""
from __future__ import annotations

from opsched.proto import subjects
from opsched.services.runtime.metrics import exposition, registry_of
from tests.builders import garbage, op
from tests.builders.events import submitted

# a batch lost to garbage would come back only after the ack wait: far longer than the test waits
SLOW_REDELIVERY = dict(ack_wait_s=120.0)
OPS = 5


async def test_garbage_on_a_consumers_inbox_is_dropped_and_counted_and_the_real_deliveries_are_handled(
        stack_factory, bus, events):
    stack = await stack_factory(("cost",), **SLOW_REDELIVERY)
    cost = stack.service("cost")
    pull = cost.pulls[subjects.COST_ESTIMATOR]  # the consumer of the submitted events

    landed = await garbage.land(pull, publish=getattr(getattr(bus, "nc", None), "publish", None))
    for i in range(OPS):  # real deliveries pending beside the garbage
        await bus.publish(submitted(op("real").build(), op_id=f"real-{i}"))

    await garbage.survived(events, cost, landed, [f"real-{i}" for i in range(OPS)])
    scraped = exposition(registry_of([cost])).decode()
    assert f'opsched_inbox_garbage_dropped_total{{service="cost"}} {float(landed)}' in scraped
