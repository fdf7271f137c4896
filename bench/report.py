"""Aggregate the rounds: medians with min–max, ratios to the calibrated primitives (computed within
each round, then the median of those), the targets of bench/targets.yaml checked as pass/fail
(bench/targets.py); JSON, Markdown and, when matplotlib is installed, a PNG plot (bench/plot.py)."""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import anchor, msgcount
from bench import scaling_figures as sf
from bench import targets as tg
from bench.common import median_min_max
from bench.pipeline import CRITICAL_HOPS, PUBLISHES_PER_OP

Flat = dict[str, float]


def flatten(round_result: dict) -> Flat:
    out: Flat = {}
    for section, values in round_result.items():
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            if isinstance(value, dict):
                for k, v in value.items():
                    if isinstance(v, (int, float)):
                        out[f"{section}.{key}.{k}"] = float(v)
            elif isinstance(value, (int, float)):
                out[f"{section}.{key}"] = float(value)
    return out


@dataclass(frozen=True)
class Ratio:
    """A figure divided by calibrated primitives of the same round (its target, if any, is in
    bench/targets.yaml under ``name``)."""

    name: str
    explain: str
    compute: Callable[[Flat], float]
    unit: str = "×"


def _get(f: Flat, key: str) -> float:
    return f.get(key, float("nan"))


def _ceiling(f: Flat) -> float:
    return _get(f, "calibration.js_pub_64_per_s") / PUBLISHES_PER_OP


def _floor_us(f: Flat) -> float:
    return CRITICAL_HOPS * _get(f, "calibration.js_pub_seq_p50_us")


