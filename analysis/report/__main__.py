"""python -m analysis.report RUN [RUN_B] [--out FILE]: see analysis/report/__init__.py."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from . import REPORT_FILE, __doc__ as DOC, write

PROG = "analysis.report"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m {PROG}", description=DOC.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(DOC.splitlines()[2:]))
    ap.add_argument("run", type=Path, help="a run or sweep folder, a folder of runs, or a results.csv")
    ap.add_argument("run_b", type=Path, nargs="?", help="a second one: compared against RUN (B against A)")
    ap.add_argument("--out", type=Path, default=None, help=f"the page's path (default RUN/{REPORT_FILE})")
    args = ap.parse_args(argv)
    for p in (args.run, args.run_b):
        if p is not None and not p.exists():
            print(f"{PROG}: no results file or folder at {p}", file=sys.stderr)
            return 2
    try:
        path = write(args.run, args.run_b, args.out)
    except (ValueError, FileNotFoundError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
