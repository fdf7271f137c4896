"""A user's first day, on `opsched up` as it starts by default (TLS, a NATS user per service, subject permissions),
through the CLI only: every seed feature once — submit and wait, a sweep, the cache (a hit after the original and
one during it), approval by an approver, conditions skipping, a schedule firing, stop, restart/copy/resume with
params, preemption, a gang, cost and budgets, and `why` for a waiting, a rejected and an ended op.

One `opsched up` for the module (the steps use their own ops); each step waits on what the CLI shows, with a
timeout, never on time."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from opsched.localcluster.controlplane import ControlPlaneError, ensure_built

ROOT = Path(__file__).resolve().parents[2]

QUEUES = """\
defaultQueue: default
priorityClasses:
  - {name: batch, value: 0}
  - {name: normal, value: 100}
  - {name: urgent, value: 1000}
flavors:
  - {name: a100, nodeLabels: {nvidia.com/gpu.product: A100}}
queues:
  - name: default
    concurrency: 10
    defaultPriorityClass: normal
    preemption: {withinQueue: LowerPriority}
    resources:
      - resource: nvidia.com/gpu
        flavors: [{name: a100, nominal: 4}]
budgets:
  - {scope: project, name: capped, window: day, money: 0.0001}
"""
NODES = ["gpu-j0:2:A100", "gpu-j1:2:A100"]


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


class User:
    """The CLI as a user runs it, against the `opsched up` of ``data_dir`` (as ``user``: its password file)."""

    def __init__(self, data_dir: Path, files: Path, user: str | None = None) -> None:
        self.data_dir, self.files, self.user = data_dir, files, user

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCHED_NATS") and k != "KUBECONFIG"}
        if self.user:
            env["OPSCHED_NATS_USER"] = self.user
        return subprocess.run([sys.executable, "-m", "opsched.cli", "--data-dir", str(self.data_dir), *args],
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)

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
        return {row["op_id"]: row for row in json.loads(self.ok("ops", "-o", "json"))}

    def why(self, op_id: str) -> dict[str, Any]:
        return json.loads(self.ok("why", op_id, "-o", "json"))

    def until(self, check: Callable[[dict[str, dict[str, Any]]], Any], what: str, timeout: float = 60) -> Any:
        """The first truthy ``check(ops)``, looking again as soon as the last look returned."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.ops()
            found = check(rows)
            if found:
                return found
            assert time.monotonic() < deadline, f"not within {timeout}s: {what}; ops: {rows}"

    def status(self, op_id: str, *statuses: str, timeout: float = 60) -> dict[str, Any]:
        return self.until(lambda rows: rows.get(op_id) if rows.get(op_id, {}).get("status") in statuses else None,
                          f"{op_id} {' or '.join(statuses)}", timeout)


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    try:
        ensure_built(build=False)
    except ControlPlaneError as exc:
        pytest.skip(f"local Kubernetes control plane unavailable: {exc}")
    root = tmp_path_factory.mktemp("journey")
    data_dir, queues = root / "opsched", root / "queues.yaml"
    queues.write_text(QUEUES)
    log = open(root / "up.log", "wb")  # noqa: SIM115
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG" and not k.startswith("OPSCHED_NATS")}
    args = ["up", "--queues", str(queues), "--user", "alice:submitter", "--user", "bob:approver"]
    for node in NODES:
        args += ["--node", node]
    proc = subprocess.Popen([sys.executable, "-m", "opsched.cli", "--data-dir", str(data_dir), *args],
                            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    deadline = time.monotonic() + 90
    admin = User(data_dir, root)
    while not (data_dir / "up.json").exists() or admin.run("queues").returncode != 0:
        assert proc.poll() is None, (root / "up.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "opsched up did not serve within 90s"
        time.sleep(0.2)
    yield admin
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(30) == 0, (root / "up.log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()


def test_the_default_is_tls_and_a_user_per_service(up: User):
    state = json.loads((up.data_dir / "up.json").read_text())
    assert state["nats_url"].startswith("tls://") and state["auth_dir"] and state["nats_ca"]


def test_submit_and_wait(up: User):
    out = up.ok("submit", "examples/train-1gpu.yaml", "--wait")
    assert "succeeded" in out.splitlines()[-1]


def test_a_sweep_runs_every_trial(up: User):
    out = up.ok("submit", "examples/sweep.yaml", "--wait", timeout=180)
    batch = out.split("\n")[-2] if not out.endswith("succeeded\n") else None
    rows = [r for r in up.ops().values() if r["name"] == "lr-sweep" or (batch and r.get("batch") == batch)]
    assert len(rows) == 6 and {r["status"] for r in rows} == {"succeeded"}


def test_the_cache_answers_after_the_original_and_while_it_runs(up: User):
    cached = job("cached", "sleep 1", extra="cache: {disable: false}")
    first = up.submit("cached", cached, "--wait")
    again = up.submit("cached", cached, "--wait")
    assert up.ops()[again]["status"] == "succeeded" and "cache_hit" in json.dumps(up.why(again))
    assert first != again
    running = job("cached-long", "sleep 4", extra="cache: {disable: false}")
    original = up.submit("cached-long", running)
    up.status(original, "running")
    during = up.submit("cached-long", running, "--wait")
    assert up.ops()[original]["status"] == "succeeded" and "cache_hit" in json.dumps(up.why(during))


def test_an_approver_releases_an_op_held_for_approval_and_a_submitter_cannot(up: User):
    alice, bob = User(up.data_dir, up.files, "alice"), User(up.data_dir, up.files, "bob")
    held = alice.submit("held", job("held", "sleep 1", extra="isApproved: false"))
    up.status(held, "on_hold")
    refused = alice.run("approve", held)
    assert refused.returncode != 0 and "approve" in (refused.stderr + refused.stdout)
    bob.ok("approve", held)
    up.status(held, "succeeded")


CONDITIONAL = """version: 1.1
kind: operation
name: conditional
conditions: "{{ params.go }}"
params: {go: {value: true}}
component:
  inputs: [{name: go, type: bool}]
  run:
    kind: job
    container: {image: python:3.11-slim, command: ["sh", "-c", "sleep 1"], resources: {limits: {nvidia.com/gpu: 1}}}
"""


def test_conditions_skip_an_op(up: User):
    skipped = up.submit("conditional", CONDITIONAL, "-P", "go=false")
    assert up.status(skipped, "skipped")["status"] == "skipped"
    ran = up.submit("conditional", CONDITIONAL, "--wait")
    assert up.ops()[ran]["status"] == "succeeded"


def test_a_schedule_fires(up: User):
    soon = (datetime.now(timezone.utc) + timedelta(seconds=2)).isoformat()
    text = job("nightly", "sleep 1", extra=f"schedule: {{kind: datetime, startAt: '{soon}'}}")
    schedule = up.ok("schedule", up.file("nightly.yaml", text), "--id", "nightly").split()[0]
    assert schedule == "nightly"
    up.until(lambda rows: [r for r in rows.values() if r["op_id"].startswith("nightly-")
                           and r["status"] == "succeeded"], "a run of the schedule succeeded")


def test_stop_then_resume_restart_and_copy_with_params(up: User):
    text = job("long", "sleep {{ secs }}", inputs="inputs:\n  - {name: secs, type: int, value: 60}")
    op_id = up.submit("long", text)
    up.status(op_id, "running")
    up.ok("stop", op_id)
    up.status(op_id, "stopped")
    up.ok("resume", op_id, "-P", "secs=1")
    row = up.status(op_id, "succeeded")
    assert row["attempt"] == 1
    restarted = up.ok("restart", op_id, "-P", "secs=1").split()[-1]
    copied = up.ok("copy", op_id, "-P", "secs=1").split()[-1]
    for new in (restarted, copied):
        assert new != op_id
        up.status(new, "succeeded")


def test_an_urgent_op_preempts_a_batch_op_and_a_gang_runs_whole(up: User):
    batch = [up.submit(f"filler-{i}", job(f"filler-{i}", "sleep 60", extra="priorityClass: batch"))
             for i in range(4)]
    for op_id in batch:
        up.status(op_id, "running")
    urgent = up.ok("submit", "examples/urgent-1gpu.yaml").split()[0]
    up.status(urgent, "succeeded")
    preempted = [op_id for op_id in batch if up.why(op_id).get("status") != "running"
                 or up.ops()[op_id].get("attempt", 0) > 0]
    assert preempted, "no batch op was preempted"
    for op_id in batch:
        up.ok("stop", op_id)
    for op_id in batch:
        up.status(op_id, "stopped")
    gang = up.ok("submit", "examples/ddp-3x1gpu.yaml", "--wait").split()[0]
    assert up.ops()[gang]["status"] == "succeeded"


def test_why_for_a_waiting_a_rejected_and_an_ended_op_and_cost_with_budgets(up: User):
    waiting = up.submit("capped", job("capped", "sleep 1", extra="project: capped"))
    up.until(lambda rows: "budget" in json.dumps(up.why(waiting)).lower(), "the capped op waiting for its budget")
    rejected = up.submit("nosuch", job("nosuch", "sleep 1", extra="priorityClass: nosuch"))
    up.status(rejected, "rejected")
    assert "nosuch" in json.dumps(up.why(rejected))
    ended = up.ok("submit", "examples/train-1gpu.yaml", "--wait").split()[0]
    assert "succeeded" in json.dumps(up.why(ended))
    cost = json.loads(up.ok("cost", "-o", "json"))
    assert "capped" in json.dumps(cost) and "default" in json.dumps(cost)
    up.ok("stop", waiting)
    up.status(waiting, "stopped")