RATIOS = [
    Ratio("a_end_to_end_throughput", f"(a) ops/s ÷ min(64-in-flight publish/s ÷ {PUBLISHES_PER_OP}, pod creates/s)",
          lambda f: _get(f, "a_kubernetes.ops_per_s") / min(_ceiling(f), _get(f, "calibration.k8s_create_per_s"))),
    Ratio("a_vs_api_concurrent", "(a) ops/s ÷ the API server's concurrent create rate (8 threads)",
          lambda f: _get(f, "a_kubernetes.ops_per_s") / _get(f, "calibration.k8s_create_8_threads_per_s")),
    Ratio("a_vs_a0_fit", "(a) ops/s to Succeeded ÷ (a0) the same pods created directly, capacity for all",
          lambda f: anchor.ratio(_get(f, "a_kubernetes.succeeded_per_s"), _get(f, "a0_bare.fit.succeeded_per_s"))),
    Ratio("a_vs_a0_over", "(a) ops/s to Succeeded ÷ (a0) the same pods created directly, burst 3 × capacity",
          lambda f: anchor.ratio(_get(f, "a_kubernetes.over.succeeded_per_s"),
                                 _get(f, "a0_bare.over.succeeded_per_s"))),
    Ratio("a_submit_to_pod_p50", f"(a) unloaded submit→pod-created p50 ÷ ({CRITICAL_HOPS} hops × publish p50)",
          lambda f: 1e3 * _get(f, "a_kubernetes.unloaded_dispatch_p50_ms") / _floor_us(f)),
    Ratio("a_submit_to_pod_p50_incl_create", "(a) same ÷ (5 × publish p50 + pod-create p50), for reading",
          lambda f: _get(f, "a_kubernetes.unloaded_dispatch_p50_ms") / (
              _floor_us(f) / 1e3 + _get(f, "calibration.k8s_create_p50_ms"))),
    Ratio("b_pipeline_throughput", f"(b) ops/s ÷ (64-in-flight publish/s ÷ {PUBLISHES_PER_OP})",
          lambda f: _get(f, "b_pipeline.ops_per_s") / _ceiling(f)),
    Ratio("b_submit_to_dispatch_p50", f"(b) unloaded submit→dispatched p50 ÷ ({CRITICAL_HOPS} hops × publish p50)",
          lambda f: 1e3 * _get(f, "b_pipeline.unloaded_dispatch_p50_ms") / _floor_us(f)),
    Ratio("b_submit_to_dispatch_p50_vs_hop", "(b) unloaded submit→dispatched p50 ÷ (5 × publish→fetch hop p50)",
          lambda f: 1e3 * _get(f, "b_pipeline.unloaded_dispatch_p50_ms") / (
              CRITICAL_HOPS * _get(f, "calibration.hop_p50_us"))),
    Ratio("b_burst_dispatch_p50", "(b) burst submit→dispatched p50 ÷ (5 hops × publish p50), for reading",
          lambda f: 1e3 * _get(f, "b_pipeline.burst_dispatch_p50_ms") / _floor_us(f)),
    Ratio("c_decision_p99_10k", "(c) per-decision p99 at 10k pending, µs", lambda f: _get(
        f, "decisions.c_10k.decision_p99_us"), unit="µs"),
    Ratio("c_decision_p99_100k", "(c) per-decision p99 at 100k pending, µs", lambda f: _get(
        f, "decisions.c_100k.decision_p99_us"), unit="µs"),
    Ratio("c_p99_growth_1k_to_100k", "(c) decision p99 at 100k ÷ at 1k",
          lambda f: _get(f, "decisions.c_100k.decision_p99_us") / _get(f, "decisions.c_1k.decision_p99_us")),
    Ratio("c_throughput_100k_vs_1k", "(c) decisions/s at 100k ÷ at 1k pending",
          lambda f: _get(f, "decisions.c_100k.decisions_per_s") / _get(f, "decisions.c_1k.decisions_per_s")),
    Ratio("d_throughput_1000q_vs_10q", "(d) decisions/s with 1,000 queues ÷ with 10 (10k pending, 1,000 running)",
          lambda f: _get(f, "decisions.d_1000q.decisions_per_s") / _get(f, "decisions.d_10q.decisions_per_s")),
    Ratio("e_throughput_5000n_vs_50n", "(e) decisions/s with 5,000 full nodes ÷ with 50",
          lambda f: _get(f, "decisions.e_5000n.decisions_per_s") / _get(f, "decisions.e_50n.decisions_per_s")),
    Ratio("f_cold_start_vs_fetch", "(f) cold start ÷ (ops ÷ batch-100 fetch rate)",
          lambda f: _get(f, "f_coldstart.cold_start_s") / (
              _get(f, "f_coldstart.ops") / _get(f, "calibration.fetch100_per_s"))),
    Ratio("f_cold_start_vs_fetch_msgs", "(f) cold start ÷ (messages ÷ batch-100 fetch rate)",
          lambda f: _get(f, "f_coldstart.cold_start_s") / (
              _get(f, "f_coldstart.messages") / _get(f, "calibration.fetch100_per_s"))),
    Ratio("f_cold_start_vs_raw_replay", "(f) cold start ÷ raw ordered-consumer replay of the same stream",
          lambda f: _get(f, "f_coldstart.cold_start_s") / _get(f, "f_coldstart.raw_replay_s")),
    Ratio("s_replicas_4_vs_1", "(s) ops/s with 4 replicas of cost, cache and dispatcher ÷ with 1, for reading",
          lambda f: _get(f, f"{sf.SECTION}.r4.ops_per_s") / _get(f, f"{sf.SECTION}.r1.ops_per_s")),
    Ratio("s_nats_cluster_vs_single", "(s) ops/s on a 3-node NATS cluster (R3) ÷ on one nats-server, for reading",
          lambda f: _get(f, f"{sf.SECTION}.r1_nats3.ops_per_s") / _get(f, f"{sf.SECTION}.r1.ops_per_s")),
    Ratio("s_nats_cluster_server_cpu", "(s) nats-server CPU per op, 3-node cluster ÷ one server, for reading",
          lambda f: _get(f, f"{sf.SECTION}.r1_nats3.cpu_ms_per_op_nats") / _get(f, f"{sf.SECTION}.r1.cpu_ms_per_op_nats")),
]


