"""Scenarios (c), (d), (e): admission decisions in process, no NATS.

State is built the way admission builds it: by folding events (submitted + both gates for pending
ops; also admitted + running for active ones; ``NodeObserved`` for nodes). Then, in steady state,
each timed cycle follows ``per_cycle`` ops finishing (a ``succeeded`` folded, untimed) and as many
new ops arriving in the same queues (folded, untimed), so the pending depth stays where it was; the
timer covers exactly what ``cycle.decide`` does (``Cycle(...).run()``, used so that the nodes it
assumed can be folded back as ``running``). Per-decision latency is a cycle's time divided by the
ops it admitted.

The queues, the ops (class, priority, GPU request, run time, creation time) and the running ops
that fill the quotas come from the workload config (bench/workloads/default.yaml, or ``--workload``);
each setup overrides only the sizes it varies. With default.yaml: (c) pending depth 1k/10k/100k over
10 queues whose GPU quota binds; (d) 10 vs 1,000 queues with the same pending depth and the same
number of running ops; (e) 50 vs 5,000 nodes of 8 GPUs, full, one queue without a binding quota, so
node capacity binds (the running ops grow with the nodes, as in a real full cluster). Arrivals in
steady state are drawn from the finishing op's queue's own class mix.
"""
from __future__ import annotations

import cProfile
import gc
import io
import pstats
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from bench.common import latency_summary
from bench.generator import (
    DEFAULT,
    KEEP,
    UNBOUNDED,
    GeneratorConfig,
    Submission,
    Workload,
    build,
    load,
)
from bench.workload import (
    NAMESPACE,
    admitted_event,
    at,
    node_event,
    op_id,
    pending_events,
    running_event,
    succeeded_event,
)
from opsched.proto.events import OperationAdmitted

WARMUP = 5


@dataclass(frozen=True)
class Setup:
    """A decision scenario: the workload config's shape with the sizes it varies (None / KEEP: the
    config's own value)."""

    name: str
    pending: int
    queues: int | None = None
    gpus_each: float | None | str = KEEP  # GPU quota per queue; None: no quota; UNBOUNDED: never binds
    nodes: int | None = None  # None: the config's (default.yaml: 0, no node facts, capacity not checked)
    cycles: int = 200
    per_cycle: int = 4  # ops finished (and as many arriving) before each timed cycle

    def workload(self, config: GeneratorConfig, source: str = "<config>") -> Workload:
        return build(config, pending=self.pending, queues=self.queues, nominal_quota=self.gpus_each,
                     nodes=self.nodes, source=source)


def setups(quick: bool) -> list[Setup]:
    c = 50 if quick else 200
    return [
        Setup("c_1k", 1_000, cycles=c),
        Setup("c_10k", 10_000, cycles=c),
        Setup("c_100k", 100_000, cycles=c),
        Setup("d_10q", 10_000, queues=10, gpus_each=100, cycles=c // 2),
        Setup("d_1000q", 10_000, queues=1_000, gpus_each=1, cycles=max(10, c // 10)),
        Setup("e_50n", 10_000, queues=1, gpus_each=UNBOUNDED, nodes=50, cycles=c // 2),
        Setup("e_5000n", 10_000, queues=1, gpus_each=UNBOUNDED, nodes=5_000, cycles=max(10, c // 10)),
    ]


class Harness:
    def __init__(self, setup: Setup, workload: Workload) -> None:
        from opsched.services.admission.model.queues import compile_book
        from opsched.services.admission.state.admission_state import AdmissionState

        self.setup = setup
        self.workload = workload
        self.book = compile_book(workload.queues_config())
        self.state = AdmissionState()
        self.arrivals = workload.arrivals()
        self.active: deque[str] = deque()
        self.next_pending = 0
        self.events_folded = 0
        self.clock0 = max(600.0, workload.submissions[-1].offset_s + 1 if workload.submissions else 0.0)

    def _apply(self, event) -> None:
        self.state.apply(event)
        self.events_folded += 1

    def build(self) -> float:
        """Fold the initial state; returns the seconds it took (events/s is reported too)."""
        w, began = self.workload, time.perf_counter()
        product, flavor = w.config.nodes.product, w.config.flavor
        for name in w.node_names():
            self.state.observe(node_event(name, w.gpus_per_node, product))
        for i, (sub, node) in enumerate(w.fill()):
            oid = op_id("a", i)
            for event in pending_events(oid, sub, at(-3600)):
                self._apply(event)
            self._apply(admitted_event(oid, sub, at(-3600), flavor, product))
            self._apply(running_event(oid, at(-3600), node))
            self.active.append(oid)
        for sub in w.submissions:
            self._arrive(sub, at(sub.offset_s))
        return time.perf_counter() - began

    def _arrive(self, sub: Submission, when) -> None:
        for event in pending_events(op_id("p", self.next_pending), sub, when):
            self._apply(event)
        self.next_pending += 1

    def cycle(self, now):
        from opsched.services.admission.cycle import Cycle

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
        now = at(self.clock0 + i)
        for _ in range(self.setup.per_cycle):
            done = self.active.popleft()
            self._apply(succeeded_event(done, now))
            self._arrive(next(self.arrivals[self.state.ops[done].queue]), now)
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


def run_setup(setup: Setup, workload: Workload, profiler: cProfile.Profile | None = None) -> dict[str, float]:
    h = Harness(setup, workload)
    build_s = h.build()
    t0 = time.perf_counter()
    h.settle(at(h.clock0 - 1))
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
        "pending": float(len(workload.submissions)), "queues": float(len(workload.plans)),
        "nodes": float(workload.nodes),
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


def run_all(quick: bool, only: set[str] | None = None, workload_file: Path | None = None) -> dict[str, dict[str, float]]:
    """Every picked setup on the workload config (``workload_file``, default bench/workloads/default.yaml)."""
    path = workload_file or DEFAULT
    config = load(path)
    warm = Setup("warm-up", 1_000, cycles=50)
    run_setup(warm, warm.workload(config))  # the first setup of a process runs slower: discard one
    results = {}
    for setup in setups(quick):
        if only and setup.name not in only and setup.name[0] not in only:
            continue
        results[setup.name] = run_setup(setup, setup.workload(config, str(path)))
    return results


def profile(name: str, quick: bool = False, top: int = 30, sort: str = "cumulative",
            workload_file: Path | None = None) -> str:
    """cProfile of the timed cycles only (not the untimed folding) of one setup; the stats as text."""
    setup = next(s for s in setups(quick) if s.name == name)
    profiler = cProfile.Profile()
    summary = run_setup(setup, setup.workload(load(workload_file or DEFAULT)), profiler)
    buf = io.StringIO()
    stats = pstats.Stats(profiler, stream=buf)
    stats.strip_dirs().sort_stats(sort).print_stats(top)
    head = (f"{name}: decision p50 {summary['decision_p50_us']:.0f} us, p99 {summary['decision_p99_us']:.0f} us, "
            f"{summary['decisions_per_s']:.0f} decisions/s (under the profiler)\n")
    return head + buf.getvalue()
