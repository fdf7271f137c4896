"""Shared helpers of the benchmark: percentiles, a fresh nats-server, the in-process service stack,
CPU accounting, logging to a file, and the versions a run records."""
from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from opsched.embedded import ServicesInProcess

GPU = "nvidia.com/gpu"


# ---- numbers ---------------------------------------------------------------------------------

def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank-with-interpolation percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    data = sorted(values)
    if len(data) == 1:
        return float(data[0])
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return float(data[lo] + (data[hi] - data[lo]) * (pos - lo))


def latency_summary(seconds: Sequence[float], prefix: str, unit: str = "ms") -> dict[str, float]:
    scale = {"ms": 1e3, "us": 1e6, "s": 1.0}[unit]
    return {f"{prefix}_p50_{unit}": percentile(seconds, 50) * scale,
            f"{prefix}_p99_{unit}": percentile(seconds, 99) * scale}


def median_min_max(values: Sequence[float]) -> tuple[float, float, float]:
    clean = [v for v in values if v == v]  # drop NaN
    if not clean:
        return float("nan"), float("nan"), float("nan")
    return statistics.median(clean), min(clean), max(clean)


# ---- CPU accounting --------------------------------------------------------------------------

def proc_cpu_s(pid: int) -> float:
    """user+system CPU seconds of another process (Linux /proc); NaN when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


@dataclass
class CpuMeter:
    """CPU seconds of this process and of the nats-server over a stretch of wall time."""

    server_pid: int | None = None
    wall0: float = 0.0
    self0: float = 0.0
    server0: float = 0.0

    def start(self) -> "CpuMeter":
        self.wall0, self.self0 = time.perf_counter(), time.process_time()
        self.server0 = proc_cpu_s(self.server_pid) if self.server_pid else float("nan")
        return self

    def stop(self) -> dict[str, float]:
        out = {"wall_s": time.perf_counter() - self.wall0, "python_cpu_s": time.process_time() - self.self0}
        out["server_cpu_s"] = (proc_cpu_s(self.server_pid) - self.server0) if self.server_pid else float("nan")
        return out


# ---- a fresh nats-server ---------------------------------------------------------------------

@contextlib.contextmanager
def fresh_nats(root: Path, name: str):
    """``nats-server -js`` on a random loopback port with its store in ``root/name`` (removed after), its
    monitoring endpoint on another (``server.monitor_url``: the messages per op are counted from it)."""
    import shutil

    from opsched.natsserver import PICK, NatsServer

    store = root / name
    shutil.rmtree(store, ignore_errors=True)
    server = NatsServer(store, monitor_port=PICK).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(store, ignore_errors=True)


# the four services in this process, as tests/conftest.py and `opsched up` run them
Stack = ServicesInProcess


def configure_logging(log_file: Path, level: str) -> None:
    """The services' own structlog setup (JSON lines, as in production), written to a file."""
    from opsched.bus import logging as oplog

    handle = open(log_file, "a", buffering=1 << 16)  # noqa: SIM115 - lives as long as the run
    with contextlib.redirect_stderr(handle):
        oplog.configure("json", level)


# ---- versions and machine --------------------------------------------------------------------

def _dist(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _mem_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return float("nan")


def apiserver_version(kubeconfig: Path) -> str:
    """``gitVersion`` of the kube-apiserver behind ``kubeconfig`` (asked through the client)."""
    from kubernetes import client, config

    try:
        with config.new_client_from_config(config_file=str(kubeconfig)) as api:
            return client.VersionApi(api).get_code().git_version
    except Exception as exc:  # noqa: BLE001 - a version is informative only
        return f"unavailable ({exc.__class__.__name__})"


def versions(apiserver: str | None = None) -> dict[str, str]:
    """What a run ran on; ``apiserver``: the control plane's version (None: no control plane used)."""
    from opsched.natsserver import binary

    try:
        server = subprocess.run([binary(), "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, FileNotFoundError, subprocess.TimeoutExpired) as exc:
        server = f"unavailable ({exc})"
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "nats-py": _dist("nats-py"),
        "nats-server": server,
        "kubernetes (client)": _dist("kubernetes"),
        "kube-apiserver": apiserver or "not used",
        "msgspec": _dist("msgspec"),
        "matplotlib": _dist("matplotlib"),
        "uvloop": _dist("uvloop"),
        "event loop": "uvloop (services, calibration, (a), (b), as the services run)" if _dist("uvloop")[0].isdigit()
        else "asyncio default",
    }


def machine() -> dict[str, object]:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "mem_gib": _mem_gib(),
        "kernel": platform.release(),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
    }
