"""Commands tell the truth: the real CLI entry point (``opsched.cli.main``) against running services, its exit
code and what it prints. ``submit`` refuses an unknown queue before publishing; ``stop``, ``approve``, ``reject``,
``restart``, ``copy`` and ``resume`` print admission's verdict on their own command (``opsched.verdicts``), a
refusal exits non-zero with the reason; ``why`` of an op that ended says how it ended."""
from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pytest

from opsched import cli, natsauth
from opsched.client import Client
from opsched.proto import subjects
from opsched.proto.events import (
    ErrorRaised,
    OperationAdmitted,
    OperationApproved,
    OperationOnHold,
    OperationRejected,
    OperationRunning,
    OperationSubmitted,
    OperationSucceeded,
    StopRequested,
)
from tests.builders import op
from tests.builders.identities import Identity
from tests.securebus import SecureNats

QUEUES = """
defaultQueue: default
queues:
  - name: default
  - name: a100
access:
  projects:
    - {name: vision, users: [alice]}
"""


SERVICE_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[")  # structlog's console lines
CAROL = Identity("carol", "submitter")  # not of project vision; her role may not approve


class Cli:
    """``opsched ...`` as a user runs it: ``cli.main`` in a thread, its coroutines on this test's event loop (where
    the services and the in-memory bus live), connected to this test's bus as ``identity`` (``admin``, the CLI of
    `opsched up`, unless told)."""

    def __init__(self, connect: Callable[..., Awaitable[Any]], bus_url: str, data_dir: Path,
                 capsys: pytest.CaptureFixture[str]) -> None:
        self.connect, self.bus_url, self.data_dir, self.capsys = connect, bus_url, data_dir, capsys
        self.identity: Identity | None = None

    async def __call__(self, *argv: str) -> tuple[int, str, str]:
        loop = asyncio.get_running_loop()
        connect, url, identity = self.connect, self.bus_url, self.identity

        async def connected(cls, *args: Any, **kwargs: Any) -> Client:
            return cls(await connect(url, "opsched-cli", identity))

        def on_this_loop(coro: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(coro, loop).result()

        self.capsys.readouterr()
        with mock.patch.object(Client, "connect", classmethod(connected)), mock.patch.object(asyncio, "run", on_this_loop):
            code = await asyncio.to_thread(cli.main, ["--data-dir", str(self.data_dir), "--nats", "nats://cli", *argv])
        out, err = self.capsys.readouterr()
        return code, _cli_only(out), _cli_only(err)


def _cli_only(text: str) -> str:
    """What the CLI printed: without the log lines of the services running in this process."""
    return "".join(line for line in text.splitlines(keepends=True) if not SERVICE_LOG.match(line))


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[SecureNats]:
    """The suite's secured nats-server, with carol, a submitter, among its users."""
    server = SecureNats(tmp_path / "secure-nats", users=[natsauth.User(CAROL.user, CAROL.role)]).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def opsched(connect, bus_url, bus, tmp_path, capsys, stack_factory) -> Cli:
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    await stack_factory(dispatcher_mode="null", queues_file=queues)
    return Cli(connect, bus_url, tmp_path / "cli", capsys)


def op_file(tmp_path: Path, name: str, queue: str | None = None) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"version: 1.1\nkind: component\nname: {name}\n" + (f"queue: {queue}\n" if queue else "")
                    + "run:\n  kind: job\n  container:\n    image: busybox\n    command: [sleep, '1']\n")
    return path


async def set_running(bus, events, op_id: str) -> None:
    """Admitted, then running (the harness says so for the null dispatcher's cluster)."""
    admitted = await events.expect(OperationAdmitted, op_id)
    await bus.publish(OperationRunning(op_id=op_id, at=datetime.now(timezone.utc), pod_name=admitted.pod_name,
                                       node="gpu-1"))
    await events.expect(OperationRunning, op_id)


async def running(client: Client, bus, events, name: str) -> str:
    op_id = await client.submit(op(name).build())
    await set_running(bus, events, op_id)
    return op_id


async def test_a_submit_to_an_unknown_queue_is_refused_before_publishing_naming_the_known_queues(
        opsched, bus, tmp_path):
    code, out, err = await opsched("submit", str(op_file(tmp_path, "lost", "nosuch")))
    assert code == 2 and out == ""
    assert "unknown queue 'nosuch'; known queues: default, a100" in err
    assert await bus.last_stored(subjects.CMD_STREAM, subjects.CMD_SUBMIT_ALL) == 0  # nothing published

    code, out, _ = await opsched("submit", str(op_file(tmp_path, "found", "a100")))
    assert code == 0 and len(out.split()) == 1, (out, err)  # its id


async def test_stop_approve_and_resume_of_an_unknown_op_exit_2_with_the_reason(opsched, events):
    for verb in ("stop", "approve", "resume"):
        code, out, err = await opsched(verb, "nosuchop")
        assert (code, out) == (2, ""), (verb, err)
        assert f"{verb} nosuchop refused (unknown_op)" in err and "no such operation" in err
    assert len(events.of("nosuchop", ErrorRaised)) == 3


async def test_resume_of_a_succeeded_op_is_refused_and_the_op_stays_as_it_was(opsched, client, bus, events):
    op_id = await running(client, bus, events, "done")
    await bus.publish(OperationSucceeded(op_id=op_id, at=datetime.now(timezone.utc), pod_name=f"op-{op_id}-0"))
    await events.expect(OperationSucceeded, op_id)
    code, out, err = await opsched("resume", op_id)
    assert (code, out) == (1, "")
    assert f"resume {op_id} refused (not_resumable)" in err and "it is succeeded" in err
    code, out, err = await opsched("stop", op_id)
    assert (code, out) == (1, "") and "refused (already_ended)" in err and "already succeeded" in err


async def test_stop_of_a_running_op_prints_the_stop_requested(opsched, client, bus, events):
    op_id = await running(client, bus, events, "busy")
    code, out, err = await opsched("stop", op_id)
    assert (code, err) == (0, "")
    assert out == f"{op_id}: stop requested (attempt 0); its pods are being deleted\n"
    assert (await events.expect(StopRequested, op_id)).request_id  # its answer, carrying its request id


async def test_restart_prints_the_new_op_id_submitted_as_a_restart(opsched, client, bus, events):
    original = await running(client, bus, events, "train")
    code, out, err = await opsched("restart", original, "-P", "lr=0.5")
    assert code == 0, err
    new_id = out.strip()
    assert new_id and new_id != original and f"{new_id}: submitted, a restart of {original}" in err
    submitted = await events.expect(OperationSubmitted, new_id)
    assert (submitted.original_op_id, submitted.relation, submitted.spec.params["lr"]) == (original, "restart", 0.5)


async def test_approve_twice_is_approved_then_nothing_to_do_reject_of_a_running_op_is_refused_and_a_batch_approved(
        opsched, client, bus, events):
    held = await client.submit(msgspec.structs.replace(op("held").build(), is_approved=False))
    await events.expect(OperationOnHold, held)
    code, out, err = await opsched("approve", held)
    assert (code, out, err) == (0, f"{held}: approved by admin\n", "")
    code, out, err = await opsched("approve", held)
    assert (code, err) == (0, "") and out == f"nothing to do: {held} is already approved\n"
    busy = await running(client, bus, events, "busy")
    code, out, err = await opsched("reject", busy)
    assert (code, out) == (1, "") and f"reject {busy} refused (not_on_hold)" in err
    # a sweep held for approval, approved by its batch: one command message, an `approved` per trial, a line each
    specs = [msgspec.structs.replace(op("trial").params(lr=i).build(), is_approved=False, batch="sweep-1")
             for i in range(5)]
    trials = [await client.submit(spec, op_id=f"sweep-1-{i}") for i, spec in enumerate(specs)]
    for trial in trials:
        await events.expect(OperationOnHold, trial)
    code, out, err = await opsched("approve", "--batch", "sweep-1")
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "approved 5, nothing to do 0, refused 0, no verdict 0"
    approvals = [await events.expect(OperationApproved, trial) for trial in trials]
    assert len({a.request_id for a in approvals}) == 1  # one command
    code, out, _ = await opsched("approve", trials[0], "nope", "-o", "json")
    assert code == 2 and [v["outcome"] for v in json.loads(out)["items"]] == ["already_approved", "unknown_op"]


async def test_a_user_not_allowed_on_the_project_is_refused_and_another_users_verdict_is_not_taken(
        opsched, client, bus, events):
    """carol may not act on project vision's ops: her stop is refused (exit 1), though the op's stream already holds
    an allowed user's stop answered a moment before: a verdict is matched to its own command."""
    op_id = await client.submit(op("vision-op").project("vision").build())
    await set_running(bus, events, op_id)
    allowed = await client.stop(op_id)  # the SDK's verdict (admin's): the stop was requested
    assert allowed is not None and allowed.outcome == "stop_requested"
    opsched.identity = CAROL
    code, out, err = await opsched("stop", op_id)
    assert (code, out) == (1, "")
    assert f"stop {op_id} refused (not_allowed)" in err and "'carol'" in err and "'vision'" in err


async def test_approve_by_a_user_whose_role_may_not_approve_exits_2_naming_the_user(opsched, client, events):
    """carol, a submitter, may not send approve: the server refuses it, the CLI says so (exit 2), the op stays held."""
    held = await client.submit(msgspec.structs.replace(op("held").build(), is_approved=False))
    await events.expect(OperationOnHold, held)
    opsched.identity = CAROL
    code, out, err = await opsched("approve", held)
    assert (code, out) == (2, "")
    assert "the NATS server refused user 'carol' publishing to cmd.carol.approve" in err
    assert not events.of(held, OperationApproved)


async def test_why_of_an_op_rejected_at_submit_gives_its_status_and_reason_and_ops_its_name_and_queue(
        opsched, client, events):
    op_id = await client.submit(op("lost").queue("nosuch").build())  # the SDK does not look first
    await events.expect(OperationRejected, op_id)
    code, out, err = await opsched("why", op_id)
    assert code == 0, err
    assert out.startswith(f"{op_id} (lost): rejected") and "unknown_queue: unknown queue 'nosuch'" in out
    code, out, _ = await opsched("ops")
    row = next(line.split() for line in out.splitlines() if line.startswith(op_id))
    assert row[1:4] == ["lost", "nosuch", "rejected"]


async def test_no_verdict_in_time_says_it_is_unknown_and_exits_4(connect, bus_url, bus, tmp_path, capsys):
    opsched = Cli(connect, bus_url, tmp_path, capsys)  # no admission running
    code, out, err = await opsched("stop", "someop", "--timeout", "0.3")
    assert (code, out) == (4, "")
    assert "no verdict on stop someop within 0.3s: it may or may not have taken effect" in err

