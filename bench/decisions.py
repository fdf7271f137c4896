"""Scenarios (c), (d), (e): admission decisions in process, no NATS.

State is built the way admission builds it: by folding events (submitted + both gates for pending
ops; also admitted + running for active ones; ``NodeObserved`` for nodes). Then, in steady state,
each timed cycle follows ``per_cycle`` ops finishing (a ``succeeded`` folded, untimed) and as many
new ops arriving in the same queues (folded, untimed), so the pending depth stays where it was; the
timer covers exactly what ``cycle.decide`` does (``Cycle(...).run()``, used so that the nodes it
assumed can be folded back as ``running``). Per-decision latency is a cycle's time divided by the
ops it admitted.

(c) pending depth 1k/10k/100k over 10 queues whose GPU quota binds; (d) 10 vs 1,000 queues with the
same pending depth and the same number of running ops; (e) 50 vs 5,000 nodes of 8 GPUs, full, so
node capacity binds (the running ops grow with the nodes, as in a real full cluster).
"""
from __future__ import annotations

import cProfile
import gc
import io
import pstats
import time
from collections import deque
from dataclasses import dataclass

from bench.common import latency_summary
from bench.workload import (
    NAMESPACE, admitted_event, at, gpu_queues_config, gpu_spec, node_event, op_id, pending_events, queue_names,
    running_event, succeeded_event,
)
from proto.events import OperationAdmitted

WARMUP = 5


@dataclass(frozen=True)
class Setup:
    name: str
    pending: int
    queues: int = 10
    gpus_each: float | None = 10  # GPU quota per queue (binding); None: unlimited quota
    nodes: int = 0  # 0: no node facts (capacity not checked)
    gpus_per_node: int = 8
    cycles: int = 200
    per_cycle: int = 4  # ops finished (and as many arriving) before each timed cycle

    @property
    def active(self) -> int:
        return self.nodes * self.gpus_per_node if self.nodes else int(self.queues * (self.gpus_each or 0))


