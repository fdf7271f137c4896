"""The same service path on a NATS started by testcontainers, where a Docker engine answers.

These machines have no Docker engine, so this skips here with the reason (it is marked
``docker``, the only kind of integration test allowed to skip in CI)."""
from __future__ import annotations

import pytest

from opsched.bus.bus import Bus
from opsched.client import Client
from opsched.proto.events import OperationAdmitted
from tests.builders import op
from tests.conftest import Stack
from tests.eventlog import EventLog

pytestmark = pytest.mark.docker


def docker_nats_url():
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # noqa: BLE001 - DockerException, FileNotFoundError, ...
        pytest.skip(f"no Docker engine answers ({exc.__class__.__name__}); testcontainers cannot run here")
    from testcontainers.nats import NatsContainer

    return NatsContainer(image="nats:2.11-alpine").with_command("-js")


async def test_an_op_is_admitted_through_a_nats_started_by_testcontainers():
    from opsched.services.runtime.settings import Settings

    container = docker_nats_url()
    with container:
        url = container.nats_uri()
        bus = await Bus.connect(url, "tc")
        await bus.ensure_streams()
        log = await EventLog(bus).start()
        stack = await Stack(Settings(nats_url=url, dispatcher_mode="null"),
                            ("admission", "cost", "cache", "dispatcher")).start()
        try:
            op_id = await Client(bus).submit(op("tc").build())
            await log.expect(OperationAdmitted, op_id)
        finally:
            await stack.close()
            await log.stop()
            await bus.close()