RATIO_NAMES = [r.name for r in RATIOS]


def load_targets(path: Path | None = None) -> tg.Targets:
    return tg.load(path or tg.DEFAULT, known=RATIO_NAMES)


def summarize(rounds: list[dict], spec: tg.Targets) -> tuple[dict, dict, list[tg.Verdict]]:
    """Per figure and per ratio: median, min, max over the rounds; then every target checked."""
    flats = [flatten(r) for r in rounds]
    keys = sorted({k for f in flats for k in f})
    summary = {}
    for key in keys:
        med, lo, hi = median_min_max([f[key] for f in flats if key in f])
        summary[key] = {"median": med, "min": lo, "max": hi, "n": sum(key in f for f in flats)}
    ratios = {}
    for ratio in RATIOS:
        med, lo, hi = median_min_max([ratio.compute(f) for f in flats])
        ratios[ratio.name] = {"explain": ratio.explain, "median": med, "min": lo, "max": hi, "unit": ratio.unit,
                              "target": None, "target_min": None, "target_max": None, "pass": None}
    verdicts = tg.check(spec, {**summary, **ratios})
    for v in verdicts:
        if v.name in ratios:
            ratios[v.name].update(target=v.target.text(), target_min=v.target.min, target_max=v.target.max,
                                  **{"pass": None if v.status == "missing" else v.status == "pass"})
    return summary, ratios, verdicts


# ---- text ------------------------------------------------------------------------------------

def fmt(v: float) -> str:
    if v != v:
        return "–"
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def _unit(key: str) -> str:
    for suffix, unit in (("_ms_per_op", "ms/op"), ("_per_op", "/op"), ("_per_s", "/s"), ("_us", "µs"), ("_ms", "ms"),
                         ("_s", "s"), ("_mib", "MiB"), ("_bytes", "B")):
        if key.endswith(suffix):
            return unit
    return ""


MAIN_METRICS = [
    "calibration.js_pub_seq_p50_us", "calibration.js_pub_seq_per_s", "calibration.js_pub_64_per_s",
    "calibration.js_pub_async_per_s", "calibration.fetch100_per_s", "calibration.hop_p50_us", "calibration.kv_put_per_s",
    "calibration.kv_get_per_s", "calibration.k8s_create_per_s", "calibration.k8s_create_p50_ms",
    "calibration.k8s_create_8_threads_per_s",
    "b_pipeline.ops_per_s", "b_pipeline.admitted_per_s", "b_pipeline.unloaded_dispatch_p50_ms",
    "b_pipeline.unloaded_dispatch_p99_ms", "b_pipeline.burst_dispatch_p50_ms", "b_pipeline.burst_dispatch_p99_ms",
    "b_pipeline.python_cpu_ms_per_op", "b_pipeline.server_cpu_ms_per_op",
    "a_kubernetes.ops_per_s", "a_kubernetes.unloaded_dispatch_p50_ms", "a_kubernetes.unloaded_dispatch_p99_ms",
    "a_kubernetes.burst_dispatch_p50_ms", "a_kubernetes.burst_dispatch_p99_ms", "a_kubernetes.burst_running_p50_ms",
    "a_kubernetes.python_cpu_ms_per_op", "a_kubernetes.life_python_cpu_ms_per_op",
    "a_kubernetes.life_server_cpu_ms_per_op",
    "a0_bare.fit.succeeded_per_s", "a_kubernetes.succeeded_per_s",
    "a0_bare.over.succeeded_per_s", "a_kubernetes.over.succeeded_per_s",
    "a_kubernetes.msgs_per_op", "b_pipeline.msgs_per_op",
] + [f"decisions.{s}.{m}" for s in ("c_1k", "c_10k", "c_100k", "d_10q", "d_1000q", "e_50n", "e_5000n")
     for m in ("decision_p50_us", "decision_p99_us", "decisions_per_s")] + [
    "decisions.c_100k.fold_events_per_s", "f_coldstart.ops", "f_coldstart.cold_start_s",
    "f_coldstart.replay_msgs_per_s", "f_coldstart.first_cycle_s", "f_coldstart.raw_replay_s",
]


