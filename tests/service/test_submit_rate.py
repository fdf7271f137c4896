"""A requester over the submit rate: admission rejects the op ``rate_limited`` with the reason (naming the
requester, the rate, when to retry), publishes the error event and dead-letters the command; nothing is
lost, other requesters are not held back. On the in-memory bus and a real nats-server."""
from __future__ import annotations

import re

from opsched.proto.events import ErrorRaised, OperationRejected, OperationSubmitted
from opsched.services.admission.submit_rate import RATE_LIMITED
from tests.builders import op
from tests.service.test_bad_input import dead_letters
from tests.service.test_max_deliveries import QUEUES


async def test_a_submit_over_the_requesters_rate_is_rejected_with_the_reason_and_dead_lettered(
        stack_factory, tmp_path, bus, client_as, events):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(("admission",), queues_file=path, submit_rate_per_min=1, submit_burst=2)
    ann, bob = await client_as("ann"), await client_as("bob")  # the requester: the connection's user
    allowed = [await ann.submit(op(f"ok-{i}").build()) for i in range(2)]
    over = await ann.submit(op("over").build())
    other = await bob.submit(op("other").build())
    for op_id in [*allowed, other]:
        await events.expect(OperationSubmitted, op_id)
    rejected = await events.expect(OperationRejected, over)
    assert rejected.reason == RATE_LIMITED
    assert "requester 'ann' is over the submit rate of 1 ops a minute" in rejected.message
    assert re.search(r"retry in (5\d|60)\.\d s \(at ", rejected.message), rejected.message  # a minute, less the test's
    error = await events.expect(ErrorRaised, over)
    assert error.service == "admission" and error.reason == RATE_LIMITED
    [copy] = await dead_letters(bus, "admission")
    assert copy.headers["Opsched-Error-Reason"] == RATE_LIMITED
    assert not events.of(over, OperationSubmitted)
