"""`opsched up` as a user starts it by default — TLS, a NATS user per service, subject permissions, the example
queues (examples/queues.yaml, plus a day budget of project ``capped``) and the default simulated nodes — with two
people besides ``admin`` (alice, a submitter; bob, an approver), and the CLI as each of them runs it."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from opsched import context
from opsched.client import Client
from opsched.output import full
from opsched.proto import subjects
from opsched.proto.outputs import OpList
from opsched.view import items

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = """
budgets:
  - {scope: project, name: capped, window: day, money: 0.0001}
"""
PEOPLE = ["alice:submitter", "bob:approver"]


def job(name: str, command: str, *, gpus: int = 1, extra: str = "", inputs: str = "") -> str:
    """A component polyaxonfile: one container running ``command`` (the simulated kubelet honours sleep/exit)."""
    return f"""version: 1.1
kind: component
name: {name}
{extra}
{inputs}
run:
  kind: job
  container:
    image: python:3.11-slim
    command: ["sh", "-c", "{command}"]
    resources:
      limits: {{nvidia.com/gpu: {gpus}}}
"""


def clean_env() -> dict[str, str]:
    """The environment without this machine's NATS or cluster settings: the CLI finds the running opsched."""
    return {k: v for k, v in os.environ.items() if not k.startswith("OPSCHED_NATS") and k != "KUBECONFIG"
            and k != "OPSCHED_CONTEXT"}


class User:
    """The CLI as a user runs it, against the `opsched up` of ``data_dir`` (as ``user``: its password file)."""

    def __init__(self, data_dir: Path, files: Path, user: str | None = None) -> None:
        self.data_dir, self.files, self.user = data_dir, files, user

    def env(self) -> dict[str, str]:
        env = clean_env()
        if self.user:
            env["OPSCHED_NATS_USER"] = self.user
        return env

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "opsched.cli", "--data-dir", str(self.data_dir), *args],
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=self.env())

    def ok(self, *args: str, timeout: float = 120) -> str:
        done = self.run(*args, timeout=timeout)
        assert done.returncode == 0, f"opsched {' '.join(args)} exited {done.returncode}: {done.stderr}{done.stdout}"
        return done.stdout

    def file(self, name: str, text: str) -> str:
        path = self.files / name
        path.write_text(text)
        return str(path)

    def submit(self, name: str, text: str, *args: str) -> str:
        return self.ok("submit", self.file(f"{name}.yaml", text), *args).split()[0]

    def ops(self) -> dict[str, dict[str, Any]]:
        return {row["opId"]: row for row in json.loads(self.ok("ops", "-o", "json"))["items"]}

    def why(self, op_id: str) -> dict[str, Any]:
        return json.loads(self.ok("why", op_id, "-o", "json"))

    def until(self, check: Callable[[dict[str, dict[str, Any]]], Any], what: str, timeout: float = 60) -> Any:
        """The first truthy ``check(ops)``, ``ops`` as `opsched ops -o json` gives them: read in this process, as
        admin (the SDK, from the context `opsched up` wrote), at once and again after each op event published (and
        at least every second: a live event can come before the stream stored it). The wait is the test's own: what
        a step asserts goes through the CLI."""
        return asyncio.run(self._until(check, what, timeout))

    async def _until(self, check: Callable[[dict[str, dict[str, Any]]], Any], what: str, timeout: float) -> Any:
        target = context.resolve(context=self.data_dir / "context.json", data_dir=self.data_dir, env=clean_env())
        client = await Client.connect(target.url, "e2e-wait", target.credentials, ca_file=target.ca_file)
        rung = asyncio.Event()

        async def ring(_msg: Any) -> None:
            rung.set()
        sub = await client.bus.nc.subscribe(subjects.VIEW_EVENTS, cb=ring)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                rung.clear()
                printed = msgspec.json.encode(full(OpList(items=items(await client.ops()))))
                rows = {row["opId"]: row for row in json.loads(printed)["items"]}
                found = check(rows)
                if found:
                    return found
                left = deadline - loop.time()
                assert left > 0, f"not within {timeout}s: {what}; ops: {rows}"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(rung.wait(), min(left, 1.0))
        finally:
            await sub.unsubscribe()
            await client.close()

    def status(self, op_id: str, *statuses: str, timeout: float = 60) -> dict[str, Any]:
        return self.until(lambda rows: rows.get(op_id) if rows.get(op_id, {}).get("status") in statuses else None,
                          f"{op_id} {' or '.join(statuses)}", timeout)


@contextmanager
def opsched_up(root: Path) -> Iterator[User]:
    """`opsched up` in ``root`` until the context ends (SIGINT, as Ctrl-C; it must stop cleanly)."""
    data_dir, queues = root / "opsched", root / "queues.yaml"
    queues.write_text((ROOT / "examples" / "queues.yaml").read_text() + BUDGETS)
    args = ["up", "--queues", str(queues), *[a for person in PEOPLE for a in ("--user", person)]]
    admin = User(data_dir, root)
    with open(root / "up.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "opsched.cli", "--data-dir", str(data_dir), *args],
                                stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=clean_env())
        try:
            deadline = time.monotonic() + 120
            while not (data_dir / "up.json").exists() or admin.run("queues").returncode != 0:
                assert proc.poll() is None, (root / "up.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "opsched up did not serve within 120s"
                time.sleep(0.2)
            yield admin
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 0, (root / "up.log").read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
