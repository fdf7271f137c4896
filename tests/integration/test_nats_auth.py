"""Identities and subject permissions on a real nats-server started with the configuration `opsched up`
generates (``opsched.natsauth``): the server refuses what a user's role may not publish, admission refuses
what a user's projects do not cover, and the requester is the connection's user, never the payload's."""
from __future__ import annotations

from pathlib import Path

import msgspec
import nats
import pytest

from opsched import natsauth
from opsched.bus.connecting import tls_options
from opsched.bus.refusals import NotPermitted
from opsched.client import Client
from opsched.embedded import ServicesInProcess
from opsched.proto import codec, subjects
from opsched.proto.access import NOT_ALLOWED
from opsched.proto.commands import ApproveOperation, SubmitOperation
from opsched.proto.config import SetQueues
from opsched.proto.events import (
    ErrorRaised,
    OperationAdmitted,
    OperationApproved,
    OperationOnHold,
    OperationRejected,
    OperationStopped,
    OperationSubmitted,
    StopRequested,
)
from opsched.proto.queues import QueuesConfig
from opsched.verdicts import CommandRefused
from tests.builders import op
from tests.builders.identities import HARNESS
from tests.eventlog import EventLog
from tests.securebus import SecureNats
from tests.waiting import eventually

QUEUES = """
defaultQueue: default
queues:
  - name: default
access:
  projects:
    - {name: vision, users: [alice]}
    - {name: speech, groups: [speech-team]}
  groups: {speech-team: [carol]}
"""
USERS = [natsauth.User("alice", "submitter"), natsauth.User("carol", "submitter"), natsauth.User("bob", "approver")]


class Secured:
    """The test nats-server (``tests.securebus``: TLS, the generated users, these users too), the four services
    each as its own user, and clients."""

    def __init__(self, root: Path) -> None:
        self.nats = SecureNats(root, USERS)
        (root / "queues.yaml").write_text(QUEUES)
        self.settings = self.nats.settings(queues_file=root / "queues.yaml", dispatcher_mode="null")
        self.clients: list[Client] = []

    async def client(self, user: str) -> Client:
        client = await self.nats.client(self.nats.identity(user), f"test-{user}")
        self.clients.append(client)
        return client

    async def raw(self, user: str, errors: list[Exception]) -> nats.NATS:
        """A plain NATS connection as ``user``; the server's refusals land in ``errors``."""
        async def on_error(exc: Exception) -> None:
            errors.append(exc)
        options = self.nats.credentials(self.nats.identity(user)).connect_options()
        return await nats.connect(self.nats.url, error_cb=on_error, max_reconnect_attempts=0,
                                  **tls_options(self.nats.ca), **options)


@pytest.fixture
async def secured(tmp_path: Path):
    world = Secured(tmp_path)
    world.nats.start()
    stack = None
    try:
        stack = await ServicesInProcess(world.settings, connect=world.nats.connect).start()
        yield world
    finally:
        for client in world.clients:
            await client.close()
        if stack is not None:
            await stack.close()
        world.nats.stop()


@pytest.fixture
async def events(secured: Secured):
    """Every event, read by the tests' harness (in the services' account: a client reads by direct gets only)."""
    harness = await secured.nats.connect(name="events", identity=HARNESS)
    log = await EventLog(harness).start()
    yield log
    await log.stop()
    await harness.close()


async def refused(nc: nats.NATS, errors: list[Exception], subject: str, data: bytes = b"{}") -> str:
    """Publish on ``subject``; the server's permissions violation for it (AssertionError if none came)."""
    await nc.publish(subject, data)
    await nc.flush(timeout=2)
    async def violation() -> str | None:
        hits = [str(e) for e in errors if "permissions violation" in str(e).lower() and subject in str(e)]
        return hits[0] if hits else None
    return await eventually(violation, f"the server refusing {subject} (errors: {errors})", timeout=2.0)