def tables(summary: dict, ratios: dict, all_metrics: bool = False) -> str:
    lines = ["| figure | median | min – max | unit |", "|---|---:|---:|---|"]
    keys = sorted(summary) if all_metrics else [k for k in MAIN_METRICS if k in summary]
    for key in keys:
        s = summary[key]
        lines.append(f"| {key} | {fmt(s['median'])} | {fmt(s['min'])} – {fmt(s['max'])} | {_unit(key)} |")
    lines += ["", "| ratio | median | min – max | target | met |", "|---|---:|---:|---:|---|"]
    for r in ratios.values():
        target = r["target"] or "–"
        met = {True: "**pass**", False: "**FAIL**", None: "–"}[r["pass"]]
        lines.append(f"| {r['explain']} | {fmt(r['median'])} | {fmt(r['min'])} – {fmt(r['max'])} "
                     f"| {target} | {met} |")
    return "\n".join(lines)


MESSAGE_SECTIONS = {"(a)": "a_kubernetes", "(a) over": "a_kubernetes.over", "(b)": "b_pipeline"}
MESSAGE_ROWS = ("msgs", "in", "out", *msgcount.PARTS)


def messages_text(summary: dict, verdicts: list[tg.Verdict]) -> str:
    """Messages per op (``bench.msgcount``), medians of the rounds, one column per scenario, and the targets of
    bench/targets.yaml on them; empty when neither (a) nor (b) counted any."""
    columns = {label: key for label, key in MESSAGE_SECTIONS.items() if f"{key}.msgs_per_op" in summary}
    if not columns:
        return ""
    targets = {v.name: v for v in verdicts}
    lines = ["| per op | " + " | ".join(columns) + " | target |", "|---" + "|---:" * len(columns) + "|---|"]
    names = sorted({k[len(key) + len(".conn_"):-len("_msgs_per_op")] for key in columns.values() for k in summary
                    if k.startswith(f"{key}.conn_") and k.endswith("_msgs_per_op")})
    for row in [*MESSAGE_ROWS, *(f"conn_{name}_msgs" for name in names)]:
        cells = [fmt(summary.get(f"{key}.{row}_per_op", {}).get("median", float("nan"))) for key in columns.values()]
        aimed = [f"{label} {targets[f'{key}.{row}_per_op'].target.text()}" for label, key in columns.items()
                 if f"{key}.{row}_per_op" in targets]
        label = f"connection {row[5:-5]}" if row.startswith("conn_") else row
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {', '.join(aimed) or '–'} |")
    return ("## Messages per op (nats-server's /varz, /jsz and /connz, medians of the rounds)\n\n" + "\n".join(lines) +
            "\n\nmsgs = in + out, every message nats-server handled over the burst (to the last `dispatched` in (b), "
            "to the last `succeeded` in (a)), the bench's observer's deliveries taken off. publishes: stored on a "
            "stream (each with its pub_ack back); deliveries: by JetStream consumers (pulls and follows; follows: "
            "those of the ordered consumers that rebuild state); acks: "
            "of those; js_api: JetStream API requests; other_in: fetch requests, direct gets and core requests; "
            "other_out: their replies and core deliveries; connection X: the messages of the connections named X "
            "(in + out, /connz).")


