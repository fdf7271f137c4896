"""Each service in its own process, as in production (``python -m opsched.services.<name>``), for integration tests:
started, killed, restarted and stopped with SIGTERM; each logs to ``<logs>/<name>.log``. With ``nats`` (a
``tests.securebus.SecureNats``) each connects as its own NATS user, over TLS."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from opsched.proto import permissions
from tests.builders import identities

SERVICES = permissions.SERVICES  # the five; the gateway's process: tests/integration/test_gateway_e2e.py


class Processes:
    def __init__(self, env: dict[str, str], logs: Path, nats: Any = None) -> None:
        self.env = env
        self.logs = logs
        self.nats = nats
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, **env: str) -> None:
        """``services.<name>`` with the common environment and ``env`` (e.g. ``OPSCHED_HEALTH_PORT``)."""
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        user = self.nats.env(identities.service(name)) if self.nats is not None else {}
        self.procs[name] = subprocess.Popen([sys.executable, "-m", f"opsched.services.{name}"],
                                            env={**self.env, **user, **env}, stdout=log, stderr=subprocess.STDOUT)

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(10)

    def terminate_all(self) -> dict[str, int | None]:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[name] = None
        return codes
