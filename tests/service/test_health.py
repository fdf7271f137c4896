"""Each service alone: `python -m opsched.services.<name>` serves /healthz and /readyz and drains on SIGTERM."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from opsched.natsserver import free_port
from tests.builders import identities


def get(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return 0, {}


def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 30.0, until=lambda body: True) -> dict:
    """/readyz's body once it is 200 (and ``until`` it holds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else "exited"
        status, body = get(port, "/readyz")
        if status == 200 and until(body):
            return body
        time.sleep(0.1)
    raise AssertionError(f"/readyz not 200 within {timeout}s")


@pytest.mark.parametrize("service", ["cost", "cache", "admission"])
def test_a_service_started_alone_reports_ready_and_exits_0_on_sigterm(service, nats_server):
    # nats only: the service runs in its own process, and /readyz reports its NATS connection
    port = free_port()
    env = {**os.environ, **nats_server.env(identities.service(service)), "OPSCHED_HEALTH_PORT": str(port),
           "OPSCHED_LOG_FORMAT": "json"}
    proc = subprocess.Popen([sys.executable, "-m", f"opsched.services.{service}"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        body = wait_ready(port, proc)
        assert body["connected"] is True and service in body["services"]
        if service == "admission":  # ready as a standby (HA); alone, it takes the lease and leads
            body = wait_ready(port, proc, until=lambda b: b["role"] != {"admission": "standby"})
        assert body["role"] == ({"admission": "leader"} if service == "admission" else {})
        assert get(port, "/healthz")[0] == 200
        assert get(port, "/nope")[0] == 404
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
