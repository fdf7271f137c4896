"""Red team (issue 28): the side doors, tried on the secured nats-server as `opsched up` runs it (TLS, the two
accounts, a user per service and per person). As a submitter (``ann``) and an approver (``alice``): reconfigure a
service's durable consumer (the old create form, the durable's name in the body), pull and ack its messages, read
or fill another connection's inbox, deliver a stream into the services' subjects with a push consumer, pin the
purge floor with a durable of one's own, purge or delete a stream, write a bucket. As a service user (``cache``):
write admission's lease, take over another service's durable, delete a stream. Each is refused by the server, and
nothing is lost: the services' consumers are as they were and a submit still goes through."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
import pytest

from opsched.bus.connecting import client_context
from opsched.proto import subjects
from opsched.proto.events import OperationAdmitted
from tests.builders import identities, op

SUBMITTER, APPROVER = identities.client("ann", "submitter"), identities.client("alice", "approver")
DURABLE_BODY = {"stream_name": subjects.CMD_STREAM, "config": {
    "durable_name": subjects.ADMISSION_COMMANDS, "filter_subject": "cmd.nobody.>", "ack_policy": "explicit"}}
NAMED_BODY = {"stream_name": subjects.CMD_STREAM, "config": {  # the old form takes ``name`` and updates that consumer
    "name": subjects.ADMISSION_COMMANDS, "filter_subject": "cmd.nobody.>", "ack_policy": "explicit"}}


class Attacker:
    """A raw nats connection as ``identity``, with every error the server sends it (its refusals) kept."""

    def __init__(self, nats_server: Any, identity: Any) -> None:
        self.nats_server, self.identity = nats_server, identity
        self.errors: asyncio.Queue[Exception] = asyncio.Queue()
        self.nc: Any = None

    async def __aenter__(self) -> "Attacker":
        async def on_error(exc: Exception) -> None:
            await self.errors.put(exc)
        creds = self.nats_server.credentials(self.identity)
        self.nc = await nats.connect(self.nats_server.url, name=f"mallory-{self.identity.user}", error_cb=on_error,
                                     allow_reconnect=False, tls=client_context(self.nats_server.ca),
                                     inbox_prefix=subjects.inbox_prefix(self.identity.user), **creds.connect_options())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.nc.close()

    async def refused(self, verb: str, subject: str) -> None:
        """The server's permissions violation for ``verb`` ("publish", "subscription") on ``subject``."""
        while True:
            error = str(await asyncio.wait_for(self.errors.get(), timeout=10)).lower()
            if "permissions violation" in error and subject.lower() in error:
                assert verb in error, error
                return

    async def publish_refused(self, subject: str, body: bytes = b"{}", reply: str | None = None) -> None:
        await self.nc.publish(subject, body, reply=reply or self.nc.new_inbox())
        await self.refused("publish", subject)

    async def subscribe_refused(self, subject: str) -> None:
        await self.nc.subscribe(subject)
        await self.refused("subscription", subject)


CLIENT_DOORS = [
    # reconfigure a durable: the old form, the durable's name in the body (and the new forms)
    f"$JS.API.CONSUMER.CREATE.{subjects.CMD_STREAM}",
    f"$JS.API.CONSUMER.CREATE.{subjects.CMD_STREAM}.{subjects.ADMISSION_COMMANDS}",
    f"$JS.API.CONSUMER.DURABLE.CREATE.{subjects.CMD_STREAM}.{subjects.ADMISSION_COMMANDS}",
    # pull and ack the services' messages
    f"$JS.API.CONSUMER.MSG.NEXT.{subjects.CMD_STREAM}.{subjects.ADMISSION_COMMANDS}",
    f"$JS.ACK.{subjects.CMD_STREAM}.{subjects.ADMISSION_COMMANDS}.1.1.1.1700000000000000000.0",
    # a push consumer delivering a stream into the services' subjects; a durable pinning the purge floor
    f"$JS.API.CONSUMER.CREATE.{subjects.OPS_STREAM}.mine",
    # streams, buckets, the imported API beyond direct gets
    f"$JS.API.STREAM.PURGE.{subjects.OPS_STREAM}", f"$JS.API.STREAM.DELETE.{subjects.CMD_STREAM}",
    f"$JS.API.STREAM.PURGE.{subjects.CMD_STREAM}",
    f"$JS.API.STREAM.UPDATE.{subjects.OPS_STREAM}", f"$KV.{subjects.LEASE_BUCKET}.{subjects.ADMISSION_ROLE}",
    f"{subjects.READ_API_PREFIX}.CONSUMER.CREATE.{subjects.OPS_STREAM}",
    f"{subjects.READ_API_PREFIX}.DIRECT.GET.{subjects.CMD_STREAM}",  # the command stream is nobody's to read
    # another connection's inbox, an event, another user's command
    "_INBOX.admission.x", "_INBOX.bob.x", subjects.event("admitted", "x"), subjects.command("stop", "bob"),
]


