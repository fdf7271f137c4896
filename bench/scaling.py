"""Scenario (s): the scaling curve. The four services as separate processes (``python -m opsched.services.<name>``,
as in production), cost, cache and dispatcher at 1, 2 and 4 replicas (admission 1; one row with a standby
admission), then one replica each on a 3-node NATS cluster against the single server.

Per setup, on a fresh open nats-server (or cluster) on loopback, without auth or TLS: the pipeline
workload (bench/workloads/pipeline.yaml, one queue without quota, ``OPSCHED_DISPATCHER_MODE=null``);
a warm-up, unloaded ops one at a time (submit→dispatched p50), then a burst of N submits with 64 in
flight from the SDK client in this process, timestamped as they appear on the op subjects
(bench/pipeline.py's phases and Observer: core subscriptions). Over the burst the CPU of every
process is read from /proc: CPU ms per op per service (summed over its replicas), of nats-server
(summed over its nodes) and of this process; bench/scaling_figures.py turns them into the rate
they predict.

    python -m bench --only s --rounds 3      # the report's "Scaling" table
    python -m bench.scaling                  # one round, printed (no report files)
"""
from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

from bench import scaling_figures as sf
from bench.common import proc_cpu_s
from bench.faults.processes import ServiceProcesses
from bench.pipeline import SUBMITTERS, Observer, _burst, _unloaded, pipeline_workload
from bench.workload import spec_of, write_queues
from opsched.bus.bus import Bus
from opsched.client import Client
from opsched.natsserver import NatsCluster, NatsServer

SECTION = sf.SECTION  # the round's key: s_scaling.<setup>.<figure>
WARMUP = 2 * SUBMITTERS  # concurrent ops before the measures: every replica has handled some


MACHINE, WALL = "machine", "wall"  # readings beside the processes': every core's busy seconds, wall time


def machine_busy_s() -> float:
    """CPU seconds every core of the machine spent busy since boot (/proc/stat: all but idle and iowait)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return float("nan")
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class Pids:
    """CPU seconds of labelled processes, each in a part (a service, ``nats``); this process is ``bench``;
    and what the rest of the machine used meanwhile (other work on it: the prediction assumes none)."""

    def __init__(self, processes: dict[str, tuple[str, int]]) -> None:
        self.processes = processes  # label -> (part, pid)
        self.at: dict[str, float] = {}

    def read(self) -> dict[str, float]:
        out = {label: proc_cpu_s(pid) for label, (_, pid) in self.processes.items()}
        out.update({sf.CLIENT: time.process_time(), MACHINE: machine_busy_s(), WALL: time.perf_counter()})
        return out

    def start(self) -> "Pids":
        self.at = self.read()
        return self

    def stop(self) -> sf.Tally:
        """CPU seconds per part since ``start``, the busiest Python process, the cores others kept busy."""
        now = self.read()
        spent = {label: now[label] - self.at[label] for label in now}
        machine, wall = spent.pop(MACHINE), spent.pop(WALL)
        parts = {part: 0.0 for part in sf.PARTS}
        for label, seconds in spent.items():
            parts[self.processes[label][0] if label in self.processes else sf.CLIENT] += seconds
        python = {k: v for k, v in spent.items() if self.processes.get(k, ("",))[0] != sf.SERVER}
        others = max(0.0, (machine - sum(spent.values())) / wall) if wall > 0 else float("nan")
        return sf.Tally(parts, max(python.items(), key=lambda kv: kv[1]), others)


class Rig:
    """One setup running: NATS (a server or a cluster), the services' processes, the client and the observer."""

    def __init__(self, root: Path, setup: sf.Setup, queues: Path, log_level: str) -> None:
        self.root, self.setup = root, setup
        self.nats: NatsServer | NatsCluster = (
            NatsCluster(root / "nats", n=setup.nats_nodes) if setup.nats_nodes > 1 else NatsServer(root / "nats"))
        self.env = {"OPSCHED_DISPATCHER_MODE": "null", "OPSCHED_QUEUES_FILE": str(queues),
                    "OPSCHED_STREAM_REPLICAS": str(setup.stream_replicas), "OPSCHED_LOG_FORMAT": "json",
                    "OPSCHED_LOG_LEVEL": log_level, "OPSCHED_VERIFY_SNAPSHOT": "0",
                    "OPSCHED_SUBMIT_RATE_PER_MIN": "0",  # one client submits every burst
                    "OPSCHED_COMMAND_RATE_PER_MIN": "0",
                    # a burst is one user's submits, faster than admission takes them: the backlog may hold it all
                    "OPSCHED_CMD_BACKLOG_PER_SUBJECT": "1000000"}
        self.services: ServiceProcesses | None = None
        self.client: Client | None = None
        self.obs: Observer | None = None

    @property
    def url(self) -> str:
        return self.nats.urls if isinstance(self.nats, NatsCluster) else self.nats.url

    def pids(self) -> Pids:
        assert self.services is not None
        nodes = self.nats.nodes if isinstance(self.nats, NatsCluster) else [self.nats]
        out = {f"{name}-{i}": (name, proc.pid) for (name, i), proc in self.services.procs.items()}
        out.update({f"nats-{i}": (sf.SERVER, node.proc.pid) for i, node in enumerate(nodes) if node.proc})
        return Pids(out)

    async def start(self) -> "Rig":
        self.nats.start()  # on the loop's thread: its children die with it (opsched.children)
        bus = await Bus.connect(self.url, "bench-scaling", connect_timeout=3.0, max_reconnect_attempts=2,
                                replicas=self.setup.stream_replicas)
        await bus.ensure_streams()  # with the setup's replicas, before the client's own (R1) would
        self.client = Client(bus)
        self.obs = await Observer().start(self.url.split(",")[0])
        self.services = ServiceProcesses({**os.environ, "NATS_URL": self.url, **self.env}, self.root / "logs")
        await self.services.until_ready(self.services.start(dict(self.setup.replicas)))
        await self.services.leader("admission")
        return self

    async def close(self) -> None:
        if self.services is not None:
            await asyncio.to_thread(self.services.stop_all)
        if self.client is not None:
            await self.client.close()
        if self.obs is not None:
            await self.obs.close()
        self.nats.stop()


