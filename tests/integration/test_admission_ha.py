"""Two admission processes, as the Deployment runs them: one leads, the other stands by (/healthz says which).
kill -9 of the leader: the standby leads within the lease's ttl and a renewal, and no op is admitted twice."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from opsched.natsserver import free_port
from opsched.proto.events import OperationAdmitted, OperationSubmitted
from tests.builders import identities, op
from tests.waiting import eventually

TTL, RENEW = 6.0, 2.0  # the defaults


def role(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
            return json.loads(resp.read()).get("role", {}).get("admission")
    except OSError:
        return None


class Admissions:
    """Services as processes (admission replicas among them), each as its own NATS user of ``nats``."""

    def __init__(self, env: dict[str, str], logs, nats) -> None:
        self.env, self.logs, self.nats = env, logs, nats
        self.procs: dict[str, tuple[subprocess.Popen, int]] = {}

    def start(self, name: str, module: str = "admission") -> int:
        port = free_port()
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([sys.executable, "-m", f"opsched.services.{module}"], stdout=log, stderr=subprocess.STDOUT,
                                env={**self.env, **self.nats.env(identities.service(module)),
                                     "OPSCHED_HEALTH_PORT": str(port)})
        self.procs[name] = (proc, port)
        return port

    async def role_of(self, name: str, want: str, timeout: float = 30.0) -> None:
        port = self.procs[name][1]
        await eventually(lambda: asyncio.to_thread(lambda: role(port) == want), f"{name} to be {want}", timeout)

    def kill(self, name: str) -> None:
        proc = self.procs[name][0]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop_all(self) -> None:
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def admissions(nats_server, tmp_path):
    env = {**os.environ, "OPSCHED_LOG_FORMAT": "json", "OPSCHED_DISPATCHER_MODE": "null", "PYTHONUNBUFFERED": "1"}
    procs = Admissions(env, tmp_path, nats_server)
    yield procs
    procs.stop_all()


async def test_kill_9_of_the_leading_admission_process_hands_over_to_the_standby_admitting_nothing_twice(
        admissions, client, events):
    admissions.start("a")
    await admissions.role_of("a", "leader")
    admissions.start("b")
    await admissions.role_of("b", "standby")
    for name in ("cost", "cache", "dispatcher"):
        admissions.start(name, module=name)
    client = client  # ten ops in all: the default queue's concurrency (null dispatcher: none ends)
    before = [await client.submit(op(f"before-{i}").build(), op_id=f"before-{i}") for i in range(5)]
    for op_id in before:
        await events.expect(OperationSubmitted, op_id, timeout=30)

    loop = asyncio.get_running_loop()
    killed_at = loop.time()
    admissions.kill("a")  # its cycles may be deciding the ops just submitted
    after = [await client.submit(op(f"after-{i}").build(), op_id=f"after-{i}") for i in range(5)]
    await admissions.role_of("b", "leader", timeout=TTL + RENEW + 20)
    took = loop.time() - killed_at
    for op_id in before + after:
        await events.expect(OperationAdmitted, op_id, timeout=30)

    assert took <= TTL + RENEW + 3.0, f"the standby led {took:.1f}s after the kill"
    admitted = [e.op_id for _, e in events.events if isinstance(e, OperationAdmitted)]
    assert sorted(admitted) == sorted(before + after)  # each once
    print(f"takeover after kill -9: {took:.1f}s")  # noqa: T201 - docs/failure-modes.md quotes it
