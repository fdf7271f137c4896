"""The per-requester command rate (``services.admission.command_rate``) on a real nats-server: every command a
requester sends counts, malformed and refused ones too. A requester flooding admission with garbage is
rejected ``rate_limited`` on its next submit while another requester's goes through, and its flood leaves a
bounded number of dead letters (the rest acked and counted by reason), so it cannot push the others' out."""
from __future__ import annotations

import pytest

from opsched.proto import subjects
from opsched.proto.events import OperationRejected, OperationSubmitted
from opsched.services.admission.submit_rate import RATE_LIMITED
from opsched.verdicts import CommandRefused
from tests.builders import op
from tests.service.test_bad_input import dead_letters
from tests.service.test_max_deliveries import QUEUES

BURST = 3


async def admission(stack_factory, tmp_path, burst: int):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    stack = await stack_factory(("admission",), queues_file=path, command_rate_per_min=1, command_burst=burst)
    return stack.service("admission")


async def test_a_garbage_flood_costs_its_sender_its_rate_and_leaves_a_bounded_number_of_dead_letters(
        stack_factory, tmp_path, bus, client_as, events):
    service = await admission(stack_factory, tmp_path, BURST)
    ann, bob = await client_as("ann"), await client_as("bob")
    flood = 8
    for i in range(flood):  # ann's subject, as the server would let only ann publish it
        await bus.publish_raw(subjects.submit(None, "ann"), b"{garbage", {"Nats-Msg-Id": f"garbage-{i}"})
    over = await ann.submit(op("after-the-flood").build())
    other = await bob.submit(op("meanwhile").build())
    await events.expect(OperationSubmitted, other)  # another requester is not held back
    rejected = await events.expect(OperationRejected, over)
    assert rejected.reason == RATE_LIMITED
    assert "requester 'ann' is over the command rate of 1 commands a minute" in rejected.message
    assert not events.of(over, OperationSubmitted)
    letters = [m for m in await dead_letters(bus, "admission")
               if m.headers["Opsched-Original-Subject"].startswith("cmd.ann.")]
    assert len(letters) == BURST + 1  # those within the rate, then the first over it (one a minute)
    assert all(m.headers["Opsched-Error-Reason"] == "malformed_message" for m in letters)
    assert "over the command rate" in letters[-1].headers["Opsched-Error"]
    # the rest acked, counted by reason: no dead letter, no error event (its op still ended rejected)
    assert service.stats.unrecorded_reasons == {"malformed_message": flood - BURST - 1, RATE_LIMITED: 1}


async def test_refused_commands_are_charged_to_their_sender(stack_factory, tmp_path, client_as, events):
    await admission(stack_factory, tmp_path, 2)
    ann, bob = await client_as("ann"), await client_as("bob")
    bobs = await bob.submit(op("bobs").build())
    await events.expect(OperationSubmitted, bobs)
    with pytest.raises(CommandRefused) as info:  # someone else's op
        await ann.stop(bobs)
    assert info.value.verdict.outcome == "not_allowed"
    lost = await ann.submit(op("lost").queue("nowhere").build())  # an unknown queue
    assert (await events.expect(OperationRejected, lost)).reason == "unknown_queue"
    over = await ann.submit(op("valid").build())
    rejected = await events.expect(OperationRejected, over)
    assert rejected.reason == RATE_LIMITED and "over the command rate" in rejected.message
    assert not events.of(bobs, OperationRejected)
