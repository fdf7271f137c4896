"""The README's promise, as a user runs it: `opsched up`, submit a 1-GPU example, see it succeed."""
from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client

from opsched.localcluster.controlplane import ControlPlaneError, ensure_built
from opsched.natsserver import free_port
from opsched.services.dispatcher.k8s import load_api_client

ROOT = Path(__file__).resolve().parents[2]


def opsched(*args: str, data_dir: Path, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opsched.cli", "--data-dir", str(data_dir), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    """One `opsched up` for this module's tests (its log: ``up.log`` beside ``data_dir``); SIGINT at the end of the
    module must stop it cleanly and remove its state and context files."""
    try:
        ensure_built(build=False)
    except ControlPlaneError as exc:
        pytest.skip(f"local Kubernetes control plane unavailable: {exc}")
    root = tmp_path_factory.mktemp("up")
    data_dir = root / "opsched"
    log = open(root / "up.log", "wb")  # noqa: SIM115
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.Popen([sys.executable, "-m", "opsched.cli", "--data-dir", str(data_dir), "up",
                             "--node", "gpu-e2e:1:A100", "--metrics-port", str(free_port())],
                            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    state = data_dir / "up.json"
    deadline = time.monotonic() + 90
    while not state.exists():
        assert proc.poll() is None, (root / "up.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "opsched up did not start within 90s"
        time.sleep(0.2)
    try:
        yield data_dir, json.loads(state.read_text()), proc
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, "SIGINT stops `opsched up` cleanly"
        assert not (data_dir / "up.json").exists() and not (data_dir / "context.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()


def test_a_1_gpu_example_runs_on_a_gpu_node_and_ends_succeeded_in_opsched_ops(up):
    data_dir, state, proc = up
    assert state["nats_url"].startswith("tls://") and Path(state["nats_ca"]) == data_dir.resolve() / "tls" / "ca.pem"
    submitted = opsched("submit", "examples/train-1gpu.yaml", "--wait", data_dir=data_dir)  # TLS, the CA found
    assert submitted.returncode == 0, submitted.stderr
    op_id = submitted.stdout.splitlines()[0].strip()
    assert "succeeded" in submitted.stdout.splitlines()[-1]

    listing = opsched("ops", data_dir=data_dir)
    row = next(line for line in listing.stdout.splitlines() if line.startswith(op_id))
    assert row.split()[1:5] == ["train-1gpu", "default", "succeeded", "0"] and "gpu-e2e" in row

    core = client.CoreV1Api(load_api_client(Path(state["kubeconfig"])))
    pod = core.read_namespaced_pod(f"op-{op_id}-0", "opsched")
    assert pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    assert pod.spec.node_name == "gpu-e2e" and pod.status.phase == "Succeeded"

    watched = opsched("watch", op_id, data_dir=data_dir)
    assert watched.returncode == 0 and "succeeded" in watched.stdout
    # SIGINT then stops it cleanly and removes up.json and context.json: at the end of the module (``up``)


def printed(log: Path, pattern: str, proc: subprocess.Popen, timeout: float = 60) -> re.Match:
    """The first match of ``pattern`` in what `opsched up` printed, once it has printed it."""
    deadline = time.monotonic() + timeout
    while not (found := re.search(pattern, log.read_text())):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)
    return found


def test_opsched_up_prints_its_context_for_other_shells_and_serves_metrics(up, tmp_path):
    data_dir, state, proc = up
    log = data_dir.parent / "up.log"
    context_file = data_dir.resolve() / "context.json"
    assert stat.S_IMODE(context_file.stat().st_mode) == 0o600
    body = json.loads(context_file.read_text())
    assert (body["url"], body["ca"], body["user"]) == (state["nats_url"], state["nats_ca"], "admin")
    assert Path(body["password_file"]).read_text().strip() not in context_file.read_text()
    printed(log, f"export OPSCHED_CONTEXT={re.escape(str(context_file))}\n", proc)
    port = int(printed(log, r"metrics \(Prometheus\) at http://127\.0\.0\.1:(\d+)/metrics", proc)[1])

    elsewhere = tmp_path / "elsewhere"  # another directory and shell: the pasted line is all it needs
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NATS_", "OPSCHED_NATS_"))}
    env["OPSCHED_CONTEXT"] = str(context_file)
    for command in (["queues"], ["ops"], ["cost"]):
        ran = subprocess.run([sys.executable, "-m", "opsched.cli", *command], capture_output=True, text=True,
                             timeout=60, cwd=elsewhere, env=env)
        assert ran.returncode == 0 and ran.stderr == "", (command, ran.stderr)

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as ready:
        assert ready.status == 200
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as scraped:
        metrics = scraped.read().decode()
    assert 'opsched_service_ready{service="dispatcher"} 1.0' in metrics
    assert "# TYPE opsched_messages_handled_total counter" in metrics


LONG = """version: 1.1
kind: component
name: {name}
run:
  kind: job
  container:
    image: busybox
    command: ["sh", "-c", "sleep {seconds}"]
    resources:
      limits: {{nvidia.com/gpu: 1}}
"""


def test_opsched_why_and_queues_show_the_live_state_of_a_waiting_op_and_of_its_queue_held(up, tmp_path):
    data_dir, _, _ = up
    # the long op runs until it is stopped: the short one waits however long the CLI calls below take
    for name, seconds in (("long", 600), ("short", 0.2)):
        (tmp_path / f"{name}.yaml").write_text(LONG.format(name=name, seconds=seconds))
    long_id = opsched("submit", str(tmp_path / "long.yaml"), data_dir=data_dir).stdout.strip()
    deadline = time.monotonic() + 30
    while "running" not in opsched("watch", long_id, "--timeout", "0.5", data_dir=data_dir).stdout:
        assert time.monotonic() < deadline, "the long op never ran"
    short_id = opsched("submit", str(tmp_path / "short.yaml"), data_dir=data_dir).stdout.strip()
    deadline = time.monotonic() + 15
    while True:
        why = opsched("why", short_id, data_dir=data_dir)
        if "queued" in why.stdout:
            break
        assert time.monotonic() < deadline, why.stdout + why.stderr
    assert why.returncode == 0 and "position 1 of 1" in why.stdout
    assert "no free capacity now for 1 x nvidia.com/gpu of product A100" in why.stdout
    queues = opsched("queues", data_dir=data_dir)
    default = next(line for line in queues.stdout.splitlines() if line.startswith("default"))
    assert "1/4" in default and "nvidia.com/gpu[a100] 1/2" in default
    # an admin holds the queue: the waiting op says so, and runs only once the queue is resumed
    held = opsched("queues", "hold", "default", "-m", "e2e", data_dir=data_dir)
    assert held.returncode == 0 and "queue default: held by" in held.stdout, held.stderr
    why = opsched("why", short_id, data_dir=data_dir)
    assert "queue default is held by" in why.stdout and "[queue_held]" in why.stdout, why.stdout
    stopped = opsched("stop", long_id, data_dir=data_dir)
    assert stopped.returncode == 0, stopped.stderr
    assert opsched("queues", "resume", "default", data_dir=data_dir).returncode == 0
    done = opsched("watch", short_id, data_dir=data_dir)
    assert done.returncode == 0 and "succeeded" in done.stdout


SWEEP = """version: 1.1
kind: operation
name: tiny-sweep
matrix:
  kind: grid
  params:
    lr: {kind: choice, value: [0.1, 0.01, 0.001]}
component:
  name: train
  inputs: [{name: lr, type: float}]
  run:
    kind: job
    container:
      image: busybox
      command: ["sh", "-c", "echo lr={{ params.lr }}; sleep 0.2"]
      resources:
        limits: {nvidia.com/gpu: 1}
"""


def on_a_terminal(*args: str, data_dir: Path, timeout: float = 60) -> str:
    """``opsched ARGS`` with stdout on a pseudo-terminal (as a person sees it): what it wrote there."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "opsched.cli", "--data-dir", str(data_dir), *args],
                            stdout=follower, stderr=subprocess.PIPE, cwd=ROOT, env={**os.environ, "COLUMNS": "120"})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command exited
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout) == 0, proc.stderr.read() if proc.stderr else ""
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def test_a_sweep_waited_on_shows_progress_and_reads_as_json(up, tmp_path):
    data_dir, _, _ = up
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    waited = opsched("submit", str(tmp_path / "sweep.yaml"), "--wait", data_dir=data_dir)
    assert waited.returncode == 0, waited.stderr
    lines = waited.stdout.splitlines()
    ids, batch = lines[:3], lines[3]
    assert [line for line in lines if line.startswith("progress: ")][-1] == \
        "progress: 3/3 ended: 3 succeeded, 0 failed; 0 running, 0 waiting"

    watched = opsched("watch", batch, "-o", "json", data_dir=data_dir)
    assert watched.returncode == 0, watched.stderr
    objects = [json.loads(line) for line in watched.stdout.splitlines()]
    assert {o["op_id"] for o in objects} == set(ids) and objects[-1]["progress"]["succeeded"] == 3

    rows = json.loads(opsched("ops", "-b", batch, "-s", "ended", "-o", "json", data_dir=data_dir).stdout)["items"]
    assert {r["opId"]: (r["status"], r["batch"]) for r in rows} == \
        {i: ("succeeded", batch) for i in ids}
    queues = json.loads(opsched("queues", "-o", "json", data_dir=data_dir).stdout)
    assert "default" in [q["name"] for q in queues["queues"]]
    assert json.loads(opsched("cost", "-o", "json", data_dir=data_dir).stdout)["type"] == "cost_answer"
    why = opsched("why", ids[0], "-o", "json", data_dir=data_dir)
    assert json.loads(why.stdout)["found"] is True

    screen = on_a_terminal("watch", batch, data_dir=data_dir)
    assert "\x1b[" in screen  # drawn for a terminal
    assert "3/3 ended: 3 succeeded, 0 failed; 0 running, 0 waiting" in screen
    assert all(op_id in screen for op_id in ids)