@pytest.mark.parametrize("identity", [SUBMITTER, APPROVER], ids=["submitter", "approver"])
async def test_every_side_door_is_refused_to_a_client_and_nothing_is_lost(
        nats_server, stack_factory, bus, events, identity):
    await stack_factory(("admission", "cost", "cache"))
    before = await bus.js.consumer_info(subjects.CMD_STREAM, subjects.ADMISSION_COMMANDS)
    async with Attacker(nats_server, identity) as mallory:
        for subject in CLIENT_DOORS:
            await mallory.publish_refused(subject, json.dumps(DURABLE_BODY).encode())
        for subject in ("_INBOX.>", "_INBOX.admission.>", "_INBOX.bob.>", subjects.CMD_ALL, "$JS.>", ">"):
            await mallory.subscribe_refused(subject)
    after = await bus.js.consumer_info(subjects.CMD_STREAM, subjects.ADMISSION_COMMANDS)
    assert after.config.filter_subject == before.config.filter_subject
    assert after.config.filter_subjects == before.config.filter_subjects
    assert [c.name for c in await bus.js.consumers_info(subjects.OPS_STREAM)
            if c.config.durable_name and c.name == "mine"] == []
    submitter = await nats_server.client(SUBMITTER)  # and the front door still works
    try:
        op_id = await submitter.submit(op("after").build())
    finally:
        await submitter.close()
    await events.expect(OperationAdmitted, op_id, timeout=15)


async def test_a_clients_reads_are_direct_gets_of_the_views_streams_and_its_own_inbox_only(nats_server, bus):
    """What a client is allowed works: a direct get of the op stream through the import, the live events."""
    await bus.ensure_streams()
    await bus.publish_raw(subjects.event("submitted", "seen"), b'{"x": 1}', {"Nats-Msg-Id": "seen"})
    async with Attacker(nats_server, SUBMITTER) as ann:
        get = f"{subjects.READ_API_PREFIX}.DIRECT.GET.{subjects.OPS_STREAM}.{subjects.event('submitted', 'seen')}"
        answer = await ann.nc.request(get, b"", timeout=5)
        assert answer.data == b'{"x": 1}' and answer.headers["Nats-Sequence"] == "1"
        await ann.nc.subscribe(subjects.OPS_ALL)
        await ann.nc.subscribe(subjects.inbox_prefix("ann") + ".>")
        await ann.nc.flush()
        assert ann.errors.empty()


SERVICE_DOORS = [
    f"$KV.{subjects.LEASE_BUCKET}.{subjects.ADMISSION_ROLE}",  # admission's lease
    f"$KV.{subjects.OPS_BUCKET}.x", f"$KV.{subjects.ATTEMPT_FATE_BUCKET}.x",  # others' buckets
    f"$JS.API.CONSUMER.DURABLE.CREATE.{subjects.CMD_STREAM}.{subjects.ADMISSION_COMMANDS}",
    f"$JS.API.CONSUMER.CREATE.{subjects.CMD_STREAM}",  # the old form: a durable named in the body (``name``)
    f"$JS.API.CONSUMER.CREATE.{subjects.CMD_STREAM}.{subjects.ADMISSION_COMMANDS}",
    f"$JS.API.CONSUMER.CREATE.{subjects.CMD_STREAM}.{subjects.ADMISSION_COMMANDS}.cmd.nobody.>",
    f"$JS.API.CONSUMER.MSG.NEXT.{subjects.CMD_STREAM}.{subjects.ADMISSION_COMMANDS}",
    f"$JS.API.CONSUMER.DELETE.{subjects.OPS_STREAM}.{subjects.COST_LEDGER}",
    f"$JS.ACK.{subjects.OPS_STREAM}.{subjects.DISPATCHER_ADMITTED}.1.1.1.1700000000000000000.0",
    f"$JS.API.STREAM.DELETE.{subjects.OPS_STREAM}", f"$JS.API.STREAM.PURGE.{subjects.OPS_STREAM}",
    f"$JS.API.STREAM.PURGE.{subjects.CMD_STREAM}",  # admission's alone: the commands it consumed
    f"$JS.API.STREAM.UPDATE.{subjects.OPS_STREAM}", "_INBOX.admission.x", "_INBOX.alice.x",
    subjects.event("admitted", "x"),
]


async def test_a_service_user_reaches_only_its_own_durables_buckets_and_inbox(nats_server, stack_factory, bus):
    stack = await stack_factory(("admission",))
    admission = stack.service("admission")
    before = await bus.js.consumer_info(subjects.CMD_STREAM, subjects.ADMISSION_COMMANDS)
    async with Attacker(nats_server, identities.service("cache")) as cache:
        for subject in SERVICE_DOORS:
            await cache.publish_refused(subject, json.dumps(NAMED_BODY).encode())
        for subject in ("_INBOX.>", "_INBOX.admission.>", "_INBOX.alice.>"):
            await cache.subscribe_refused(subject)
    assert admission.leadership.deciding()  # the lease is still admission's
    after = await bus.js.consumer_info(subjects.CMD_STREAM, subjects.ADMISSION_COMMANDS)
    assert (after.config.filter_subject, after.config.filter_subjects) == (
        before.config.filter_subject, before.config.filter_subjects)
