"""Packing (issue 18): the mixed 1/2/4/8-GPU workload of ``bench/workloads/packing/mixed.yaml`` admitted by admission's
real cycle under each placement, on a simulated cluster and clock, the same arrival streams for every policy:

- ``binpack`` and ``spread``: admission places the pod and the pod prefers that node; the simulated
  kube-scheduler binds it there when it fits (as the real one does, tests/integration/test_packing.py).
- ``today``: admission's first-fit model (placement ``firstFit``), the pod prefers nothing, and kube-scheduler
  spreads it (the emptiest node that fits). A pod that fits nowhere stays Pending until a node frees up.

Reported per policy (medians over the seeds): GPU utilisation (GPU-time run / GPUs x the span from the first
arrival to the last end), the 8-GPU ops' wait (submitted -> running, mean and p90) and every op's mean wait.

    python -m bench.packing                         # every policy, the file's seeds
    python -m bench.packing --seeds 1 --ops 200     # a quick run
"""
from __future__ import annotations

import argparse
import heapq
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from bench.common import GPU
from bench.generator import Submission
from bench.workload import NAMESPACE, at, pending_events, running_event, succeeded_event
from opsched.proto.cluster import NodeObserved
from opsched.proto.events import OperationAdmitted
from opsched.proto.queues import Placement, Queue, QueuesConfig

WORKLOAD = Path(__file__).resolve().parent / "workloads" / "packing" / "mixed.yaml"
POLICIES: dict[str, Placement] = {"binpack": "binpack", "spread": "spread", "today": "firstFit"}  # name -> admission's placement
HOSTNAME = "kubernetes.io/hostname"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Nodes(_Model):
    count: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1, alias="gpusPerNode")


class Minutes(_Model):
    min: float = Field(gt=0)
    max: float = Field(gt=0)


class Ops(_Model):
    count: int = Field(ge=1)
    arrivals_per_minute: float = Field(gt=0, alias="arrivalsPerMinute")
    sizes: dict[int, float]
    minutes: Minutes


class PackingWorkload(_Model):
    seeds: list[int]
    nodes: Nodes
    ops: Ops


@dataclass
class Arrival:
    op_id: str
    at_s: float
    gpus: int
    run_s: float


def arrivals(w: PackingWorkload, seed: int) -> list[Arrival]:
    rng = random.Random(seed)
    sizes, weights = list(w.ops.sizes), list(w.ops.sizes.values())
    t, out = 0.0, []
    for i in range(w.ops.count):
        t += rng.expovariate(w.ops.arrivals_per_minute / 60.0)
        out.append(Arrival(f"p{i:05d}", t, rng.choices(sizes, weights)[0],
                           60.0 * rng.uniform(w.ops.minutes.min, w.ops.minutes.max)))
    return out


@dataclass
class Cluster:
    """The simulated kube-scheduler and kubelets: free GPUs per node, pods bound or Pending."""

    free: dict[str, int]
    pending: list[tuple[str, int, str]] = field(default_factory=list)  # op id, GPUs, preferred host (FIFO)

    def bind(self, gpus: int, host: str) -> str | None:
        """The preferred node when the pod fits there, else the emptiest that fits (ties by name), else None."""
        if host and self.free.get(host, -1) >= gpus:
            node = host
        else:
            fits = [(-free, name) for name, free in self.free.items() if free >= gpus]
            if not fits:
                return None
            node = min(fits)[1]
        self.free[node] -= gpus
        return node


