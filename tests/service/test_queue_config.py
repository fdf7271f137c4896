"""The queue configuration changes without a restart: from its file, or by a command on the bus."""
from __future__ import annotations

import pytest

from opsched.client import Client, CommandRefused
from opsched.proto.config import SetQueues
from opsched.proto.events import ErrorRaised, OperationAdmitted, OperationRejected, PreemptRequested
from opsched.proto.queues import FlavorQuota, Queue, QueuesConfig, ResourceQuota
from tests.builders import op
from tests.waiting import eventually

BUSES = ["memory"]  # service logic, not about the bus: on the in-memory bus alone (tests/service/conftest.py)

ONE = "defaultQueue: a\nqueues:\n  - {name: a}\n"
TWO = "defaultQueue: a\nqueues:\n  - {name: a}\n  - {name: b, concurrency: 1}\n"


async def until_queues(client: Client, names: list[str], timeout: float = 15.0) -> None:
    async def in_force() -> bool:
        return sorted(q.name for q in (await client.queues()).queues) == sorted(names)
    await eventually(in_force, f"queues {names} in force", timeout)


async def test_editing_the_queues_file_takes_effect_without_a_restart(stack_factory, client, events, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setattr("opsched.services.runtime.config_file.POLL_S", 0.1)  # polled every 2 s: no need to wait one out
    path = tmp_path / "queues.yaml"
    path.write_text(ONE)
    await stack_factory(queues_file=path, dispatcher_mode="null")
    early = await client.submit(op("early").queue("b").build())
    assert (await events.expect(OperationRejected, early)).reason == "unknown_queue"
    path.write_text(TWO)
    await until_queues(client, ["a", "b"])
    late = await client.submit(op("late").queue("b").build())
    assert (await events.expect(OperationAdmitted, late)).queue == "b"


async def test_a_set_queues_command_replaces_the_config_and_survives_a_restart(stack_factory, client, events, tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(ONE)
    first = await stack_factory(names=("admission",), queues_file=path)
    config = QueuesConfig(default_queue="c", queues=[Queue(name="c", concurrency=2)])
    await client.set_queues(config, requested_by="test")
    await until_queues(client, ["c"])
    await first.close()
    await stack_factory(names=("admission",), queues_file=path)
    await until_queues(client, ["c"])
    assert (await client.queues()).source.startswith(f"command:{client.bus.user}#")  # admin, the connection's user


async def test_an_invalid_set_queues_command_is_refused_and_the_config_in_force_stays(stack_factory, client, events):
    await stack_factory(names=("admission",))
    bad = QueuesConfig(queues=[Queue(name="default", resources=[
        ResourceQuota(resource="nvidia.com/gpu", flavors=[FlavorQuota(name="h200", nominal=4)])])])
    with pytest.raises(CommandRefused) as refused:  # `opsched queues --apply`: exit 2, the reason on stderr
        await client.set_queues(bad, requested_by="test")
    assert refused.value.verdict.outcome == "invalid_queues" and refused.value.verdict.exit_code == 2
    error = await events.expect(ErrorRaised, "-", where=lambda e: e.reason == "invalid_queues")
    assert "unknown flavor 'h200'" in error.message == refused.value.verdict.message
    await until_queues(client, ["default"])


async def test_a_queue_held_drained_and_resumed_by_command(stack_factory, client, events, tmp_path):
    """`opsched queues hold|drain|resume` through admission: the verdicts, `why` of a held op, the drain's
    preemption, the resume's admission; the state outside the queue file."""
    path = tmp_path / "queues.yaml"
    path.write_text(TWO)
    await stack_factory(names=("admission", "cost", "cache"), queues_file=path)  # no dispatcher: admitted ops stay
    running = await client.submit(op("running").queue("a").build())
    await events.expect(OperationAdmitted, running)
    held = await client.stop_queue("a", "Hold", "node upgrade", requested_by="test")
    assert held.done and "held" in held.message
    assert (await client.stop_queue("a", "Hold")).nothing_to_do  # queue_unchanged
    with pytest.raises(CommandRefused) as refused:
        await client.stop_queue("tpu", "Hold")
    assert refused.value.verdict.outcome == "unknown_queue"
    waiting = await client.submit(op("waiting").queue("a").build())

    async def told() -> bool:
        return [r.code for r in (await client.why(waiting)).reasons][:1] == ["queue_held"]
    await eventually(told, "why says queue_held")
    assert (await client.stop_queue("a", "HoldAndDrain")).done
    drained = await events.expect(PreemptRequested, running)
    assert (drained.reason, drained.preemptor) == ("queue_drained", "")
    assert [q.stop_policy for q in (await client.queues()).queues] == ["HoldAndDrain", "None"]
    assert (await client.stop_queue("a", "None")).done
    await events.expect(OperationAdmitted, waiting)


async def test_the_queue_resources_configuration_is_the_only_one_until_it_is_handed_back(
        stack_factory, client, connect, bus_url):
    """The dispatcher's set_queues is the cluster's queue resources' (``rules.queue_resources``): in force, it is
    marked so and a user's `--apply` is refused naming the way out; handed back (the resources all deleted), the
    configuration stays and `--apply` works again."""
    await stack_factory(names=("admission",))
    dispatcher = Client(await connect(bus_url, "opsched-dispatcher"))  # the dispatcher's own user
    try:
        made = QueuesConfig(default_queue="r", queues=[Queue(name="r", concurrency=3)])
        await dispatcher.bus.publish(SetQueues(config=made, request_id="one"))
        await until_queues(client, ["r"])
        assert (await client.queues()).source.startswith("resources#")

        with pytest.raises(CommandRefused) as refused:
            await client.set_queues(QueuesConfig(), requested_by="test")
        assert refused.value.verdict.outcome == "queues_from_resources"
        assert "kubectl" in refused.value.verdict.message and refused.value.verdict.exit_code == 1
        assert [q.name for q in (await client.queues()).queues] == ["r"]  # what is in force stays

        await dispatcher.bus.publish(SetQueues(config=made, request_id="two", handback=True))
        await eventually(lambda: _source_is(client, "command:dispatcher#"), "the configuration handed back")
        done = await client.set_queues(QueuesConfig(), requested_by="test")
        assert done.done and "source command:" in done.message
        await until_queues(client, ["default"])
    finally:
        await dispatcher.close()


async def _source_is(client: Client, prefix: str) -> bool:
    return (await client.queues()).source.startswith(prefix)