async def _warm_up(client: Client, obs: Observer, specs: list, timeout: float) -> None:
    """Submit ``specs`` at once and wait until each is dispatched (connections, consumers, first-call costs)."""
    ids = [f"w{i:07d}" for i in range(len(specs))]
    await asyncio.gather(*(client.submit(spec, op_id=oid) for oid, spec in zip(ids, specs)))
    for oid in ids:
        if await obs.wait("dispatched", oid, timeout) is None:
            raise TimeoutError(f"warm-up op {oid} not dispatched within {timeout}s")


async def measure(root: Path, setup: sf.Setup, *, n_unloaded: int, n_burst: int, log_level: str,
                  timeout: float = 180.0, workload_file: Path | None = None) -> dict[str, float]:
    """One setup on fresh servers and processes: the burst's figures, CPU per op per part, the prediction."""
    workload = pipeline_workload(WARMUP + n_unloaded + n_burst, workload_file)
    specs = [spec_of(sub, routed=True) for sub in workload.submissions]
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    queues = write_queues(root / "queues.yaml", workload.queues_config())
    rig = Rig(root, setup, queues, log_level)
    try:
        await rig.start()
        assert rig.client is not None and rig.obs is not None
        await _warm_up(rig.client, rig.obs, specs[:WARMUP], 60.0)
        out = await _unloaded(rig.client, rig.obs, specs[WARMUP:WARMUP + n_unloaded], 30.0)
        pids = rig.pids().start()
        server_pid = pids.processes["nats-0"][1]  # _burst's own server figure: node 0 only; ours sums them
        out.update(await _burst(rig.client, rig.obs, specs[WARMUP + n_unloaded:], timeout, server_pid))
        tally = pids.stop()
    finally:
        await rig.close()
        shutil.rmtree(root / "nats", ignore_errors=True)  # the stores; the logs stay until the run's tmp goes
    row = sf.figures(out, tally, os.cpu_count() or 1)
    row.update(processes=float(sum(setup.replicas.values())), nats_nodes=float(setup.nats_nodes))
    return row


def run_all(root: Path, round_no: int, *, n_unloaded: int, n_burst: int, log_level: str,
            workload_file: Path | None = None, plan: list[sf.Setup] | None = None,
            say=lambda text: None) -> dict[str, dict[str, float]]:
    """Every setup of ``plan`` (default ``scaling_figures.setups()``) in turn; a setup that fails is recorded."""
    results: dict[str, dict] = {}
    for setup in plan or sf.setups():
        began = time.perf_counter()
        try:
            results[setup.name] = asyncio.run(measure(
                root / f"scaling-r{round_no}-{setup.name}", setup, n_unloaded=n_unloaded, n_burst=n_burst,
                log_level=log_level, workload_file=workload_file))
            say(f"    {setup.name}: {results[setup.name]['ops_per_s']:.0f} ops/s "
                f"({time.perf_counter() - began:.0f} s)")
        except Exception as exc:  # noqa: BLE001 - the other setups still run
            results[setup.name] = {"error": repr(exc)}
            say(f"    {setup.name}: FAILED ({exc!r})")
    return results


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    from bench.report import fmt, load_targets, summarize

    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", type=int, default=1500, help="burst size per setup (default 1500)")
    p.add_argument("--unloaded", type=int, default=30, help="unloaded ops per setup (default 30)")
    p.add_argument("--only", default="", help="comma-separated setup names (default every setup)")
    p.add_argument("--log-level", default="info")
    args = p.parse_args(argv)
    plan = [s for s in sf.setups() if not args.only or s.name in args.only.split(",")]
    root = Path(tempfile.mkdtemp(prefix="opsched-scaling-"))
    try:
        rows = run_all(root, 0, n_unloaded=args.unloaded, n_burst=args.ops, log_level=args.log_level, plan=plan,
                       say=lambda text: print(text, file=sys.stderr, flush=True))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary, _, _ = summarize([{sf.SECTION: rows}], load_targets())
    print(sf.table(summary, fmt, plan))
    return 0 if all("error" not in r for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