class Simulation:
    def __init__(self, w: PackingWorkload, policy: str, stream: list[Arrival]) -> None:
        from opsched.services.admission.model.queues import compile_book
        from opsched.services.admission.state.admission_state import AdmissionState

        self.book = compile_book(QueuesConfig(queues=[Queue(name="default")], placement=POLICIES[policy]))
        self.state = AdmissionState()
        names = [f"gpu-{i:02d}" for i in range(w.nodes.count)]
        for name in names:
            self.state.observe(NodeObserved(node=name, at=at(0), labels={HOSTNAME: name}, allocatable={
                GPU: str(w.nodes.gpus_per_node), "cpu": "96", "memory": "1Ti", "pods": "110"}))
        self.cluster = Cluster({name: w.nodes.gpus_per_node for name in names})
        self.total_gpus = w.nodes.count * w.nodes.gpus_per_node
        self.ops = {a.op_id: a for a in stream}
        self.events: list[tuple[float, int, str, str]] = [(a.at_s, i, "arrive", a.op_id) for i, a in enumerate(stream)]
        heapq.heapify(self.events)
        self.seq = len(stream)
        self.started: dict[str, float] = {}
        self.nodes: dict[str, str] = {}
        self.last_end = 0.0

    def run(self) -> dict[str, float]:
        while self.events:
            now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                _, _, kind, op_id = heapq.heappop(self.events)
                (self._arrive if kind == "arrive" else self._end)(op_id, now)
            self._cycle(now)
        return self._figures()

    def _arrive(self, op_id: str, now: float) -> None:
        a = self.ops[op_id]
        sub = Submission(index=0, queue="default", klass="train", priority=0, gpus=a.gpus, runtime_s=a.run_s,
                         offset_s=a.at_s)
        for event in pending_events(op_id, sub, at(now)):
            self.state.apply(event)

    def _end(self, op_id: str, now: float) -> None:
        self.state.apply(succeeded_event(op_id, at(now)))
        self.cluster.free[self.nodes[op_id]] += self.ops[op_id].gpus
        self.last_end = max(self.last_end, now)
        waiting, self.cluster.pending = self.cluster.pending, []
        for pending_id, gpus, host in waiting:  # kube-scheduler retries its Pending pods as room frees
            self._bind(pending_id, gpus, host, now)

    def _cycle(self, now: float) -> None:
        from opsched.services.admission.cycle import Cycle

        for d in Cycle(self.state, self.book, at(now), NAMESPACE).run():
            if isinstance(d, OperationAdmitted):
                self._bind(d.op_id, self.ops[d.op_id].gpus, (d.preferred_hosts or [""])[0], now)

    def _bind(self, op_id: str, gpus: int, host: str, now: float) -> None:
        node = self.cluster.bind(gpus, host)
        if node is None:
            self.cluster.pending.append((op_id, gpus, host))
            return
        self.nodes[op_id], self.started[op_id] = node, now
        self.state.apply(running_event(op_id, at(now), node))
        heapq.heappush(self.events, (now + self.ops[op_id].run_s, self.seq, "end", op_id))
        self.seq += 1

    def _figures(self) -> dict[str, float]:
        first = min(a.at_s for a in self.ops.values())
        busy = sum(a.gpus * a.run_s for a in self.ops.values())
        waits = {i: self.started[i] - a.at_s for i, a in self.ops.items()}
        big = sorted(w for i, w in waits.items() if self.ops[i].gpus == max(a.gpus for a in self.ops.values()))
        return {"utilisation": busy / (self.total_gpus * (self.last_end - first)),
                "big_wait_mean_min": statistics.fmean(big) / 60 if big else 0.0,
                "big_wait_p90_min": big[int(0.9 * (len(big) - 1))] / 60 if big else 0.0,
                "wait_mean_min": statistics.fmean(waits.values()) / 60, "makespan_h": (self.last_end - first) / 3600}


def load(path: Path) -> PackingWorkload:
    return PackingWorkload.model_validate(yaml.safe_load(path.read_text()))


def compare(w: PackingWorkload) -> dict[str, dict[str, float]]:
    """Medians over the seeds of each policy's figures."""
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in POLICIES}
    for seed in w.seeds:
        stream = arrivals(w, seed)
        for policy in POLICIES:
            runs[policy].append(Simulation(w, policy, stream).run())
    return {p: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for p, rs in runs.items()}


def table(results: dict[str, dict[str, float]], w: PackingWorkload) -> str:
    lines = [f"{w.ops.count} ops ({', '.join(f'{g} GPU {s:.0%}' for g, s in w.ops.sizes.items())}) on "
             f"{w.nodes.count} x {w.nodes.gpus_per_node}-GPU nodes, medians of {len(w.seeds)} seeds", "",
             "| placement | GPU utilisation | 8-GPU op wait, mean | 8-GPU op wait, p90 | every op's wait, mean | span |",
             "|---|---|---|---|---|---|"]
    for policy, r in results.items():
        lines.append(f"| {policy} | {r['utilisation']:.1%} | {r['big_wait_mean_min']:.1f} min | "
                     f"{r['big_wait_p90_min']:.1f} min | {r['wait_mean_min']:.1f} min | {r['makespan_h']:.2f} h |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.packing", description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", type=Path, default=WORKLOAD)
    p.add_argument("--seeds", type=int, help="use seeds 1..N instead of the file's")
    p.add_argument("--ops", type=int, help="ops per stream instead of the file's")
    args = p.parse_args(argv)
    w = load(args.workload)
    if args.seeds:
        w.seeds = list(range(1, args.seeds + 1))
    if args.ops:
        w.ops.count = args.ops
    print(table(compare(w), w))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
