"""The main job, as the README's first command runs it (`./scripts/demo` = `opsched up --demo --fresh`): every
example ends as expected and the pods it made are listed as the API server holds them, each bound to a GPU node
with its GPUs as limits; with `--agents 2`, in two clusters; with `--autoscale`, from no GPU node at all."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opsched.localcluster.controlplane import ControlPlaneError, ensure_built

ROOT = Path(__file__).resolve().parents[2]


def run_demo(tmp_path, *args: str, stderr: list[str] | None = None) -> str:
    try:
        ensure_built(build=False)
    except ControlPlaneError as exc:
        pytest.skip(f"local Kubernetes control plane unavailable: {exc}")
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    done = subprocess.run([sys.executable, "-m", "opsched.cli", "--data-dir", str(tmp_path / "opsched"), "up",
                           "--demo", "--fresh", *args], capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "demo: every operation ended as expected" in done.stdout
    if stderr is not None:
        stderr.append(done.stderr)
    return done.stdout


def test_the_demo_runs_every_example_to_its_expected_end_and_lists_their_gpu_pods(tmp_path):
    listing = run_demo(tmp_path).split("pods on the API server (namespace opsched):")[1]
    gpu_pods = [line for line in listing.splitlines() if "'nvidia.com/gpu'" in line]
    assert len(gpu_pods) >= 6 and all("node=gpu-" in line for line in gpu_pods), listing


def test_with_two_agents_the_demos_ops_land_in_both_clusters(tmp_path):
    out = run_demo(tmp_path, "--agents", "2")
    first, second = out.split("pods on the API server (namespace opsched):")[1].split(
        "pods on agent-2's API server (namespace opsched):")
    assert "'nvidia.com/gpu'" in first and "'nvidia.com/gpu'" in second, out[-3000:]
    assert "agent-2/gpu-" in out  # the ops table names the agent with the node


def test_with_autoscale_the_demo_starts_without_gpu_nodes_and_its_ops_run_on_nodes_the_pools_add(tmp_path):
    err: list[str] = []
    listing = run_demo(tmp_path, "--autoscale", stderr=err).split("pods on the API server (namespace opsched):")[1]
    assert "autoscaling pools a100 (0..2), t4 (0..3)" in err[0]
    assert "simulated kubelet registered nodes (NAME:GPUS:PRODUCT): cpu-0 (no GPU)" in err[0]
    gpu_pods = [line for line in listing.splitlines() if "'nvidia.com/gpu'" in line]
    assert gpu_pods and all("node=a100-" in line or "node=t4-" in line for line in gpu_pods), listing
