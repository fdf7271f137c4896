"""``python -m bench``: calibrate the primitives, run every scenario, write bench/results/latest.*.

    python -m bench                  # 5 rounds (about 15-25 minutes on 2 cores)
    python -m bench --quick          # 1 round, smaller sizes: a smoke run
    python -m bench --rounds 3 --only cal,b,c
    python -m bench --workload bench/workloads/cohorts.yaml --only c,d   # another generator config
    python -m bench --check          # exit 1 when a target of bench/targets.yaml is missed
    python -m bench.profile c_100k   # cProfile of the decision path (see bench/profile.py)
    python -m bench --only s --rounds 3   # the scaling curve: services as processes, 1/2/4 replicas, NATS cluster
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench import report
from bench.common import (
    apiserver_version,
    configure_logging,
    fresh_nats,
    machine,
    versions,
)
from bench.generator import DEFAULT, PIPELINE, GeneratorConfigError, build, load
from bench.targets import TargetsError
from opsched.services.runtime import eventloop

RESULTS = Path(__file__).resolve().parent / "results"
SCENARIOS = ("cal", "a", "b", "c", "d", "e", "f", "p", "s")  # p: packing (bench.packing), run once
DEFAULT_SCENARIOS = SCENARIOS[:-1]  # (s) only when named: it starts 5 stacks of processes a round
SIZES = {
    "full": dict(cal_seq=2000, cal_flight=10_000, cal_kv=1000, k8s=300, b_unloaded=100, b_burst=2000,
                 a_unloaded=30, a_burst=300, f_ops=100_000, s_unloaded=30, s_burst=1500),
    "quick": dict(cal_seq=500, cal_flight=3000, cal_kv=300, k8s=100, b_unloaded=20, b_burst=500,
                  a_unloaded=10, a_burst=90, f_ops=10_000, s_unloaded=10, s_burst=300),
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="1 round with small sizes (a smoke run)")
    p.add_argument("--rounds", type=int, default=None, help="rounds, each on fresh servers (default 5; quick 1)")
    p.add_argument("--only", default=",".join(DEFAULT_SCENARIOS),
                   help=f"comma-separated subset of {','.join(SCENARIOS)} (default {','.join(DEFAULT_SCENARIOS)}; "
                   "cal is always run when a, b or f is; s, the scaling curve, only when named)")
    p.add_argument("--no-k8s", action="store_true", help="skip the Kubernetes calibration and scenarios (a), (a0)")
    p.add_argument("--log-level", default="info", help="services' log level; logs go to a file (default info)")
    p.add_argument("--pipeline-ops", type=int, help="burst size of (b)")
    p.add_argument("--e2e-ops", type=int, help="burst size of (a) and (a0), in each regime (the over-capacity "
                   "regime's cluster has a third of its GPUs)")
    p.add_argument("--coldstart-ops", type=int, help="pending ops of (f)")
    p.add_argument("--scaling-ops", type=int, help="burst size of each setup of (s)")
    p.add_argument("--workload", type=Path, help="generator config (YAML) for every scenario; default "
                   "bench/workloads/default.yaml for c-f and pipeline.yaml for a, b")
    p.add_argument("--targets", type=Path, help="targets to check (default bench/targets.yaml)")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed or a scenario fails")
    p.add_argument("--out", type=Path, default=RESULTS, help=f"results directory (default {RESULTS})")
    p.add_argument("--keep-tmp", action="store_true", help="keep the temporary directory (logs, stores)")
    args = p.parse_args(argv)
    args.only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = args.only - set(SCENARIOS)
    if unknown:
        p.error(f"unknown scenarios {sorted(unknown)}; choose from {SCENARIOS}")
    if args.only & {"a", "b", "f"}:
        args.only.add("cal")
    args.rounds = args.rounds or (1 if args.quick else 5)
    try:  # a bad config fails now, not after a 20-minute run
        args.spec = report.load_targets(args.targets)
        args.config = load(args.workload or DEFAULT)
        if args.workload is None:
            load(PIPELINE)
    except (GeneratorConfigError, TargetsError) as exc:
        p.error(str(exc))
    return args


def say(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def step(results: dict, name: str, fn, *a, **kw) -> None:
    """Run one scenario; a failure is recorded (and shown) without stopping the run."""
    began = time.perf_counter()
    try:
        results[name] = fn(*a, **kw)
        say(f"  {name}: {time.perf_counter() - began:.1f} s")
    except Exception as exc:  # noqa: BLE001 - report it, keep going
        traceback.print_exc()
        results[name] = {"error": repr(exc)}
        say(f"  {name}: FAILED ({exc!r})")


def start_control_plane(root: Path, notes: list[str]):
    from opsched.localcluster.controlplane import (
        ControlPlane,
        ControlPlaneError,
        ensure_built,
    )

    try:
        ensure_built(build=False)
        cp = ControlPlane(root / "k8s").start()
    except (ControlPlaneError, OSError, RuntimeError, TimeoutError) as exc:
        notes.append(f"Kubernetes calibration and scenario (a) skipped: {exc}")
        return None
    notes.append("The local control plane (etcd, kube-apiserver, kube-scheduler) stays up through "
                 "every round, idle outside the Kubernetes steps.")
    return cp


def run_round(r: int, args, sizes: dict, root: Path, cp, cold: dict) -> dict:  # noqa: C901 - a step per section: flat
    from bench import calibrate, coldstart, decisions, pipeline, scaling

    res: dict = {}
    only = args.only
    if "cal" in only:
        def cal() -> dict:
            with fresh_nats(root, f"nats-cal-{r}") as server:
                out = eventloop.run(calibrate.nats_primitives(server.url, sizes))
            if cp is not None:
                out.update(calibrate.k8s_creates(cp.kubeconfig, f"bench-cal-r{r}", sizes["k8s"]))
            return out
        step(res, "calibration", cal)
    if "b" in only:
        step(res, "b_pipeline", lambda: eventloop.run(pipeline.run_pipeline(
            root, n_unloaded=sizes["b_unloaded"], n_burst=sizes["b_burst"], log_level=args.log_level,
            workload_file=args.workload)))
    if "a" in only and cp is not None:  # (a) and its anchor (a0), the same pods created directly, in two regimes
        step(res, "a_kubernetes", lambda: eventloop.run(pipeline.run_kubernetes(
            root, cp.kubeconfig, r, n_unloaded=sizes["a_unloaded"], n_burst=sizes["a_burst"],
            log_level=args.log_level, workload_file=args.workload, control_plane=cp.pids())))
        if "a0" in res["a_kubernetes"]:
            res["a0_bare"] = res["a_kubernetes"].pop("a0")
    picked = {s for s in "cde" if s in only}
    if picked:
        step(res, "decisions", decisions.run_all, args.quick, picked, args.workload)
    if "f" in only:
        def cold_start() -> dict:
            if "template" not in cold:
                cold["template"], cold["info"] = coldstart.build_template(root, sizes["f_ops"], args.workload)
            return {**coldstart.run_round(root, cold["template"], sizes["f_ops"], r), **cold["info"]}
        step(res, "f_coldstart", cold_start)
    if "s" in only:
        step(res, scaling.SECTION, scaling.run_all, root, r, n_unloaded=sizes["s_unloaded"],
             n_burst=sizes["s_burst"], log_level=args.log_level, workload_file=args.workload, say=say)
    return res


def workload_meta(args) -> dict:
    """What the run's workload was: the config files and the unscaled config's shape."""
    shape = build(args.config).describe()
    return {"file": str(args.workload or DEFAULT), "pipeline file": str(args.workload or PIPELINE),
            "seed": shape["seed"], "queues": shape["queues"], "cohorts": shape["cohorts"],
            "ops": shape["pending"], "classes": shape["classes"], "nodes": shape["nodes"]}


def run_rounds(args, sizes: dict, root: Path, notes: list[str]) -> tuple[list[dict], dict, str | None]:
    """Every round (the control plane up throughout); the rounds, the cold-start info, the apiserver version."""
    cp = start_control_plane(root, notes) if ({"a", "cal"} & args.only and not args.no_k8s) else None
    if args.no_k8s:
        notes.append("Kubernetes calibration and scenario (a) skipped: --no-k8s.")
    rounds: list[dict] = []
    cold: dict[str, Any] = {}
    apiserver: str | None = None
    try:
        if cp is not None:
            apiserver = apiserver_version(cp.kubeconfig)
        for r in range(args.rounds):
            say(f"round {r + 1}/{args.rounds}")
            rounds.append(run_round(r, args, sizes, root, cp, cold))
    except KeyboardInterrupt:
        notes.append(f"Interrupted after {len(rounds)} complete round(s).")
    finally:
        if cp is not None:
            cp.stop()
        if not args.keep_tmp:
            shutil.rmtree(root, ignore_errors=True)
    return rounds, cold.get("info", {}), apiserver


def exit_code(args, rounds: list[dict], written: report.Written) -> int:
    """0, or with --check 1 when a target is missed or a scenario failed in some round."""
    errors = sorted({name for r in rounds for name, v in r.items() if isinstance(v, dict) and "error" in v})
    missed = [v.name for v in written.verdicts if v.status == "fail"]
    if errors:
        print(f"scenarios that failed: {', '.join(errors)}")
    if not args.check:
        return 0
    if missed or errors:
        print(f"--check: {len(missed)} target(s) missed" + (f", {len(errors)} scenario(s) failed" if errors else ""))
        return 1
    print("--check: every measured target met")
    return 0


def packing_table() -> str:
    """(p): binpack vs spread vs today on bench/workloads/packing/mixed.yaml (deterministic: once, not per round)."""
    from bench import packing

    workload = packing.load(packing.WORKLOAD)
    say("(p) packing: binpack, spread and today on the mixed 1/2/4/8-GPU workload")
    return "## Packing (p): binpack vs spread vs today\n\n" + packing.table(packing.compare(workload), workload)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    sizes = dict(SIZES["quick" if args.quick else "full"])
    for key, value in (("b_burst", args.pipeline_ops), ("a_burst", args.e2e_ops), ("f_ops", args.coldstart_ops),
                       ("s_burst", args.scaling_ops)):
        if value:
            sizes[key] = value
    root = Path(tempfile.mkdtemp(prefix="opsched-bench-"))
    configure_logging(root / "services.log", args.log_level)
    started, machine_at_start = datetime.now(timezone.utc), machine()
    notes = [f"Services log at level {args.log_level} as JSON lines to a file (as in production, off the terminal).",
             ("In (a) and (b) everything (services, SDK client, event observer) shares one Python process and "
              "the 2 cores with nats-server; other work on the machine is not controlled.")]
    if "s" in args.only:
        notes.append("(s) runs the services as separate processes (python -m opsched.services.<name>, null dispatcher) "
                     "on an open nats-server (or cluster) on loopback without auth or TLS, a fresh one per setup.")
    say(f"{args.rounds} round(s), scenarios {','.join(s for s in SCENARIOS if s in args.only)}, tmp {root}")
    rounds, cold_info, apiserver = run_rounds(args, sizes, root, notes)
    if cold_info:
        notes.append(f"(f) stream: {sizes['f_ops']:,} ops = {3 * sizes['f_ops']:,} messages, "
                     f"{cold_info['store_mib']:.0f} MiB on disk, mean event {cold_info['mean_event_bytes']:.0f} B.")
    meta = {"started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": ("python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])).strip(),
            "rounds": len(rounds), "quick": args.quick, "sizes": sizes, "versions": versions(apiserver),
            "machine": {**machine_at_start, "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]},
            "workload": workload_meta(args), "targets": str(args.targets or report.tg.DEFAULT),
            "packing": packing_table() if "p" in args.only else ""}
    written = report.write(args.out, meta, rounds, notes, args.spec)
    print(report.tables(written.summary, written.ratios))
    messages = report.messages_text(written.summary, written.verdicts)
    if messages:
        print("\n" + messages)
    if "s" in args.only:
        print("\n" + report.scaling_text(written.summary))
    if meta["packing"]:
        print("\n" + meta["packing"])
    print("\n" + report.check_text(written.verdicts))
    print("\nwritten: " + ", ".join(str(f) for f in written.files)
          + (f"\n{written.png_note}" if written.png_note else ""))
    return exit_code(args, rounds, written)


if __name__ == "__main__":
    sys.exit(main())
