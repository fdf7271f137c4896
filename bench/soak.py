"""The soak (not a test): random faults from the fault suite's set, one after another, over a continuous stream
of 1-GPU ops, for as long as asked; then every op is waited for and the same counts as the suite's are
printed (ops submitted and finished, faults by kind, lost, duplicate pods and admissions, recovery times).

    python -m bench.soak --minutes 5 [--seed 7] [--rate 10]

It starts everything itself: a local control plane (etcd, kube-apiserver, kube-scheduler), a 3-node NATS
cluster, simulated GPU nodes, admission, cost, cache and dispatcher (2 replicas each) as
processes, with the services' default ack wait (30 s). Exit code 0 when nothing was lost or duplicated."""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bench.faults.kinds import CLI_OP_FILE, ApiServerOutage, Fault, KillNatsNode, KillService, NatsDown
from bench.faults.run import Submitter, count, measure
from bench.faults.stage import Layout, Stage
from bench.faults.tally import Tally

REPLICAS = {"admission": 2, "cost": 2, "cache": 2, "dispatcher": 2}


@dataclass
class Log:
    """What the soak did: each fault with the times it struck and was healed, and the CLI submits tried while
    NATS was down (exit code, whether it said plainly that NATS at its URL cannot be reached)."""

    faults: list[tuple[Fault, datetime, datetime]] = field(default_factory=list)
    refusals: list[tuple[int, bool]] = field(default_factory=list)


def random_fault(rng: random.Random, op_file: Path) -> Fault:
    """One of the suite's faults, with a random victim and duration."""
    pick = rng.choice(["service", "service", "nats node", "api server", "nats down"])
    if pick == "service":
        service = rng.choice(list(REPLICAS))
        if service == "admission":  # the leader, whichever replica it is: its standby takes over
            return KillService(service=service, leader=True, lasts_s=rng.uniform(1, 5))
        return KillService(service=service, replica=rng.randrange(REPLICAS[service]), lasts_s=rng.uniform(1, 5))
    if pick == "nats node":
        return KillNatsNode(lasts_s=rng.uniform(3, 10))
    if pick == "api server":
        return ApiServerOutage(lasts_s=rng.uniform(10, 30))
    return NatsDown(lasts_s=rng.uniform(3, 8), op_file=op_file)


async def inject(stage: Stage, fault: Fault, log: Log, began: float) -> None:
    struck = datetime.now(timezone.utc)
    print(f"[soak {time.monotonic() - began:5.0f}s] {fault.name} for {fault.lasts_s:.1f}s", flush=True)
    await fault.strike(stage)
    await fault.hold(stage)
    healed = datetime.now(timezone.utc)
    await fault.heal(stage)
    log.faults.append((fault, struck, healed))
    if isinstance(fault, NatsDown):
        log.refusals += [(code, code != 0 and "cannot reach NATS" in err and stage.nats_url in err
                          and "Traceback" not in err) for code, err in fault.refusals]


async def soak(stage: Stage, minutes: float, rng: random.Random, rate: float, op_file: Path) -> tuple[Tally, Log]:
    assert stage.ops is not None
    submitter, log, stop = Submitter(stage), Log(), asyncio.Event()
    began = time.monotonic()
    feeding = asyncio.create_task(submitter.feed(None, rate, stop))
    deadline = began + minutes * 60
    while time.monotonic() < deadline:
        await asyncio.sleep(rng.uniform(5, 20))  # calm between faults
        if time.monotonic() < deadline:
            await inject(stage, random_fault(rng, op_file), log, began)
    stop.set()
    await feeding
    print(f"[soak] {len(submitter.accepted)} ops accepted; waiting for every one to end", flush=True)
    unfinished = await stage.ops.until_terminal(submitter.accepted, timeout=600)
    if unfinished:
        print(f"[soak] {len(unfinished)} ops not terminal after 600 s: {unfinished[:10]}", flush=True)
    return await count(stage, submitter, quota_timeout=60), log


def recoveries(stage: Stage, log: Log) -> dict[str, list[float]]:
    """Per kind of fault: seconds from each heal to the first event of the kind of work it stopped."""
    out: dict[str, list[float]] = defaultdict(list)
    for fault, struck, healed in log.faults:
        out[fault.name].append(measure(stage, fault, struck, healed, finished_s=0.0).resumed_s)
    return out


def summary(tally: Tally, log: Log, by_kind: dict[str, list[float]], durations: list[float], minutes: float) -> str:
    times = [t for v in by_kind.values() for t in v if t == t]  # NaN: no work of its kind followed
    lines = [f"soak of {minutes:g} min: {tally.accepted + tally.refused} ops submitted, {tally.accepted} accepted, "
             f"{tally.refused} refused (NATS down), {tally.terminal} finished {dict(tally.statuses)}",
             f"faults: {len(log.faults)} ({', '.join(f'{k} x{len(v)}' for k, v in sorted(by_kind.items()))})",
             f"lost: {len(tally.lost)}   duplicate pods: {len(tally.duplicate_pods)}   "
             f"duplicate admissions: {len(tally.duplicate_admissions)}   quota in use at the end: "
             f"{len(tally.quota_in_use)}   most ops admitted at once: {tally.peak_active}",
             f"recovery (heal -> work of its kind again): median {statistics.median(times) if times else 0:.1f}s, "
             f"max {max(times, default=0):.1f}s",
             *[f"  {k}: {', '.join(f'{t:.1f}s' for t in v)}" for k, v in sorted(by_kind.items())],
             f"submit to end per op: median {statistics.median(durations) if durations else 0:.1f}s, "
             f"slowest {max(durations, default=0):.1f}s"]
    if log.refusals:
        clear = sum(1 for _, ok in log.refusals if ok)
        lines.append(f"CLI submits while NATS was down: {len(log.refusals)}, refused with a clear message: {clear}")
    lines += [f"PROBLEM {p}" for p in tally.problems()]
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> int:
    from opsched.bus import logging as oplog
    from opsched.localcluster.controlplane import ControlPlane, ensure_built

    oplog.configure("console", "error")  # the harness's NATS connection is told of every outage
    ensure_built()
    root = Path(tempfile.mkdtemp(prefix="opsched-soak-"))
    print(f"[soak] logs and stores under {root}", flush=True)
    control_plane = ControlPlane(root / "control-plane").start()
    stage = Stage(root / "stage", control_plane, Layout(nats_nodes=3, replicas=dict(REPLICAS),
                                                        reconcile_interval_s=5.0, reconcile_grace_s=10.0))
    try:
        await stage.start()
        op_file = root / "op.yaml"
        op_file.write_text(CLI_OP_FILE)
        tally, log = await soak(stage, args.minutes, random.Random(args.seed), args.rate, op_file)
        by_kind = recoveries(stage, log)
        durations = stage.ops.durations() if stage.ops else []
    finally:
        await stage.close()
        control_plane.stop()
    print(summary(tally, log, by_kind, durations, args.minutes), flush=True)
    return 0 if not tally.problems() and all(ok for _, ok in log.refusals) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long faults are injected")
    parser.add_argument("--seed", type=int, default=None, help="the random faults' seed (default: random)")
    parser.add_argument("--rate", type=float, default=10.0, help="ops submitted per second")
    args = parser.parse_args(argv)
    args.seed = args.seed if args.seed is not None else random.randrange(1 << 16)
    print(f"[soak] seed {args.seed}", flush=True)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
