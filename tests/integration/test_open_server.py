"""`opsched up --no-auth --no-tls`: an open nats-server (``open_nats_server``, the only tests on one), where every
connection is ``anonymous``; a client's commands go on ``cmd.anonymous.``, and admission keeps the payload's
``requested_by`` as an unverified label (with users, the connection's user is the requester: test_nats_auth)."""
from __future__ import annotations

from opsched.bus.bus import Bus
from opsched.client import Client
from opsched.embedded import ServicesInProcess
from opsched.proto import subjects
from opsched.proto.events import OperationAdmitted, OperationSubmitted
from opsched.services.runtime.settings import Settings
from tests.builders import op
from tests.eventlog import EventLog


async def test_on_an_open_server_a_client_is_anonymous_and_its_requested_by_is_a_label(open_nats_server):
    bus = await Bus.connect(open_nats_server.url, "test")
    await bus.ensure_streams()
    log = await EventLog(bus).start()
    settings = Settings(nats_url=open_nats_server.url, dispatcher_mode="null", log_format="console",
                        cmd_purge_interval_s=3600)  # the command read below stays (consumed ones are purged)
    stack = await ServicesInProcess(settings).start()  # the runner's own connections: no credentials
    client = await Client.connect(open_nats_server.url)
    try:
        assert client.bus.user == subjects.ANONYMOUS and open_nats_server.url.startswith("nats://")
        op_id = await client.submit(op("open").build(), requested_by="ann")
        assert (await log.expect(OperationSubmitted, op_id)).requested_by == "ann"
        await log.expect(OperationAdmitted, op_id)
        [command] = await bus.read_all(subjects.CMD_STREAM, subjects.commands_of(subjects.ANONYMOUS, "submit"))
        assert command
    finally:
        await client.close()
        await stack.close()
        await log.stop()
        await bus.close()
