"""A message whose last delivery nobody settles (the process holding it killed: OOM, kill -9, a liveness
restart) is not lost: JetStream's max-deliveries advisory makes one replica of the service dead-letter it
and say so about the op (``handler_failed``), which admission ends. On the in-memory bus and a real
nats-server (there the advisory comes when a replica next pulls from the consumer)."""
from __future__ import annotations

import asyncio

from opsched.proto import subjects
from opsched.proto.events import ErrorRaised, HandlerFailed, OperationRejected, OperationSubmitted
from opsched.proto.reasons import Reason
from tests.builders import op
from tests.service.test_bad_input import dead_letters
from tests.waiting import eventually

QUEUES = """
defaultQueue: default
queues:
  - name: default
"""
# two deliveries, the second one second after the first goes unsettled
# a window of 1: a replica whose handler never returns takes no other message, as a killed process
DYING = dict(handler_window=1,
             max_deliver=2, ack_wait_s=1.0, dependency_backoff_base_s=0.01, dependency_backoff_cap_s=0.05)


async def cost_replicas_dying_with_it(stack_factory, tmp_path, dying: dict) -> tuple[list, list, asyncio.Event]:
    """Admission, and three cost replicas (``dying`` settings) each of whose estimator never settles a
    ``submitted``, as a process killed with the message in hand: the replicas, (replica, delivery) of each
    delivery taken, and the event that lets the handlers return."""
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(("admission",), queues_file=path)
    costs = [(await stack_factory(("cost",), **dying)).service("cost") for _ in range(3)]
    held: list[tuple[int, int]] = []
    release = asyncio.Event()

    def dies_holding_it(replica: int):
        async def handle(event, ctx):
            held.append((replica, ctx.num_delivered))
            await release.wait()  # never settles, as a process killed with the message in hand
        return handle
    for i, cost in enumerate(costs):
        [estimates] = [s for s in cost.subscriptions if s.durable == subjects.COST_ESTIMATOR]
        estimates.handlers[OperationSubmitted] = dies_holding_it(i)
    return costs, held, release


async def test_a_message_held_by_a_killed_process_on_its_last_delivery_is_dead_lettered_once(
        stack_factory, tmp_path, bus, client, events):
    costs, held, release = await cost_replicas_dying_with_it(stack_factory, tmp_path, DYING)
    try:
        op_id = await client.submit(op("doomed").build())
        failed = await events.expect(HandlerFailed, op_id, timeout=30)
        rejected = await events.expect(OperationRejected, op_id, timeout=30)
    finally:
        release.set()
    assert [delivery for _, delivery in held] == [1, 2] and held[0][0] != held[1][0]  # two replicas died with it
    assert failed.service == "cost" and failed.failed_type == "submitted" and "2 was settled" in failed.error
    assert rejected.reason == Reason.HANDLER_FAILED  # admission ended the op: no quota held, nothing waits
    [copy] = await dead_letters(bus, "cost")
    assert copy.headers["Opsched-Error-Reason"] == "max_deliveries"
    assert copy.subject == subjects.dead_letter("cost") and copy.headers["Opsched-Original-Subject"] == (
        subjects.event("submitted", op_id))
    assert sum(c.stats.lost for c in costs) == 1  # three replicas listen, one acted
    async def error_events() -> list[ErrorRaised]:  # published after the copy: it may still be on its way
        return [e for e in events.of(op_id, ErrorRaised) if e.reason == "max_deliveries"]
    assert len(await eventually(error_events, "the max_deliveries error event", timeout=10)) == 1
