"""python -m analysis.compare A B, or --paired RUN: see analysis/compare/__init__.py."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from .. import data
from . import report, stats
from .core import COMPARED, NOT_EVIDENCE, compare
from .match import Side
from .normalized import compare_normalized
from .paired import compare_paired
from .sweep import compare_jobs, pick, print_picks, print_summary, summary, write_picks
from .sweep import write as write_sweep

PROG = "analysis.compare"
OUT_SUBFOLDER, PAIRED_SUBFOLDER, NORMALIZED_SUBFOLDER = "compare", "compare_paired", "compare_normalized"
OK, REGRESSED, BAD_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints the usage too)
        print(f"{PROG}: {message}", file=sys.stderr)
        raise SystemExit(BAD_INPUT)


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog=f"python -m {PROG}", description=__doc__)
    ap.add_argument("a", type=Path, help="A: the baseline (results.csv, run, sweep or reference folder); "
                                         "with --paired, the one run or sweep")
    ap.add_argument("b", type=Path, nargs="?", help="B: the one asked about (not with --paired; with --normalized "
                                                    "alone, A is a sweep and each job is compared with its first)")
    ap.add_argument("--paired", action="store_true",
                    help="paired (interleaved in one run): each row's variant (B) against the baselines timed "
                         "batch by batch with it in the same run (A; variant=B measure.baseline=[A])")
    ap.add_argument("--normalized", action="store_true",
                    help="two runs, each point's time over the baseline timed interleaved with it in its own run "
                         "(measure.baseline): the clock and power drift between the runs divided out")
    ap.add_argument("--threshold", type=float, default=None,
                    help="fraction, e.g. 0.05 (default: per point, the larger of the measured run-to-run "
                         f"drift {stats.RUN_TO_RUN_DRIFT} and the noisier side's noise; with --paired, of the "
                         f"within-run clock movement {stats.WITHIN_RUN_DRIFT} and the noisier call's noise; with "
                         f"--normalized, the normalized ratio's measured drift {stats.NORMALIZED_DRIFT})")
    ap.add_argument("--match", action="append", default=[], metavar="B_VARIANT=A_VARIANT",
                    help="compare B's variant B_VARIANT with A's A_VARIANT at the same problems (a "
                         "configuration saved under its own name against the default); repeatable")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"output folder (default B/{OUT_SUBFOLDER}; with --paired RUN/{PAIRED_SUBFOLDER}; with "
                         f"--normalized B/{NORMALIZED_SUBFOLDER})")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed (mixed with each point's key)")
    ap.add_argument("--pick", metavar="KEY", default=None,
                    help="with --normalized SWEEP: name each group's fastest job that measured every point ok, and "
                         "the value its command line gave KEY (e.g. variant.decode_wgmma.cuda.defines): OUT/picks.csv, "
                         "OUT/picks.tsv")
    ap.add_argument("--no-figures", action="store_true",
                    help="with --normalized SWEEP: each job's compare.csv and compare.md only, no figure (a sweep "
                         "of many jobs is compared, and picked from, in a fraction of the time)")
    ap.add_argument("--by", metavar="COLS", default="",
                    help="with --pick: the columns that make a group, comma separated (e.g. precision,m); "
                         "default: one group of every point")
    return ap


def _renames(pairs: Sequence[str]) -> dict:
    """``["warp_tiled_s4=warp_tiled"]`` -> ``{"warp_tiled_s4": "warp_tiled"}``; ValueError, with what
    is wrong, on a malformed one."""
    out = {}
    for text in pairs:
        b_name, sep, a_name = text.partition("=")
        if not sep or not b_name.strip() or not a_name.strip():
            raise ValueError(f"--match takes B_VARIANT=A_VARIANT, got {text!r}")
        out[b_name.strip()] = a_name.strip()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.threshold is not None and not 0 < args.threshold < 1:
        print(f"{PROG}: --threshold must lie between 0 and 1, got {args.threshold}", file=sys.stderr)
        return BAD_INPUT
    if args.paired and args.normalized:
        print(f"{PROG}: --normalized compares two runs, --paired the calls of one: give one of them", file=sys.stderr)
        return BAD_INPUT
    if args.normalized and args.b is None:
        return _sweep(args)
    if args.pick or args.by or args.no_figures:
        print(f"{PROG}: --pick, --by and --no-figures are for a define sweep's jobs: give --normalized SWEEP alone",
              file=sys.stderr)
        return BAD_INPUT
    if (args.b is None) != args.paired:
        print(f"{PROG}: " + ("--paired takes one run or sweep (its rows hold both calls), not two" if args.paired
                             else "give A and B, or --paired RUN"), file=sys.stderr)
        return BAD_INPUT
    try:
        renames = _renames(args.match)
    except ValueError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return BAD_INPUT
    if renames and args.paired:
        print(f"{PROG}: --match is for two runs; --paired compares each variant with its own baseline",
              file=sys.stderr)
        return BAD_INPUT
    for p in (args.a, args.b):
        if p is not None and not p.exists():
            print(f"{PROG}: no results file or folder at {p}", file=sys.stderr)
            return BAD_INPUT
    given = args.a if args.paired else args.b
    sub = PAIRED_SUBFOLDER if args.paired else NORMALIZED_SUBFOLDER if args.normalized else OUT_SUBFOLDER
    out = data.output_folder(PROG, [given], args.out, subfolder=sub)
    if out is None:
        return BAD_INPUT
    try:
        a = Side.load("A", args.a)
        if args.paired:
            comp = compare_paired(a, args.threshold, args.seed)
        else:
            b = Side.load("B", args.b)
            unknown = sorted(set(renames) - set(b.rows["variant"].astype(str)))
            if unknown:
                print(f"{PROG}: --match names {', '.join(unknown)}, which B has no rows of", file=sys.stderr)
                return BAD_INPUT
            how = compare_normalized if args.normalized else compare
            comp = how(a, b.renamed(renames), args.threshold, args.seed)
            comp.notes[:0] = [f"B's {old} compared as A's {new} (--match)" for old, new in renames.items()]
    except FileNotFoundError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return BAD_INPUT
    if not (comp.table["status"].isin([COMPARED, NOT_EVIDENCE])).any():
        print(f"{PROG}: " + (f"no row of {args.a} has a baseline timed with it (GPU points of non-library "
                             f"variants, measure.baseline)" if args.paired else
                             f"{args.a} and {args.b} share no point (key: {', '.join(comp.key)})"), file=sys.stderr)
        return BAD_INPUT
    report.print_table(comp)
    for f in report.write(comp, out):
        print(f"  {f}")
    return REGRESSED if comp.regressed else OK


def _sweep(args) -> int:
    """--normalized SWEEP: each job against the sweep's first (analysis/compare/sweep.py)."""
    if renames_given := args.match:
        print(f"{PROG}: --match is for two runs, not a sweep's jobs ({' '.join(renames_given)})", file=sys.stderr)
        return BAD_INPUT
    if not args.a.is_dir():
        print(f"{PROG}: --normalized with one folder compares a sweep's jobs: {args.a} is no folder", file=sys.stderr)
        return BAD_INPUT
    out = data.output_folder(PROG, [args.a], args.out, subfolder=NORMALIZED_SUBFOLDER)
    if out is None:
        return BAD_INPUT
    by = [c.strip() for c in args.by.split(",") if c.strip()]
    if by and not args.pick:
        print(f"{PROG}: --by groups the points of --pick: give --pick KEY too", file=sys.stderr)
        return BAD_INPUT
    try:
        sc = compare_jobs(args.a, out, args.threshold, args.seed, key=args.pick, figures=not args.no_figures)
        lines = summary(sc, out)
        picks = pick(sc, args.pick, by, args.threshold) if args.pick else None
    except (ValueError, FileNotFoundError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return BAD_INPUT
    print_summary(args.a, lines)
    written = write_sweep(args.a, lines, out)
    if picks is not None:
        print_picks(picks, args.pick)
        written += write_picks(picks, out)
    for f in written:
        print(f"  {f}")
    return OK  # a sweep's slower entries are its answer, not a regression


if __name__ == "__main__":
    sys.exit(main())
