"""The arithmetic of scenario (s), without running anything: which setups it measures, the CPU per op
of each part from the CPU seconds measured over a burst, the rate that CPU predicts, and the table.

The prediction: every process of the pipeline burns CPU for every op, and they share the machine's
cores, so the cores bound the rate at ``cores / (CPU seconds per op of everything)`` (services,
nats-server and the bench process: client and observer). A Python process runs on one core at a
time, so one process also bounds it at ``1 / (its CPU seconds per op)`` (admission's leader does
every decision whatever the replicas); nats-server is multi-threaded (Go) and has no such bound.
The predicted rate is the lower of the two; measured ÷ predicted says how much of the CPU the
pipeline keeps busy (below 1: waits — round trips, batching, idle replicas — not CPU, limit it).
On a shared machine other work takes cores too: the same prediction on the cores it left
(``cores - others_cores``, measured over the burst) is what a busy machine can be held to.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

SERVICES = ("admission", "cost", "cache", "dispatcher")
SCALED = ("cost", "cache", "dispatcher")  # admission has one leader: more replicas are standbys
SERVER = "nats"
CLIENT = "bench"  # the bench process: the SDK client submitting and the ``ops.>`` observer
PARTS = (*SERVICES, SERVER, CLIENT)
SECTION = "s_scaling"


@dataclass(frozen=True)
class Setup:
    """One configuration: replicas per service and nats-server nodes (1: a single server)."""

    name: str
    replicas: Mapping[str, int] = field(hash=False)
    nats_nodes: int = 1

    @property
    def stream_replicas(self) -> int:
        return min(self.nats_nodes, 3)

    def counts(self) -> str:
        """Replicas of admission/cost/cache/dispatcher: ``1/4/4/4``."""
        return "/".join(str(self.replicas[s]) for s in SERVICES)

    def nats(self) -> str:
        return "1 server" if self.nats_nodes == 1 else f"{self.nats_nodes}-node cluster, R{self.stream_replicas}"


def setups(counts: Sequence[int] = (1, 2, 4), standby: bool = True, cluster: int = 3) -> list[Setup]:
    """cost, cache and dispatcher at each of ``counts`` replicas (admission 1); with ``standby`` one more row
    with 2 admission replicas (one leads, one stands by); with ``cluster`` > 1 one replica each on a
    ``cluster``-node NATS cluster (streams with min(cluster, 3) replicas)."""
    if not counts or min(counts) < 1:
        raise ValueError(f"replica counts must be at least 1, got {list(counts)}")
    one = {s: 1 for s in SERVICES}
    out = [Setup(f"r{n}", {"admission": 1, **{s: n for s in SCALED}}) for n in counts]
    if standby:
        out.append(Setup("r1_admission2", {**one, "admission": 2}))
    if cluster > 1:
        out.append(Setup(f"r1_nats{cluster}", one, nats_nodes=cluster))
    return out


def per_op_ms(cpu_s: Mapping[str, float], ops: int) -> dict[str, float]:
    """CPU milliseconds per op of each part, and their ``total``; NaN when no op completed."""
    if ops <= 0:
        return {**{part: math.nan for part in cpu_s}, "total": math.nan}
    out = {part: 1e3 * seconds / ops for part, seconds in cpu_s.items()}
    out["total"] = sum(out.values())
    return out


def predicted_per_s(cpu_ms: Mapping[str, float], busiest_ms: float, cores: float,
                    others_cores: float = 0.0) -> dict[str, float]:
    """What the CPU per op predicts (ops/s): ``cores_bound`` (the cores shared by every part, ``cpu_ms['total']``
    per op), ``process_bound`` (one core for the busiest single-threaded process, ``busiest_ms`` per op),
    ``predicted``, the lower of the two; ``predicted_free``, the same on the cores other work left."""
    def bound(cores_: float) -> float:
        return max(cores_, 0.0) * 1e3 / cpu_ms["total"] if cpu_ms["total"] > 0 else math.inf

    process_bound = 1e3 / busiest_ms if busiest_ms > 0 else math.inf
    free = others_cores if others_cores == others_cores else 0.0  # NaN: not measured, none assumed
    return {"cores_bound_per_s": bound(cores), "process_bound_per_s": process_bound,
            "predicted_per_s": min(bound(cores), process_bound),
            "predicted_free_per_s": min(bound(cores - free), process_bound)}


@dataclass(frozen=True)
class Tally:
    """The CPU a burst took: seconds per part, the busiest Python process (label, seconds), and the cores
    the rest of the machine kept busy meanwhile (other work: the prediction assumes the cores are ours)."""

    parts: Mapping[str, float]
    busiest: tuple[str, float]
    others_cores: float


def figures(burst: Mapping[str, float], tally: Tally, cores: int) -> dict[str, float]:
    """One setup's row: the burst's figures, CPU ms per op of each part, the prediction and measured ÷
    predicted, and the cores other work took (``others_cores``)."""
    ops = int(burst.get("completed", 0))
    cpu_ms = per_op_ms(tally.parts, ops)
    busiest_ms = 1e3 * tally.busiest[1] / ops if ops > 0 else math.nan
    out = {**burst, **{f"cpu_ms_per_op_{part}": v for part, v in cpu_ms.items()}, "busiest_ms_per_op": busiest_ms}
    out.update(predicted_per_s(cpu_ms, busiest_ms, cores, tally.others_cores))
    out["measured_vs_predicted"] = burst["ops_per_s"] / out["predicted_per_s"]
    out["measured_vs_predicted_free"] = burst["ops_per_s"] / out["predicted_free_per_s"]
    out["others_cores"] = tally.others_cores
    return out


# ---- the table (from the summary of the rounds: ``s_scaling.<setup>.<figure>`` -> median, min, max) ---------

COLUMNS = [("ops/s", "ops_per_s"), ("predicted", "predicted_per_s"),
           ("other work, cores", "others_cores"), ("predicted on the cores left", "predicted_free_per_s"),
           ("measured ÷ predicted on the cores left", "measured_vs_predicted_free"),
           ("burst p50 / p99 ms", "burst_dispatch_p50_ms", "burst_dispatch_p99_ms"),
           ("unloaded p50 ms", "unloaded_dispatch_p50_ms"),
           *[(f"{part} ms/op", f"cpu_ms_per_op_{part}") for part in (*PARTS, "total")]]


def _cell(summary: Mapping[str, Mapping[str, float]], setup: str, keys: Sequence[str], fmt) -> str:
    values = [summary.get(f"{SECTION}.{setup}.{key}") for key in keys]
    if any(v is None for v in values):
        return "–"
    return " / ".join(fmt(v["median"]) for v in values if v is not None)


def table(summary: Mapping[str, Mapping[str, float]], fmt, plan: Sequence[Setup] | None = None) -> str:
    """Markdown: a row per setup measured (medians over the rounds), ``fmt`` formats a number."""
    names = [s.name for s in plan or setups()]
    measured = sorted({key.split(".")[1] for key in summary if key.startswith(SECTION + ".")},
                      key=lambda n: (names.index(n) if n in names else len(names), n))
    if not measured:
        return ""
    known = {s.name: s for s in plan or setups()}
    head = ["setup", "replicas " + "/".join(SERVICES), "NATS", *[c[0] for c in COLUMNS]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * len(COLUMNS)]
    for name in measured:
        cells = [_cell(summary, name, c[1:], fmt) for c in COLUMNS]
        setup = known.get(name)
        lines.append(f"| {name} | {setup.counts() if setup else '?'} | {setup.nats() if setup else '?'} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)