def setups(quick: bool) -> list[Setup]:
    c = 50 if quick else 200
    return [
        Setup("c_1k", 1_000, cycles=c),
        Setup("c_10k", 10_000, cycles=c),
        Setup("c_100k", 100_000, cycles=c),
        Setup("d_10q", 10_000, queues=10, gpus_each=100, cycles=c // 2),
        Setup("d_1000q", 10_000, queues=1_000, gpus_each=1, cycles=max(10, c // 10)),
        Setup("e_50n", 10_000, queues=1, gpus_each=None, nodes=50, cycles=c // 2),
        Setup("e_5000n", 10_000, queues=1, gpus_each=None, nodes=5_000, cycles=max(10, c // 10)),
    ]


class Harness:
    def __init__(self, setup: Setup) -> None:
        from services.admission.queues import compile_book
        from services.admission.state import AdmissionState

        self.setup = setup
        self.book = compile_book(gpu_queues_config(setup.queues, setup.gpus_each))
        self.state = AdmissionState()
        self.spec = gpu_spec()
        self.queues = queue_names(setup.queues)
        self.active: deque[str] = deque()
        self.next_pending = 0
        self.events_folded = 0

    def _apply(self, event) -> None:
        self.state.apply(event)
        self.events_folded += 1

    def build(self) -> float:
        """Fold the initial state; returns the seconds it took (events/s is reported too)."""
        s, began = self.setup, time.perf_counter()
        for j in range(s.nodes):
            self.state.observe(node_event(f"node-{j:05d}", s.gpus_per_node))
        for i in range(s.active):
            oid, queue = op_id("a", i), self.queues[i % len(self.queues)]
            for event in pending_events(oid, self.spec, queue, at(-3600)):
                self._apply(event)
            self._apply(admitted_event(oid, self.spec, queue, at(-3600)))
            node = f"node-{i // s.gpus_per_node:05d}" if s.nodes else None
            self._apply(running_event(oid, at(-3600), node))
            self.active.append(oid)
        for _ in range(s.pending):
            self._arrive(self.queues[self.next_pending % len(self.queues)], at(self.next_pending * 1e-3))
        return time.perf_counter() - began

    def _arrive(self, queue: str, when) -> None:
        for event in pending_events(op_id("p", self.next_pending), self.spec, queue, when):
            self._apply(event)
        self.next_pending += 1

    def cycle(self, now):
        from services.admission.cycle import Cycle

        return Cycle(self.state, self.book, now, NAMESPACE)

    def settle(self, now) -> list:
        """One untimed cycle: queues every pending op (its gates cleared) and admits what fits."""
        c = self.cycle(now)
        decisions = c.run()
        self._absorb(c, decisions, now)
        return decisions

    def _absorb(self, c, decisions, now) -> list[OperationAdmitted]:
        admitted = [d for d in decisions if isinstance(d, OperationAdmitted)]
        for d in admitted:
            node = (c.snap.placed.get(d.op_id) or [None])[0]
            self._apply(running_event(d.op_id, now, node))
            self.active.append(d.op_id)
        return admitted

    def step(self, i: int, profiler: cProfile.Profile | None = None) -> tuple[float, int, int]:
        """Finish ``per_cycle`` ops, let as many arrive, time one cycle: (seconds, admitted, other decisions)."""
        now = at(600 + i)
        for _ in range(self.setup.per_cycle):
            done = self.active.popleft()
            self._apply(succeeded_event(done, now))
            self._arrive(self.state.ops[done].queue, now)
        if profiler:
            profiler.enable()
        t0 = time.perf_counter()
        c = self.cycle(now)
        decisions = c.run()
        dt = time.perf_counter() - t0
        if profiler:
            profiler.disable()
        admitted = self._absorb(c, decisions, now)
        return dt, len(admitted), len(decisions) - len(admitted)


def run_setup(setup: Setup, profiler: cProfile.Profile | None = None) -> dict[str, float]:
    h = Harness(setup)
    build_s = h.build()
    t0 = time.perf_counter()
    h.settle(at(599))
    first_cycle_s = time.perf_counter() - t0
    for i in range(WARMUP):  # untimed: first-use costs (caches, allocator) out of the figures
        h.step(-WARMUP + i)
    cycles, per_decision = [], []
    admitted_total = others = idle = 0
    for i in range(setup.cycles):
        dt, admitted, other = h.step(i, profiler)
        cycles.append(dt)
        admitted_total += admitted
        others += other
        if admitted:
            per_decision.extend([dt / admitted] * admitted)
        else:
            idle += 1
    out = {
        "pending": float(setup.pending), "queues": float(setup.queues), "nodes": float(setup.nodes),
        "running": float(len(h.active)), "cycles": float(setup.cycles),
        "build_s": build_s, "fold_events_per_s": h.events_folded / build_s if build_s else float("nan"),
        "first_cycle_s": first_cycle_s,
        "decisions_per_s": admitted_total / sum(cycles) if cycles else float("nan"),
        "admitted_per_cycle": admitted_total / max(1, setup.cycles),
        "other_decisions": float(others), "idle_cycles": float(idle),
        **latency_summary(cycles, "cycle", "us"), **latency_summary(per_decision, "decision", "us"),
    }
    del h
    gc.collect()
    return out


def run_all(quick: bool, only: set[str] | None = None) -> dict[str, dict[str, float]]:
    run_setup(Setup("warm-up", 1_000, cycles=50))  # the first setup of a process runs slower: discard one
    results = {}
    for setup in setups(quick):
        if only and setup.name not in only and setup.name[0] not in only:
            continue
        results[setup.name] = run_setup(setup)
    return results


def profile(name: str, quick: bool = False, top: int = 30, sort: str = "cumulative") -> str:
    """cProfile of the timed cycles only (not the untimed folding) of one setup; the stats as text."""
    setup = next(s for s in setups(quick) if s.name == name)
    profiler = cProfile.Profile()
    summary = run_setup(setup, profiler)
    buf = io.StringIO()
    stats = pstats.Stats(profiler, stream=buf)
    stats.strip_dirs().sort_stats(sort).print_stats(top)
    head = (f"{name}: decision p50 {summary['decision_p50_us']:.0f} us, p99 {summary['decision_p99_us']:.0f} us, "
            f"{summary['decisions_per_s']:.0f} decisions/s (under the profiler)\n")
    return head + buf.getvalue()
