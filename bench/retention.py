"""Retention: what admission holds and replays with N finished ops in the stream, before and after they
left (not part of ``python -m bench``; a measurement for docs/retention.md).

    python -m bench.retention --ops 20000
    python -m bench.retention --ops 1000000 --live 100000 --chunk 250000   # history grows: a flat start?

``--live`` pending ops (submitted, cost_estimated: caching off) are published into a fresh nats-server
and a child process starts a real ``Admission`` on it: the baseline start. Then N finished ops
(submitted, cost_estimated, admitted, dispatched, running, succeeded, cost_recorded: 7 messages each, as the
services publish them for an op with caching off; 8 before issue 36, with a ``cache_missed``), ``--chunk`` at
a time: after each chunk a child measures a start (replay messages, seconds, RSS growth) and an admission
runs the retention round (its clock past the ttl), as a running one would every interval. A child measures the start at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

TTL_S = 3600.0


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _finished(oid: str, sub, when) -> list:
    from bench.workload import admitted_event, pending_events
    from opsched.proto.events import CostRecorded, OperationDispatched, OperationRunning, OperationSucceeded

    pod = f"op-{oid}-0"
    return [*pending_events(oid, sub, when), admitted_event(oid, sub, when, "a100", "A100"),
            OperationDispatched(op_id=oid, at=when, pod_name=pod, namespace="opsched"),
            OperationRunning(op_id=oid, at=when, pod_name=pod, node="n1"),
            OperationSucceeded(op_id=oid, at=when + timedelta(seconds=60), pod_name=pod, node="n1"),
            CostRecorded(op_id=oid, at=when + timedelta(seconds=60), amount=0.03, seconds=60.0, queue=sub.queue)]


async def _generate(url: str, first: int, n_ops: int, finished: bool) -> int:
    from bench.coldstart import _headers
    from bench.generator import build_file
    from bench.workload import at, op_id, pending_events
    from opsched.bus.bus import Bus
    from opsched.proto import codec, subjects

    workload = build_file(None, pending=n_ops)
    bus = await Bus.connect(url, "bench-generator")
    await bus.ensure_streams()
    for i, sub in enumerate(workload.submissions, start=first):
        when = at(sub.offset_s)
        events = _finished(op_id("f", i), sub, when) if finished else pending_events(op_id("p", i), sub, when)
        for event in events:
            await bus.js.publish_async(subjects.event(codec.type_of(event), event.op_id), codec.encode(event),
                                       headers=_headers(event))
    await bus.js.publish_async_completed()
    stored = await bus.last_seq(subjects.OPS_STREAM)
    await bus.close()
    return stored


async def _start_admission(url: str) -> dict:
    """In a child process: a real admission's start on the store, timed, with its RSS growth."""
    from opsched.bus.bus import Bus
    from opsched.proto import subjects
    from opsched.services.admission.service import build
    from opsched.services.runtime.settings import Settings

    bus = await Bus.connect(url, "bench-admission")
    await bus.ensure_streams()
    admission = build(Settings(nats_url=url, log_level="warning"))
    counted = {"n": 0}
    fold = admission.fold

    async def counting(data: bytes, seq: int, headers: Mapping[str, str] | None = None) -> None:
        counted["n"] += 1
        await fold(data, seq, headers)
    admission.fold = counting  # type: ignore[method-assign]
    rss, began = _rss_kib(), time.perf_counter()
    await admission.start(bus)
    out = {"replay_s": round(time.perf_counter() - began, 2), "replayed": counted["n"],
           "records": len(admission.state.ops), "rss_growth_mib": round((_rss_kib() - rss) / 1024, 1),
           "stream_messages": (await bus.js.stream_info(subjects.OPS_STREAM)).state.messages,
           "stream_mib": round((await bus.js.stream_info(subjects.OPS_STREAM)).state.bytes / 2**20, 1)}
    await bus.close()
    return out


async def _retain(url: str, n_ops: int) -> dict:
    from datetime import datetime, timezone

    from opsched.bus.bus import Bus
    from opsched.services.admission.service import build
    from opsched.services.runtime.clock import SystemClock
    from opsched.services.runtime.settings import Settings

    class Later(SystemClock):
        def now(self) -> datetime:
            return datetime.now(timezone.utc) + timedelta(days=3650)  # past every ttl (bench ops are of 2026)

    bus = await Bus.connect(url, "bench-retention")
    admission = build(Settings(nats_url=url, log_level="warning"))
    await admission.start(bus)
    admission.retention.clock = Later()
    admission.retention.is_leader = lambda: True  # the only admission (no lease task runs here)
    began = time.perf_counter()
    left = await admission.retention.round(bus)
    seconds = time.perf_counter() - began
    await bus.close()
    return {"left_memory": left, "round_s": round(seconds, 2), "per_op_ms": round(1000 * seconds / max(left, 1), 3)}


def _child(url: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.retention", "--start", url], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from opsched.natsserver import NatsServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--live", type=int, default=100, help="pending ops (they stay)")
    parser.add_argument("--chunk", type=int, default=250_000, help="finished ops published before each round")
    parser.add_argument("--start", help=argparse.SUPPRESS)  # the child: measure one admission start
    args = parser.parse_args()
    if args.start:
        print(json.dumps(asyncio.run(_start_admission(args.start))))
        return
    with tempfile.TemporaryDirectory() as root:
        server = NatsServer(Path(root) / "nats").start()
        try:
            asyncio.run(_generate(server.url, 0, args.live, finished=False))
            rounds, baseline = [], _child(server.url)
            for first in range(0, args.ops, args.chunk):
                count = min(args.chunk, args.ops - first)
                stored = asyncio.run(_generate(server.url, first, count, finished=True))
                before = _child(server.url)
                rounds.append({"finished_ops": first + count, "stored": stored, "before": before,
                               "retention_round": asyncio.run(_retain(server.url, count))})
                print(json.dumps(rounds[-1]), file=sys.stderr)
            after = _child(server.url)
        finally:
            server.stop()
    print(json.dumps({"finished_ops": args.ops, "live_ops": args.live, "baseline": baseline, "chunks": rounds,
                      "after": after, "after_vs_baseline": round(after["replay_s"] / max(baseline["replay_s"], 1e-9), 2)},
                     indent=2))


if __name__ == "__main__":
    main()
