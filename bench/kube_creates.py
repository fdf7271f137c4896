"""``python -m bench.kube_creates [--n N] [--window W ...] [--profile]``: the dispatcher's own pod creates
(``Kube.create_pod``, W at once as the handler loop's window calls them) against the local API server,
beside the calibration's 8-thread rate of the official client measured in the same run.

Prints creates/s and this process's CPU per create for each window; ``--profile`` prints a cProfile of
the largest window. A micro-benchmark (not part of ``python -m bench``), not a test."""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from typing import Any

from bench.calibrate import calibration_pod, k8s_creates


def pods(tag: str, namespace: str, n: int) -> list[dict[str, Any]]:
    bodies = [calibration_pod(i, namespace) for i in range(n)]
    for i, body in enumerate(bodies):
        body["metadata"]["name"] = f"{tag}-{i}"
    return bodies


async def windowed_creates(kube: Any, bodies: list[dict[str, Any]], window: int) -> None:
    """Create every pod, ``window`` in flight at a time."""
    gate = asyncio.Semaphore(window)

    async def one(body: dict[str, Any]) -> None:
        async with gate:
            await kube.create_pod(body)
    await asyncio.gather(*(one(b) for b in bodies))


def measure(kube: Any, bodies: list[dict[str, Any]], window: int) -> dict[str, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    asyncio.run(windowed_creates(kube, bodies, window))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"creates_per_s": len(bodies) / wall, "cpu_ms_per_create": cpu / len(bodies) * 1e3}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.kube_creates", description=__doc__)
    p.add_argument("--n", type=int, default=300, help="pods per window size")
    p.add_argument("--window", type=int, nargs="+", default=[1, 8, 16])
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)
    from opsched.localcluster.controlplane import ControlPlane
    from opsched.services.dispatcher.k8s import Kube, load_api_client

    with ControlPlane() as cp:
        cal = k8s_creates(cp.kubeconfig, "bench-kube-cal", args.n)
        print(f"calibration (official client): sequential {cal['k8s_create_per_s']:.0f}/s, "
              f"8 threads {cal['k8s_create_8_threads_per_s']:.0f}/s")
        cp.ensure_namespace("bench-kube")
        concurrency = max(args.window)
        kube = Kube(load_api_client(cp.kubeconfig, concurrency), namespaces=("bench-kube",), concurrency=concurrency)
        measure(kube, pods("warm", "bench-kube", concurrency * 2), concurrency)  # the connections
        for window in args.window:
            out = measure(kube, pods(f"w{window}", "bench-kube", args.n), window)
            ratio = out["creates_per_s"] / cal["k8s_create_8_threads_per_s"]
            print(f"Kube.create_pod, {window:3d} at once: {out['creates_per_s']:6.0f} creates/s "
                  f"({ratio:.2f} x calibration's 8 threads), {out['cpu_ms_per_create']:.2f} ms CPU per create")
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(measure, kube, pods("prof", "bench-kube", args.n), concurrency)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