def held(name: str, project: str):
    return msgspec.structs.replace(op(name).build(), project=project, is_approved=False)


async def test_a_client_without_credentials_is_refused(secured: Secured):
    with pytest.raises(Exception, match="(?i)authorization"):
        await nats.connect(secured.nats.url, max_reconnect_attempts=0, allow_reconnect=False,
                           **tls_options(secured.nats.ca))


async def test_a_submitter_cannot_admit_approve_reconfigure_or_speak_for_another(secured: Secured, events: EventLog):
    alice = await secured.client("alice")
    op_id = await alice.submit(held("mine", "vision"))
    await events.expect(OperationOnHold, op_id)
    errors: list[Exception] = []
    nc = await secured.raw("alice", errors)
    try:
        admitted = subjects.event("admitted", op_id)
        assert admitted in await refused(nc, errors, admitted)
        await refused(nc, errors, subjects.command("approve", "alice"),
                      codec.encode(ApproveOperation(op_id=op_id)))
        await refused(nc, errors, subjects.command(subjects.SET_QUEUES, "alice"),
                      codec.encode(SetQueues(config=QueuesConfig())))
        await refused(nc, errors, subjects.command("stop", "carol"))  # another user's prefix
        await refused(nc, errors, subjects.dead_letter("admission"))
        await refused(nc, errors, subjects.event("node_cost_recorded", "node-0123456789abcdef0123"))  # cost's
    finally:
        await nc.close()
    with pytest.raises(NotPermitted, match="refused user 'alice' publishing to cmd.alice.approve"):
        await alice.approve(op_id)  # the SDK says so at once, rather than time out
    bob = await secured.client("bob")  # the approver: its approval goes through, as bob
    await bob.approve(op_id, requested_by="alice")
    approved = await events.expect(OperationApproved, op_id)
    assert approved.approved_by == "bob"
    await events.expect(OperationAdmitted, op_id)
    assert [type(e).__name__ for e in events.of(op_id)].count("OperationAdmitted") == 1  # only admission's


async def test_a_submitter_acts_only_on_its_projects_and_is_named_by_its_connection(secured: Secured,
                                                                                       events: EventLog):
    alice, carol = await secured.client("alice"), await secured.client("carol")
    op_id = await alice.submit(held("vision-op", "vision"), requested_by="admin")  # a forged name
    submitted = await events.expect(OperationSubmitted, op_id)
    assert submitted.requested_by == "alice"
    await events.expect(OperationOnHold, op_id)

    with pytest.raises(CommandRefused, match="not_allowed"):  # carol is not of project vision: admission
        await carol.stop(op_id)  # refuses, the op is unaffected, and the SDK says so (its verdict)
    error = await events.expect(ErrorRaised, op_id)
    assert error.reason == NOT_ALLOWED and "carol" in error.message and "vision" in error.message
    assert not [e for e in events.of(op_id) if isinstance(e, (OperationStopped, StopRequested, OperationRejected))]
    assert (await carol.why(op_id)).reasons[0].code == "on_hold"  # still held, waiting for its approval

    foreign = await carol.submit(held("not-hers", "vision"))
    rejected = await events.expect(OperationRejected, foreign)
    assert rejected.reason == NOT_ALLOWED and "vision" in rejected.message
    own = await carol.submit(held("hers", "speech"))  # through her group
    assert (await events.expect(OperationSubmitted, own)).requested_by == "carol"


async def test_the_payloads_requested_by_cannot_name_someone_else_on_the_raw_bus(secured: Secured,
                                                                              events: EventLog):
    alice = await secured.client("alice")
    cmd = SubmitOperation(op_id="forged-1", spec=held("raw", "vision"), requested_by="bob")
    await alice.bus.publish(cmd)  # on cmd.alice.submit._, whatever the payload says
    assert (await events.expect(OperationSubmitted, "forged-1")).requested_by == "alice"
