"""python -m analysis.targets [RESULTS ...] [--targets FILE ...] [--device NAME] [--points] [--out DIR] [--check]:
see analysis/targets/__init__.py."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import List, Sequence, Tuple

import pandas as pd

from .. import data
from ..cli import DEFAULT_RESULTS
from . import SHIPPED
from .evaluate import MET, NOT_MET, NOT_MEASURED, STATED, Result, evaluate_all
from .spec import METRICS, TargetsError, TargetsFile, load

PROG = "analysis.targets"
OK, UNMET, BAD_INPUT = 0, 1, 2
MARK = {MET: "**met**", NOT_MET: "**not met**", NOT_MEASURED: "not measured", STATED: "stated"}


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 0.01 else f"{v:.1f}"
    return str(v).replace("|", "/")


def _devices(tf: TargetsFile, results: Sequence[Result]) -> str:
    """Whose rows the file's targets were judged on, and which GPU the bars name."""
    asked = sorted({r.target.device for r in results if r.target.device})
    got = sorted({r.device for r in results if r.device})
    judged = f"judged on the rows of {'; '.join(got)}" if got else "no rows on such a GPU"
    if tf.device and asked and asked != [tf.device]:
        return f"the bars are for the {tf.device}; --device {' / '.join(asked)}: {judged}"
    bars = f"the bars are for the {' / '.join(asked)}" if asked else "the bars name no GPU"
    return f"{bars}, {judged}"


def render(judged: Sequence[Tuple[TargetsFile, List[Result]]], points: bool) -> str:
    """Markdown: per file a table of its targets' verdicts, and with ``points`` every point after it."""
    out = []
    for tf, results in judged:
        out += [f"## {tf.title}", "", f"`{tf.path.name}`: {_devices(tf, results)}", "",
                "| target | what must hold | bar | verdict | measured |", "|---|---|---|---|---|"]
        for r in results:
            t = r.target
            out.append(f"| `{t.id}` | {_cell(t.what)} | {_cell(t.metric)}: {t.bar_text()} | {MARK[r.verdict]} "
                       f"| {_cell(r.summary)} |")
        out.append("")
        if not points:
            continue
        for r in results:
            if r.points.empty:
                continue
            out += [f"### `{r.target.id}`: {METRICS[r.target.metric]}", "",
                    "| point | precision | layout | variant | number | holds | runs (held) | range | rel. error "
                    "| latest run | commit |", "|---|---|---|---|---|---|---|---|---|---|---|"]
            for _, p in r.points.iterrows():
                holds = "" if p["holds"] is None or pd.isna(p["holds"]) else ("yes" if p["holds"] else "no")
                value = p["status"] if r.target.metric == "ok" else _cell(p["value"])
                rng = "" if r.target.metric == "ok" else f"{_cell(p['low'])}-{_cell(p['high'])}"
                out.append(f"| {p['point']} | {p['precision']} | {p['layout']} | {p['variant']} | {value} | {holds} "
                           f"| {p['runs']} ({p['held']}) | {rng} | {_cell(p['rel_error'])} | {p['run_id']} "
                           f"| {_cell(p['git_commit'])[:8]} |")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def frame(judged: Sequence[Tuple[TargetsFile, List[Result]]]) -> pd.DataFrame:
    """Every point of every target, with its file, verdict and bar (targets.csv)."""
    parts = [r.points.assign(file=tf.path.name, device=r.device, verdict=r.verdict, metric=r.target.metric,
                             at_least=r.target.at_least, need=str(r.target.need))
             for tf, results in judged for r in results if not r.points.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__)
    ap.add_argument("results", nargs="*", type=Path,
                    help=f"results.csv files or folders searched for them (default {DEFAULT_RESULTS})")
    ap.add_argument("--targets", nargs="+", type=Path, default=None,
                    help="targets files (default: the project's, analysis/targets/*.yaml)")
    ap.add_argument("--device", default=None, metavar="NAME",
                    help="judge every target on the rows of this GPU (a part of its name: H100) instead of the one "
                         "its file names: how another GPU's run fares against the same bars")
    ap.add_argument("--points", action="store_true", help="print every point of every target too")
    ap.add_argument("--out", type=Path, default=None, help="write targets.md (with every point) and targets.csv here")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every target with a bar is met")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        files = [load(p) for p in (args.targets or SHIPPED)]
        if args.device is not None:
            if not args.device.strip():
                raise TargetsError("--device must be a part of a GPU's name (H100), not empty")
            files = [dataclasses.replace(tf, targets=tuple(dataclasses.replace(t, device=args.device.strip())
                                                           for t in tf.targets)) for tf in files]
    except TargetsError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return BAD_INPUT
    out = None if args.out is None else data.output_folder(PROG, args.results, args.out)
    if args.out is not None and out is None:
        return BAD_INPUT
    ds = data.dataset_from_cli(PROG, args.results or [DEFAULT_RESULTS])
    if ds is None:
        return BAD_INPUT
    judged = [(tf, evaluate_all(ds, tf.targets)) for tf in files]
    print(render(judged, args.points), end="")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "targets.md").write_text(render(judged, True))
        frame(judged).to_csv(out / "targets.csv", index=False)
        print(f"{PROG}: wrote {out / 'targets.md'} and {out / 'targets.csv'}", file=sys.stderr)
    unmet = [r for _, results in judged for r in results if r.verdict in (NOT_MET, NOT_MEASURED)]
    return UNMET if args.check and unmet else OK


if __name__ == "__main__":
    raise SystemExit(main())
