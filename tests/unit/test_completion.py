"""Completion from the running opsched: op ids (and batch ids) for the commands that take an op, schedule ids,
queue names for --queue; prefix-filtered; nothing, silently, when the bus is not there or too slow."""
from __future__ import annotations

import argparse
import asyncio
import types

import msgspec
import pytest

from opsched import cli
from opsched.bus.received import Received
from opsched.completion import Completer, complete, op_ids, queue_names, schedule_ids
from opsched.proto import codec, subjects
from opsched.proto.queries import SchedulesAnswer, ScheduleStatus
from opsched.proto.queues import Queue, QueuesConfig
from opsched.proto.summaries import OpSummary
from tests.builders import op, submitted


class FakeReads:
    def __init__(self) -> None:
        sweep = msgspec.structs.replace(op("s").build(), batch="b-7")
        self.stream = [submitted(op("a").build(), op_id="op-a"), submitted(sweep, op_id="op-b")]

    async def read_bucket(self, bucket: str) -> list[bytes]:
        assert bucket == subjects.OPS_BUCKET
        return [msgspec.json.encode(OpSummary(op_id="old-1", status="succeeded")), b"{garbage"]

    async def messages(self, stream: str, subject: str) -> list[Received]:
        assert (stream, subject) == (subjects.OPS_STREAM, "ops.submitted.*")
        return [Received(subjects.event("submitted", e.op_id), codec.encode(e), {}, i + 1, 0, None)
                for i, e in enumerate(self.stream)]


class FakeClient:
    reads = FakeReads()
    closed = False

    async def queue_config(self) -> QueuesConfig:
        return QueuesConfig(queues=[Queue(name="default"), Queue(name="a100"), Queue(name="a10")])

    async def schedules(self) -> SchedulesAnswer:
        return SchedulesAnswer(schedules=[ScheduleStatus(schedule_id="nightly", state="active")])

    async def close(self) -> None:
        FakeClient.closed = True


def run(fetch):
    return asyncio.run(fetch(FakeClient()))


def test_op_ids_come_from_summaries_and_submitted_events_with_batch_ids():
    assert run(op_ids) == ["old-1", "op-a", "op-b", "b-7"]
    assert run(queue_names) == ["default", "a100", "a10"] and run(schedule_ids) == ["nightly"]


async def _fake_connect(args):
    return FakeClient()


def test_complete_asks_a_connected_client_and_closes_it():
    FakeClient.closed = False
    assert complete(argparse.Namespace(), queue_names, connect=_fake_connect) == ["default", "a100", "a10"]
    assert FakeClient.closed


def test_nothing_is_completed_when_the_bus_is_slow_or_absent():
    async def slow(args):
        await asyncio.Event().wait()  # a server that never answers: the budget cuts it

    assert complete(argparse.Namespace(), queue_names, connect=slow, budget=0.05) == []

    async def refused(args):
        raise SystemExit(3)
    assert complete(argparse.Namespace(), queue_names, connect=refused) == []


@pytest.mark.parametrize("command, completes", [
    (["ops"], "op_ids"), (["why", "x"], "op_ids"), (["watch", "x"], "op_ids"), (["stop", "x"], "op_ids"),
    (["approve", "x"], "op_ids"), (["resume", "x"], "op_ids"), (["schedules"], "schedule_ids"),
])
def test_the_commands_that_take_an_op_complete_op_ids(command, completes):
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    [action] = [a for a in sub.choices[command[0]]._actions if a.dest in ("id", "ids")]
    assert action.completer.fetch.__name__ == completes


@pytest.mark.parametrize("command", ["submit", "schedule", "ops", "stop", "approve", "reject"])
def test_queue_options_complete_queue_names(command):
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    [action] = [a for a in sub.choices[command]._actions if "--queue" in a.option_strings]
    assert action.completer.fetch is queue_names


def test_the_completer_is_what_argcomplete_calls(monkeypatch):
    monkeypatch.setattr("opsched.completion.complete", lambda parsed, fetch: ["op-a", "op-b", "b-7"])
    assert Completer(op_ids)("op-", parsed_args=types.SimpleNamespace()) == ["op-a", "op-b"]