def scaling_text(summary: dict) -> str:
    """The table of (s), one row per setup (empty when (s) did not run)."""
    table = sf.table(summary, fmt)
    if not table:
        return ""
    return ("## Scaling (s): ops/s and CPU per op against replicas (medians of the rounds)\n\n" + table + "\n\n"
            "CPU ms/op: per service summed over its replicas; nats over its nodes; bench: the SDK client and the "
            "observer. predicted = min(cores ÷ total CPU per op, 1 core ÷ the busiest Python process's CPU per op); "
            "other work: the cores the rest of the machine kept busy meanwhile; on the cores left: the same "
            "prediction with (cores − other work).")


def check_text(verdicts: list[tg.Verdict]) -> str:
    """The range check (bench/targets.yaml) as text, one line per target."""
    missed = len(tg.failed(verdicts))
    head = f"targets: {len(verdicts) - missed - sum(v.status == 'missing' for v in verdicts)} met, {missed} missed"
    return "\n".join([head, *tg.lines(verdicts)])


def markdown(meta: dict, summary: dict, ratios: dict, notes: list[str], verdicts: list[tg.Verdict]) -> str:
    workload = meta.get("workload", {})
    head = [f"# opsched benchmark — {meta['finished']}", "",
            (f"`{meta['command']}`: {meta['rounds']} round(s){' (quick)' if meta['quick'] else ''}, "
             "medians with min – max over the rounds; ratios are taken within each round."), "",
            "Machine: " + ", ".join(f"{k} {v}" for k, v in meta["machine"].items()), "",
            "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()), "",
            "Workload: " + ", ".join(f"{k} {v}" for k, v in workload.items()), ""]
    if notes:
        head += ["Notes:", *[f"- {n}" for n in notes], ""]
    check = ["", "## Targets (" + meta.get("targets", "bench/targets.yaml") + ")", "", "```",
             check_text(verdicts), "```"]
    scaling = "\n\n".join(part for part in (messages_text(summary, verdicts), scaling_text(summary),
                                            meta.get("packing")) if part)
    return "\n".join(head) + tables(summary, ratios) + "\n" + ("\n" + scaling + "\n" if scaling else "") + \
        "\n".join(check) + "\n\n## Every figure\n\n" + \
        tables(summary, {}, all_metrics=True).split("\n\n")[0] + "\n"


@dataclass
class Written:
    summary: dict
    ratios: dict
    verdicts: list[tg.Verdict]
    files: list[Path]
    png_note: str | None  # why there is no PNG, if there is none


def _stamp(meta: dict) -> str:
    return meta["finished"].replace("-", "").replace(":", "").replace("+0000", "Z").replace("+00:00", "Z")


def write(out_dir: Path, meta: dict, rounds: list[dict], notes: list[str], spec: tg.Targets) -> Written:
    """latest.json, latest.md and latest.png (with a timestamped copy of the JSON and the PNG)."""
    from bench import plot

    out_dir.mkdir(parents=True, exist_ok=True)
    summary, ratios, verdicts = summarize(rounds, spec)
    doc = _finite({"meta": meta, "notes": notes, "summary": summary, "ratios": ratios,
                   "targets": tg.as_json(verdicts), "rounds": rounds})
    text = json.dumps(doc, indent=1, default=str, allow_nan=False) + "\n"
    stamp = _stamp(meta)
    files = [out_dir / "latest.json", out_dir / f"run-{stamp}.json", out_dir / "latest.md"]
    files[0].write_text(text)
    files[1].write_text(text)
    files[2].write_text(markdown(meta, summary, ratios, notes, verdicts))
    png = out_dir / "latest.png"
    note = plot.render(png, meta, summary, ratios, verdicts)
    if note is None:
        copy = out_dir / f"run-{stamp}.png"
        copy.write_bytes(png.read_bytes())
        files += [png, copy]
    else:
        png.unlink(missing_ok=True)  # a stale plot of an earlier run would mislead
    return Written(summary, ratios, verdicts, files, note)


def _finite(value):
    """NaN or infinity (a figure that could not be taken) becomes null, so the file is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
