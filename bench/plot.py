"""The PNG of a run (matplotlib, the ``bench`` extra: ``pip install -e '.[bench]'``).

Left: every ratio to the calibrated primitives (median of the rounds, min–max as error bars, log
scale), its target from bench/targets.yaml as a dashed line over its bar; green passes, red misses,
grey has no target. Right: admission decision latency p50 and p99 against the pending depth (1k,
10k, 100k; min–max error bars) with the absolute targets. Footer: versions, machine, command.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

from bench.targets import Verdict

MISSING = "no PNG: matplotlib is not installed (pip install -e '.[bench]' or pip install matplotlib)"
DEPTHS = (("c_1k", 1_000), ("c_10k", 10_000), ("c_100k", 100_000))
COLOR = {True: "tab:green", False: "tab:red", None: "tab:gray"}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and v == v and abs(v) != float("inf")


def _ratios_panel(ax, ratios: dict) -> None:
    rows = [(n, r) for n, r in ratios.items() if r["unit"] == "×" and _finite(r["median"]) and r["median"] > 0]
    if not rows:
        ax.text(0.5, 0.5, "no ratio measured", ha="center", va="center", transform=ax.transAxes)
        return
    for i, (_, r) in enumerate(rows):
        lo, hi = (r["min"] if _finite(r["min"]) else r["median"]), (r["max"] if _finite(r["max"]) else r["median"])
        ax.bar(i, r["median"], color=COLOR[r["pass"]], alpha=0.8,
               yerr=[[r["median"] - lo], [hi - r["median"]]], capsize=3, ecolor="black")
        for bound in (r["target_min"], r["target_max"]):
            if bound is not None:
                ax.hlines(bound, i - 0.45, i + 0.45, colors="black", linestyles="--", linewidth=1.2)
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)), [n for n, _ in rows], rotation=40, ha="right", fontsize=7)
    ax.set_ylabel("ratio to calibrated primitives (median, min–max)")
    ax.set_title("Scenario ratios; dashed: target (green met, red missed, grey none)", fontsize=9)
    ax.grid(axis="y", which="both", alpha=0.3)


def _decision_targets(verdicts: list[Verdict]) -> dict[str, float]:
    """Absolute p99 ceilings per depth: ratio names c_decision_p99_<depth> or dotted figure names."""
    out = {}
    for v in verdicts:
        for setup, _ in DEPTHS:
            depth = setup.removeprefix("c_")
            if v.target.max is not None and v.name in (f"c_decision_p99_{depth}", f"decisions.{setup}.decision_p99_us"):
                out[setup] = v.target.max
    return out


def _latency_panel(ax, summary: dict, verdicts: list[Verdict]) -> None:
    plotted = False
    for pct, style in (("p50", "o-"), ("p99", "s-")):
        xs, ys, lo, hi = [], [], [], []
        for setup, depth in DEPTHS:
            s = summary.get(f"decisions.{setup}.decision_{pct}_us")
            if s and _finite(s["median"]):
                xs.append(depth)
                ys.append(s["median"])
                lo.append(s["median"] - s["min"])
                hi.append(s["max"] - s["median"])
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt=style, capsize=3, label=f"decision {pct}")
            plotted = True
    targets = _decision_targets(verdicts)
    if targets:
        depth_of = dict(DEPTHS)
        ax.plot([depth_of[s] for s in targets], list(targets.values()), "rv", markersize=9,
                linestyle="none", label="p99 target (ceiling)")
        plotted = True
    if not plotted:
        ax.text(0.5, 0.5, "(c) not measured", ha="center", va="center", transform=ax.transAxes)
        return
    ax.set_xscale("log")
    ax.set_xticks([d for _, d in DEPTHS], ["1k", "10k", "100k"])
    ax.set_xlabel("pending ops")
    ax.set_ylabel("µs per decision (median, min–max)")
    ax.set_title("(c) admission decision latency vs pending depth", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def footer(meta: dict) -> str:
    v, m = meta.get("versions", {}), meta.get("machine", {})
    parts = [f"{meta.get('finished', '?')}  {meta.get('command', '')}  ({meta.get('rounds', '?')} round(s))",
             "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
             f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('mem_gib', '?')} GiB, "
             f"kernel {m.get('kernel', '?')}; workload {meta.get('workload', {}).get('file', '?')}"]
    return "\n".join(textwrap.fill(p, 190) for p in parts)


def render(path: Path, meta: dict, summary: dict, ratios: dict, verdicts: list[Verdict]) -> str | None:
    """Write the PNG; None when written, else why not."""
    plt = _pyplot()
    if plt is None:
        return MISSING
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 7.5), gridspec_kw={"width_ratios": [2.2, 1]})
    _ratios_panel(left, ratios)
    _latency_panel(right, summary, verdicts)
    missed = sum(v.status == "fail" for v in verdicts)
    fig.suptitle(f"opsched benchmark — targets: {sum(v.status == 'pass' for v in verdicts)} met, {missed} missed, "
                 f"{sum(v.status == 'missing' for v in verdicts)} not measured", fontsize=11)
    fig.text(0.01, 0.005, footer(meta), fontsize=6.5, va="bottom", family="monospace")
    fig.tight_layout(rect=(0, 0.09, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
