"""The command line of the commands that write the paper's files (``analysis.paper``,
``analysis.claims``): ``python -m MODULE [RESULTS ...] [--out DIR]``."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from gemmlab.paths import ROOT

from . import data

DEFAULT_RESULTS = ROOT / "outputs" / "reference"
COMMITTED_OUT = ROOT / "outputs" / "paper"  # written only when --out names it


def parser(module: str, description: str, writes: str) -> argparse.ArgumentParser:
    """RESULTS and --out; ``writes`` names what ``--out outputs/paper`` rewrites."""
    ap = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    ap.add_argument("results", nargs="*", type=Path,
                    help=f"results.csv files or folders searched for them (default {DEFAULT_RESULTS})")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"output folder (default RESULTS/paper; required without RESULTS: --out outputs/paper "
                         f"rewrites the committed {writes})")
    return ap


def read(module: str, description: str, writes: str,
         argv: Sequence[str] | None) -> Optional[Tuple[Path, List[Path], data.Dataset]]:
    """The output folder, the results given (the reference data when none) and their rows; None,
    after saying why on stderr, where the command must exit with 2."""
    args = parser(module, description, writes).parse_args(argv)
    out = data.output_folder(module, args.results, args.out)
    if out is None:
        return None
    results = args.results or [DEFAULT_RESULTS]
    ds = data.dataset_from_cli(module, results)
    if ds is None:
        return None
    return out, results, ds
