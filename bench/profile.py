"""``python -m bench.profile [SETUP] [--quick] [--top N] [--sort tottime|cumulative] [--workload FILE]``: cProfile of
the timed admission cycles of one decision setup (default ``c_100k``; names in ``bench.decisions``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.decisions import profile, setups


def main(argv: list[str] | None = None) -> int:
    names = [s.name for s in setups(False)]
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    p.add_argument("setup", nargs="?", default="c_100k", choices=names)
    p.add_argument("--quick", action="store_true", help="fewer cycles")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--sort", default="tottime", choices=["tottime", "cumulative", "ncalls"])
    p.add_argument("--workload", type=Path, help="generator config (default bench/workloads/default.yaml)")
    args = p.parse_args(argv)
    print(profile(args.setup, quick=args.quick, top=args.top, sort=args.sort, workload_file=args.workload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
