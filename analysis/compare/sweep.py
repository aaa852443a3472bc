"""A define sweep's jobs, each against its first, normalized: ``python -m analysis.compare --normalized SWEEP``.

A tuning sweep (``python run.py -m variant.X.cuda.defines={...},{...} measure.baseline=[cublaslt]``) writes a
job folder per entry, ``SWEEP/0`` for the first: put the defaults first. Each later job is compared with job
0 by :func:`.normalized.compare_normalized` (each point over the baseline timed in its own job, so the
clock's drift between the jobs falls out) and written to ``OUT/job<N>/`` as any comparison is;
``OUT/summary.md`` and ``summary.csv`` give a line per job: the overrides it has and job 0 has not (its
``.hydra/overrides.yaml``), its verdicts, and the geomean and range of its time ratios over the compared
points (below 1: faster than job 0). A sweep's slower entries are its answer, not a regression: the
command exits 0, and 2 on bad input.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import List

import numpy as np
import pandas as pd

from .. import style
from . import report, stats
from .core import Comparison
from .match import Side
from .normalized import compare_normalized

SUMMARY_COLUMNS = ["job", "overrides", "compared", *stats.VERDICTS, "geomean_ratio", "min_ratio", "max_ratio",
                   "folder"]


def job_folders(sweep: Path) -> List[Path]:
    """The sweep's job folders (numbered, with rows), in job order."""
    jobs = [p for p in Path(sweep).iterdir() if p.is_dir() and p.name.isdigit()
            and any((p / f).exists() for f in ("results.csv", "results.parquet"))]
    return sorted(jobs, key=lambda p: int(p.name))


def overrides(job: Path) -> List[str]:
    """The job's command-line overrides, as Hydra saved them ([] where it did not)."""
    path = job / ".hydra" / "overrides.yaml"
    if not path.exists():
        return []
    from omegaconf import OmegaConf

    return [str(x) for x in OmegaConf.load(path)]


def differs(first: Path, job: Path) -> str:
    """The overrides ``job`` has and ``first`` has not: what the sweep changed for it."""
    mine = set(overrides(first))
    return " ".join(o for o in overrides(job) if o not in mine)


def summary_line(job: Path, first: Path, comp: Comparison, folder: Path) -> dict:
    done = comp.compared
    ratios = pd.to_numeric(done["time_ratio"], errors="coerce").dropna().to_numpy(float)
    counts = comp.counts()
    return {"job": int(job.name), "overrides": differs(first, job), "compared": len(done), **counts,
            "geomean_ratio": float(np.exp(np.log(ratios).mean())) if len(ratios) else math.nan,
            "min_ratio": float(ratios.min()) if len(ratios) else math.nan,
            "max_ratio": float(ratios.max()) if len(ratios) else math.nan, "folder": str(folder)}


def compare_sweep(sweep: Path, out: Path, threshold=None, seed: int = 0) -> pd.DataFrame:
    """Every job after the first against it, each written under ``out/job<N>/``; the summary, a line a job.
    ValueError where the sweep has fewer than two jobs."""
    jobs = job_folders(sweep)
    if len(jobs) < 2:
        raise ValueError(f"{sweep} holds {len(jobs)} job folder(s) with rows: a sweep to compare needs two or more "
                         f"(SWEEP/0, SWEEP/1, ...)")
    first = Side.load("A", jobs[0])
    lines = []
    for job in jobs[1:]:
        comp = compare_normalized(first, Side.load("B", job), threshold, seed)
        folder = Path(out) / f"job{job.name}"
        report.write(comp, folder)
        lines.append(summary_line(job, jobs[0], comp, folder))
    return pd.DataFrame(lines, columns=SUMMARY_COLUMNS)


def _ratio(x: float) -> str:
    return "" if not math.isfinite(x) else style.format_sig(x, 4)


def first_settings(sweep: Path) -> str:
    """Job 0's overrides of the keys the other jobs change (what they are compared with)."""
    jobs = job_folders(sweep)
    changed = {o.split("=", 1)[0] for job in jobs[1:] for o in differs(jobs[0], job).split()}
    return " ".join(o for o in overrides(jobs[0]) if o.split("=", 1)[0] in changed)


def render_markdown(sweep: Path, summary: pd.DataFrame) -> str:
    lines = [f"# {sweep}: each job against job 0 (`{first_settings(sweep) or 'no overrides saved'}`), each point "
             "over the baseline timed in its own job", "",
             f"- {report.NORMALIZED_DIRECTION}; per job: the geomean and range of time_ratio over its compared points",
             f"- threshold: ±{100 * stats.NORMALIZED_DRIFT:.1f}% by default ({stats.NORMALIZED_SOURCE})", "",
             "| job | overrides | compared | SLOWER | UNSURE | FASTER | SAME | geomean | min | max |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in summary.iterrows():
        lines.append(f"| [{r['job']}](job{r['job']}/compare.md) | `{r['overrides']}` | {r['compared']} | "
                     f"{r['SLOWER']} | {r['UNSURE']} | {r['FASTER']} | {r['SAME']} | {_ratio(r['geomean_ratio'])} | "
                     f"{_ratio(r['min_ratio'])} | {_ratio(r['max_ratio'])} |")
    return "\n".join(lines) + "\n"


def write(sweep: Path, summary: pd.DataFrame, out: Path) -> List[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    style.write_if_changed(out / "summary.csv", summary.to_csv(index=False, lineterminator="\n").encode())
    style.write_if_changed(out / "summary.md", render_markdown(sweep, summary).encode())
    return [out / "summary.csv", out / "summary.md"]


def print_summary(sweep: Path, summary: pd.DataFrame, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    if not console.is_terminal:
        console.width = max(console.width, 150)
    table = Table(title=f"{sweep}: each job against job 0 ({first_settings(sweep) or 'no overrides saved'}), "
                        f"each point over its baseline",
                  caption=f"geomean of time_ratio over the compared points: below 1 the job is faster; "
                          f"±{100 * stats.NORMALIZED_DRIFT:.1f}% threshold")
    for col, just in (("job", "right"), ("overrides", "left"), ("compared", "right"), ("SLOWER", "right"),
                      ("UNSURE", "right"), ("FASTER", "right"), ("SAME", "right"), ("geomean", "right"),
                      ("min", "right"), ("max", "right")):
        table.add_column(col, justify=just, no_wrap=col != "overrides")
    for _, r in summary.iterrows():
        table.add_row(str(r["job"]), escape(r["overrides"]), str(r["compared"]), str(r["SLOWER"]), str(r["UNSURE"]),
                      str(r["FASTER"]), str(r["SAME"]), _ratio(r["geomean_ratio"]), _ratio(r["min_ratio"]),
                      _ratio(r["max_ratio"]))
    console.print(table)
