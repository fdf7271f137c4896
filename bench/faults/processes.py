"""The four services as separate processes (``python -m opsched.services.<name>``), as in production, with any
number of replicas each; kill -9 one replica, start it again, wait until each answers ready. Start them
on the event loop's thread: a child dies with the thread that started it (parent-death signal)."""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from opsched.children import die_with_parent
from opsched.natsserver import free_port

SERVICES = ("admission", "cost", "cache", "dispatcher")


class ServiceProcesses:
    """``replicas`` processes of each service, started with ``env`` (NATS_URL, kubeconfig, ...) and what
    ``env_of(service)`` adds (its NATS user's credentials); each serves /healthz on a port of its own, logs to
    ``<log_dir>/<name>-<i>.log``."""

    def __init__(self, env: dict[str, str], log_dir: Path,
                 env_of: Callable[[str], dict[str, str]] = lambda name: {}) -> None:
        self.env = env
        self.env_of = env_of
        self.log_dir = Path(log_dir)
        self.procs: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
        self.ports: dict[tuple[str, int], int] = {}

    def start(self, replicas: dict[str, int]) -> list[tuple[str, int]]:
        """Start every replica (``{"cost": 2, ...}``); wait for them with ``until_ready``."""
        keys = [(name, i) for name, count in replicas.items() for i in range(count)]
        for name, i in keys:
            self.start_one(name, i)
        return keys

    def start_one(self, name: str, i: int = 0) -> None:
        port = self.ports.setdefault((name, i), free_port())
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{name}-{i}.log", "ab") as log:
            self.procs[(name, i)] = subprocess.Popen(
                [sys.executable, "-m", f"opsched.services.{name}"],
                env={**self.env, **self.env_of(name), "OPSCHED_HEALTH_PORT": str(port)},
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)

    def kill(self, name: str, i: int = 0) -> None:
        """kill -9 of one replica."""
        proc = self.procs[(name, i)]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def health(self, key: tuple[str, int]) -> dict:
        """The replica's /healthz report ({} while it is not listening)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[key]}/healthz", timeout=1.0) as answer:
                return dict(json.loads(answer.read()))
        except urllib.error.HTTPError as answer:  # 503 (waiting for a dependency) still carries the report
            return dict(json.loads(answer.read() or b"{}"))
        except (OSError, ValueError):  # not listening yet
            return {}

    def ready(self, key: tuple[str, int]) -> bool:
        """The replica is alive and has bound its consumers (its /healthz report says ``ready``)."""
        return bool(self.health(key).get("ready"))

    async def leader(self, name: str, timeout: float = 30.0) -> int:
        """The replica of ``name`` that leads now (its report's ``role``), once one does."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            for (service, i), proc in self.procs.items():
                if service == name and proc.poll() is None:
                    role = (await asyncio.to_thread(self.health, (service, i))).get("role", {})
                    if role.get(name) == "leader":
                        return i
            await asyncio.sleep(0.2)
        raise TimeoutError(f"no replica of {name} leads within {timeout}s; see {self.log_dir}")

    async def until_ready(self, keys: list[tuple[str, int]], timeout: float = 90.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        waiting = list(keys)
        while waiting:
            for key in list(waiting):
                code = self.procs[key].poll()
                if code is not None:
                    raise RuntimeError(f"{key[0]}-{key[1]} exited with {code}; see {self.log_dir}")
                if await asyncio.to_thread(self.ready, key):
                    waiting.remove(key)
            if waiting and loop.time() > deadline:
                raise TimeoutError(f"not ready within {timeout}s: {waiting}; see {self.log_dir}")
            await asyncio.sleep(0.2)

    def stop_all(self, timeout: float = 15.0) -> dict[str, int | None]:
        """SIGTERM every replica still running (they drain); SIGKILL what has not exited after ``timeout``."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for (name, i), proc in self.procs.items():
            try:
                codes[f"{name}-{i}"] = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes[f"{name}-{i}"] = None
        return codes
