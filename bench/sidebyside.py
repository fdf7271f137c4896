"""Two commits side by side on one machine in one run: the CPU and the messages per op of this tree against an
earlier commit's, the rounds interleaved (old, new, old, new...) so that both see the same machine (the CPU speed of
these VMs moves between runs; only figures taken together compare).

    python -m bench.sidebyside 49dc9af                     # (b), 3 quick rounds each
    python -m bench.sidebyside 49dc9af --only cal,a,b --rounds 5

The earlier commit is checked out in a temporary worktree (``git worktree add --detach``) and its own bench runs
there (``python -m bench --quick --only ...`` with that tree first on ``PYTHONPATH``), one round per run; the
figures of each run are read from that tree's ``bench/results/latest.json``. The report: the median of each
figure over the rounds, old and new, and new ÷ old."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
FIGURES = ("b_pipeline.python_cpu_ms_per_op", "b_pipeline.server_cpu_ms_per_op", "b_pipeline.msgs_per_op",
           "b_pipeline.ops_per_s", "a_kubernetes.python_cpu_ms_per_op", "a_kubernetes.server_cpu_ms_per_op",
           "a_kubernetes.life_python_cpu_ms_per_op", "a_kubernetes.life_server_cpu_ms_per_op",
           "a_kubernetes.msgs_per_op", "a_kubernetes.succeeded_per_s")


def one_round(tree: Path, only: str, quick: bool) -> dict[str, float]:
    """One round of ``tree``'s bench; the figures of ``FIGURES`` it measured (median of its one round)."""
    cmd = [sys.executable, "-m", "bench", "--rounds", "1", "--only", only, *(["--quick"] if quick else [])]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: {' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    summary = json.loads((tree / "bench" / "results" / "latest.json").read_text())["summary"]
    return {k: float(summary[k]["median"]) for k in FIGURES if k in summary}


def table(old: list[dict[str, float]], new: list[dict[str, float]], rev: str) -> str:
    lines = [f"| figure (median of {len(new)} rounds) | {rev} | this tree | this ÷ {rev} |", "|---|---:|---:|---:|"]
    for key in FIGURES:
        a = [r[key] for r in old if key in r]
        b = [r[key] for r in new if key in r]
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        lines.append(f"| {key} | {ma:.3g} | {mb:.3g} | {mb / ma:.2f} |" if ma else f"| {key} | {ma} | {mb:.3g} | - |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sidebyside", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rev", help="the earlier commit (any git revision)")
    p.add_argument("--only", default="b", help="scenarios, as python -m bench --only (default b)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of each (default 3)")
    p.add_argument("--full", action="store_true", help="full sizes (default: --quick sizes)")
    args = p.parse_args(argv)
    old_tree = Path(tempfile.mkdtemp(prefix="opsched-sidebyside-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(old_tree), args.rev], cwd=HERE, check=True)
    old: list[dict[str, float]] = []
    new: list[dict[str, float]] = []
    try:
        for i in range(args.rounds):
            old.append(one_round(old_tree, args.only, not args.full))
            new.append(one_round(HERE, args.only, not args.full))
            print(f"round {i + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(old_tree)], cwd=HERE, check=False)
    print(table(old, new, args.rev))
    return 0


if __name__ == "__main__":
    sys.exit(main())
