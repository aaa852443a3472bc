"""python -m analysis.compare A B: see analysis/compare/__init__.py."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from .. import data
from . import report, stats
from .core import compare
from .match import Side

PROG = "analysis.compare"
OUT_SUBFOLDER = "compare"
OK, REGRESSED, BAD_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints the usage too)
        print(f"{PROG}: {message}", file=sys.stderr)
        raise SystemExit(BAD_INPUT)


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog=f"python -m {PROG}", description=__doc__)
    ap.add_argument("a", type=Path, help="A: the baseline (results.csv, run, sweep or reference folder)")
    ap.add_argument("b", type=Path, help="B: the one asked about")
    ap.add_argument("--threshold", type=float, default=None,
                    help="fraction, e.g. 0.05 (default: per point, the larger of the measured run-to-run "
                         f"drift {stats.RUN_TO_RUN_DRIFT} and the noisier side's noise)")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default B/compare)")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed (mixed with each point's key)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.threshold is not None and not 0 < args.threshold < 1:
        print(f"{PROG}: --threshold must lie between 0 and 1, got {args.threshold}", file=sys.stderr)
        return BAD_INPUT
    for p in (args.a, args.b):
        if not p.exists():
            print(f"{PROG}: no results file or folder at {p}", file=sys.stderr)
            return BAD_INPUT
    out = data.output_folder(PROG, [args.b], args.out, subfolder=OUT_SUBFOLDER)
    if out is None:
        return BAD_INPUT
    try:
        a, b = Side.load("A", args.a), Side.load("B", args.b)
    except FileNotFoundError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return BAD_INPUT
    comp = compare(a, b, args.threshold, args.seed)
    if not (comp.table["status"].isin(["compared", "not evidence"])).any():
        print(f"{PROG}: {args.a} and {args.b} share no point (key: {', '.join(comp.key)})", file=sys.stderr)
        return BAD_INPUT
    report.print_table(comp)
    for f in report.write(comp, out):
        print(f"  {f}")
    return REGRESSED if comp.regressed else OK


if __name__ == "__main__":
    sys.exit(main())
