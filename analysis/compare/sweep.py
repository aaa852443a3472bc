"""A define sweep's jobs, each against its first, normalized: ``python -m analysis.compare --normalized SWEEP``.

A tuning sweep (``python run.py -m variant.X.cuda.defines={...},{...} measure.baseline=[cublaslt]``) writes a
job folder per entry, ``SWEEP/0`` for the first: put the defaults first. Each later job is compared with job
0 by :func:`.normalized.compare_normalized` (each point over the baseline timed in its own job, so the
clock's drift between the jobs falls out) and written to ``OUT/job<N>/`` as any comparison is;
``OUT/summary.md`` and ``summary.csv`` give a line per job: the overrides it has and job 0 has not (its
``.hydra/overrides.yaml``), its verdicts, and the geomean and range of its time ratios over the compared
points (below 1: faster than job 0). Where the sweep varies one define override and other keys too (or with
``--pick KEY``, below: KEY), a job is compared with the first job whose other overrides are its own instead
(``against``): a sweep over ``precision=bf16,fp8`` and the defines compares each precision's define sets with
that precision's first. A sweep's slower entries are its answer, not a regression: the
command exits 0, and 2 on bad input.

``--pick KEY [--by COLS]`` also names the winner of each group of points (``--by precision,m``: one per
precision and token count; no ``--by``: one for the whole sweep): the job with the lowest geomean of its time
ratios over the group's compared points, among the jobs whose rows in the group are all ok or skipped and that
measured as many of the group's points as any job did (a define set that fails the check, or skips a point the
others run, is never picked; give ``--by`` every key the sweep varies besides KEY, such as precision). The
group's first job (the defaults) stays the pick unless that geomean is below 1 by more than the threshold
(``--threshold``, else the normalized drift, 1.0%): a difference inside the drift is no reason to leave the
defaults. A group where no baseline was timed beside any point (cuBLASLt's FP8 refuses M = 1, and cuBLAS has
no FP8) is judged on the jobs' raw median times instead, against the two-run threshold (3.2%). Ties go to the
lower job. ``OUT/picks.csv`` and ``OUT/picks.tsv`` (tab separated, a header line, for a
shell to read: the group's values, the job, the winner's ``KEY`` override value, ``-`` where the job has none,
the geomean, the points) hold a line a group, so that one GPU call can sweep, pick and measure at the pick
(``decode_wgmma_auto`` in .ci/h200-session.sh).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .. import data, style
from . import report, stats
from .core import COMPARED, NO_BASELINE, Comparison
from .match import Side, _keyed, key_columns
from .normalized import compare_normalized

SUMMARY_COLUMNS = ["job", "against", "overrides", "compared", *stats.VERDICTS, "geomean_ratio", "min_ratio",
                   "max_ratio", "folder"]


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
    return {"job": int(job.name), "against": int(first.name), "overrides": differs(first, job), "compared": len(done),
            **counts, "geomean_ratio": float(np.exp(np.log(ratios).mean())) if len(ratios) else math.nan,
            "min_ratio": float(ratios.min()) if len(ratios) else math.nan,
            "max_ratio": float(ratios.max()) if len(ratios) else math.nan, "folder": str(folder)}


def _override_key(o: str) -> str:
    return o.lstrip("+~").partition("=")[0]


def tuned_key(jobs: List[Path]) -> Optional[str]:
    """The one define override (``variant.X.cuda.defines``, or one define under it) that varies across the jobs
    when other keys vary too (``precision=bf16,fp8``); else None."""
    values: Dict[str, set] = {}
    for j in jobs:
        for o in overrides(j):
            values.setdefault(_override_key(o), set()).add(o)
    varying = [k for k, v in values.items() if len(v) > 1]
    defines = [k for k in varying if k.endswith(".cuda.defines") or ".cuda.defines." in k]
    return defines[0] if len(varying) > 1 and len(defines) == 1 else None


def references(jobs: List[Path], key: Optional[str] = None) -> Dict[int, int]:
    """Each job's reference, by job number: the first job whose overrides other than ``key`` (the setting being
    tuned; default: :func:`tuned_key`) are the job's own, so that a sweep over ``precision=bf16,fp8`` and defines
    compares each precision's define sets with that precision's first (job 0 holds one precision only); job 0
    where there is no such key."""
    key = key or tuned_key(jobs)
    if key is None:
        return {int(j.name): int(jobs[0].name) for j in jobs}
    first: Dict[tuple, int] = {}
    refs = {}
    for j in jobs:
        context = tuple(sorted(o for o in overrides(j) if _override_key(o) != key))
        refs[int(j.name)] = first.setdefault(context, int(j.name))
    return refs


class SweepComparison(NamedTuple):
    jobs: List[Path]
    refs: Dict[int, int]  # job number -> the job it is compared with (itself: a reference, not compared)
    comps: Dict[int, Comparison]  # the compared jobs' comparisons, by job number

    def folder(self, n: int) -> Path:
        return self.jobs[[int(j.name) for j in self.jobs].index(n)]


def compare_jobs(sweep: Path, out: Path, threshold=None, seed: int = 0, key: Optional[str] = None,
                 figures: bool = True) -> SweepComparison:
    """Every job against its reference (:func:`references`; job 0 unless ``key``), each written under
    ``out/job<N>/`` (its figure too unless ``figures`` is false). ValueError where the sweep has fewer
    than two jobs."""
    jobs = job_folders(sweep)
    if len(jobs) < 2:
        raise ValueError(f"{sweep} holds {len(jobs)} job folder(s) with rows: a sweep to compare needs two or more "
                         f"(SWEEP/0, SWEEP/1, ...)")
    if key:  # a misspelt key would make every job its own reference: nothing compared, nothing picked
        lacking = [j.name for j in jobs if not any(_override_key(o) == key for o in overrides(j))]
        if len(lacking) == len(jobs):
            known = sorted({_override_key(o) for j in jobs for o in overrides(j)})
            raise ValueError(f"--pick {key}: no job's .hydra/overrides.yaml sets it (the sweep's keys: "
                             f"{', '.join(known) or 'none saved'})")
        if lacking:
            raise ValueError(f"--pick {key}: jobs {', '.join(lacking)} do not set it (or saved no overrides): their "
                             f"configuration cannot be named")
    refs = references(jobs, key)
    by_number = {int(j.name): j for j in jobs}
    sides: Dict[int, Side] = {}
    comps = {}
    for n, ref in refs.items():
        if n == ref:
            continue
        if ref not in sides:
            sides[ref] = Side.load("A", by_number[ref])
        comps[n] = comp = compare_normalized(sides[ref], Side.load("B", by_number[n]), threshold, seed)
        report.write(comp, Path(out) / f"job{n}", figures)
    return SweepComparison(jobs, refs, comps)


def summary(sc: SweepComparison, out: Path) -> pd.DataFrame:
    """A line a compared job (:func:`summary_line`), against its reference."""
    return pd.DataFrame([summary_line(sc.folder(n), sc.folder(sc.refs[n]), comp, Path(out) / f"job{n}")
                         for n, comp in sc.comps.items()], columns=SUMMARY_COLUMNS)


OK_OR_SKIPPED = ("ok", "skipped")


def override_value(job: Path, key: str) -> str:
    """The value the job's command line gave ``key`` (``-``: none)."""
    for o in overrides(job):
        name, sep, value = o.lstrip("+~").partition("=")
        if sep and name == key:
            return value
    return "-"


def _group_label(by: Sequence[str], values: tuple) -> str:
    return ", ".join(f"{c}={v}" for c, v in zip(by, values)) or "all points"


class _InGroup(NamedTuple):
    geomean: float  # of the job's time ratios to its reference over the group's compared lines (a reference: 1)
    lines: int  # compared lines (point x baseline)
    clean: bool  # every row of the group ok or skipped
    points: frozenset  # the points it measured ok (their keys)


def pick(sc: SweepComparison, key: str, by: Sequence[str] = (), threshold=None) -> pd.DataFrame:
    """The winner of each group of points (the module's docstring): a line a group, its ``by`` values, then
    ``job``, ``value`` (the job's ``key`` override), ``geomean_ratio``, ``points`` (the group's compared lines;
    for a reference job the most any job compared), ``candidates`` and ``why``; job -1 where no job measured every
    point of the group ok. ValueError where a ``by`` column is not in the rows and the comparisons, or a group holds
    jobs of several references (``by`` lacks a key the sweep varies besides ``key``)."""
    by = list(by)
    margin = float(threshold) if threshold is not None else stats.NORMALIZED_DRIFT
    raw_margin = float(threshold) if threshold is not None else stats.RUN_TO_RUN_DRIFT
    comps, refs = sc.comps, sc.refs
    reference = set(refs.values())
    variants = sorted({str(v) for c in comps.values() for v in c.table["variant"]})
    rows_of = {}
    for job in sc.jobs:
        r = data.load(job)
        rows_of[int(job.name)] = r[r["variant"].astype(str).isin(variants)]
    for where, frames in (("rows", rows_of.values()), ("comparison", [c.table for c in comps.values()])):
        for f in frames:
            missing = [c for c in by if c not in f.columns]
            if missing:
                raise ValueError(f"--by {','.join(missing)}: not a column of every job's {where} (group by columns "
                                 f"both have, such as precision, m, n, k, layout, shape_name)")

    def groups_of(frame: pd.DataFrame) -> Dict[tuple, pd.DataFrame]:
        if not by:
            return {(): frame}
        return {k if isinstance(k, tuple) else (k,): g for k, g in _keyed(frame, by).groupby(by, sort=False)}

    per_group: Dict[tuple, Dict[int, _InGroup]] = {}
    ok_rows: Dict[tuple, Dict[int, pd.DataFrame]] = {}  # for the groups no baseline was timed in (below)
    no_baseline: Dict[tuple, bool] = {}
    for n, rows in rows_of.items():
        keys = key_columns(rows, rows)
        mine = groups_of(comps[n].table) if n in comps else {}
        for g, part in groups_of(rows).items():
            status = part["status"].astype(str)
            lines = mine[g] if g in mine else None
            done = lines[lines["status"] == COMPARED] if lines is not None else None
            ratios = pd.to_numeric(done["time_ratio"], errors="coerce").dropna().to_numpy(float) \
                if done is not None else np.array([], float)
            if lines is not None and (lines["status"] == NO_BASELINE).any():
                no_baseline[g] = True
            gm = float(np.exp(np.log(ratios).mean())) if len(ratios) else (1.0 if n in reference else math.nan)
            ok = part[status == "ok"]
            points = frozenset(map(tuple, _keyed(ok, keys)[keys].itertuples(index=False, name=None)))
            per_group.setdefault(g, {})[n] = _InGroup(gm, len(ratios), bool(status.isin(OK_OR_SKIPPED).all()), points)
            ok_rows.setdefault(g, {})[n] = ok
    out = []
    for g in sorted(per_group, key=lambda t: tuple((0, float(x)) if str(x).isdigit() else (1, str(x)) for x in t)):
        where, in_g = _group_label(by, g), per_group[g]
        if len({refs[n] for n in in_g}) > 1:
            firsts = ", ".join(map(str, sorted({refs[n] for n in in_g})))
            raise ValueError(f"{where}: holds jobs compared with different first jobs ({firsts}): add the keys the "
                             f"sweep varies besides {key} (such as precision) to --by")
        raw = not any(v.lines for v in in_g.values()) and no_baseline.get(g, False)
        if raw:  # no baseline timed beside any point of the group (cuBLASLt's FP8 refuses M = 1): the raw medians
            for n in set(in_g) - reference:
                gm, count = _raw(ok_rows[g][n], ok_rows[g].get(refs[n], ok_rows[g][n].iloc[0:0]))
                in_g[n] = in_g[n]._replace(geomean=gm, lines=count)
        group_margin = raw_margin if raw else margin
        every = frozenset().union(*(v.points for v in in_g.values()))
        lines_most = max(v.lines for v in in_g.values())
        cands = {n: v for n, v in in_g.items() if v.clean and v.points == every and math.isfinite(v.geomean)
                 and (n in reference or v.lines == lines_most)}
        reasons: Dict[str, List[int]] = {}
        for n in sorted(set(in_g) - set(cands)):
            v = in_g[n]
            why = ("a row not ok" if not v.clean else "a point not measured that another job measured"
                   if v.points != every else "no point compared (no baseline timed beside it on both sides)"
                   if not v.lines else "fewer points compared")
            reasons.setdefault(why, []).append(n)
        why_ruled = "".join(f"; ruled out, {why}: jobs {', '.join(map(str, ns))}" for why, ns in reasons.items())
        if not cands:
            out.append({**dict(zip(by, g)), "job": -1, "value": "-", "geomean_ratio": math.nan, "points": 0,
                        "candidates": 0, "why": f"{where}: no job measured every point ok{why_ruled}"})
            continue
        best = fastest = min(cands, key=lambda n: (cands[n].geomean, n))
        ref = refs[fastest]
        kept = ""
        if ref in cands and cands[fastest].geomean > 1 - group_margin:
            best = ref
            if fastest != best:
                kept = (f" (the fastest, job {fastest} at {cands[fastest].geomean:.4f}, within the "
                        f"{100 * group_margin:.1f}% threshold: the defaults stay)")
        elif ref not in cands:
            kept = f" (the defaults, job {ref}, ruled out: the fastest of the rest, whatever its ratio)"
        v = cands[best]
        count = lines_most if best in reference else v.lines
        how = (f"{count} points' raw median times (no baseline timed beside them; the two-run threshold, "
               f"{100 * group_margin:.1f}%)" if raw else f"{count} compared lines")
        out.append({**dict(zip(by, g)), "job": best, "value": override_value(sc.folder(best), key),
                    "geomean_ratio": v.geomean, "points": count, "candidates": len(cands),
                    "why": f"{where}: job {best} of {len(cands)} candidates, geomean {v.geomean:.4f} over {how}"
                           f"{kept}{why_ruled}"})
    return pd.DataFrame(out, columns=[*by, "job", "value", "geomean_ratio", "points", "candidates", "why"])


def _raw(mine: pd.DataFrame, ref: pd.DataFrame) -> Tuple[float, int]:
    """The geomean of a job's median times over its reference's at the points both measured ok (each point's
    median over its rows, where a job holds several), and how many."""
    if mine.empty or ref.empty:
        return math.nan, 0
    cols = key_columns(mine, ref)
    per_point = [(_keyed(f, cols).assign(t=pd.to_numeric(f["time_median_s"], errors="coerce"))
                  .groupby(cols, dropna=False)["t"].median()) for f in (mine, ref)]
    ratios = (per_point[0] / per_point[1]).dropna().to_numpy(float)
    ratios = ratios[ratios > 0]
    return (float(np.exp(np.log(ratios).mean())), len(ratios)) if len(ratios) else (math.nan, 0)


def write_picks(picks: pd.DataFrame, out: Path) -> List[Path]:
    """``picks.csv`` (every column) and ``picks.tsv`` (the group's values, job, value, geomean, points; a header)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cols = [c for c in picks.columns if c not in ("candidates", "why")]
    style.write_if_changed(out / "picks.csv", picks.to_csv(index=False, lineterminator="\n").encode())
    style.write_if_changed(out / "picks.tsv", picks[cols].to_csv(index=False, sep="\t", lineterminator="\n",
                                                                  quoting=csv.QUOTE_NONE, escapechar="\\").encode())
    return [out / "picks.csv", out / "picks.tsv"]


def _ratio(x: float) -> str:
    return "" if not math.isfinite(x) else style.format_sig(x, 4)


def first_settings(sweep: Path) -> str:
    """Job 0's overrides of the keys the other jobs change (what they are compared with)."""
    jobs = job_folders(sweep)
    changed = {o.split("=", 1)[0] for job in jobs[1:] for o in differs(jobs[0], job).split()}
    return " ".join(o for o in overrides(jobs[0]) if o.split("=", 1)[0] in changed)


def _against(sweep: Path, summary: pd.DataFrame, quote: str) -> str:
    """What the jobs are compared with, for a title."""
    if summary.empty or (summary["against"] == 0).all():
        return f"each job against job 0 ({quote}{first_settings(sweep) or 'no overrides saved'}{quote})"
    return "each job against the first job with its other overrides (against)"


def render_markdown(sweep: Path, summary: pd.DataFrame) -> str:
    lines = [f"# {sweep}: {_against(sweep, summary, '`')}, each point over the baseline timed in its own job", "",
             f"- {report.NORMALIZED_DIRECTION}; per job: the geomean and range of time_ratio over its compared points",
             f"- threshold: ±{100 * stats.NORMALIZED_DRIFT:.1f}% by default ({stats.NORMALIZED_SOURCE})", "",
             "| job | against | overrides | compared | SLOWER | UNSURE | FASTER | SAME | geomean | min | max |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in summary.iterrows():
        lines.append(f"| [{r['job']}](job{r['job']}/compare.md) | {r['against']} | `{r['overrides']}` | "
                     f"{r['compared']} | "
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
    table = Table(title=f"{sweep}: {_against(sweep, summary, '')}, each point over its baseline",
                  caption=f"geomean of time_ratio over the compared points: below 1 the job is faster; "
                          f"±{100 * stats.NORMALIZED_DRIFT:.1f}% threshold")
    for col, just in (("job", "right"), ("against", "right"), ("overrides", "left"), ("compared", "right"),
                      ("SLOWER", "right"), ("UNSURE", "right"), ("FASTER", "right"), ("SAME", "right"),
                      ("geomean", "right"), ("min", "right"), ("max", "right")):
        table.add_column(col, justify=just, no_wrap=col != "overrides")
    for _, r in summary.iterrows():
        table.add_row(str(r["job"]), str(r["against"]), escape(r["overrides"]), str(r["compared"]), str(r["SLOWER"]),
                      str(r["UNSURE"]), str(r["FASTER"]), str(r["SAME"]), _ratio(r["geomean_ratio"]),
                      _ratio(r["min_ratio"]), _ratio(r["max_ratio"]))
    console.print(table)


def print_picks(picks: pd.DataFrame, key: str, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    if not console.is_terminal:
        console.width = max(console.width, 150)
    groups = [c for c in picks.columns if c not in ("job", "value", "geomean_ratio", "points", "candidates", "why")]
    table = Table(title=f"the pick of each group ({', '.join(groups) or 'all points'}): {key}",
                  caption="the lowest geomean time ratio against the group's first job, among the jobs that measured "
                          "every point of the group ok; the first unless beaten by more than the threshold")
    for col in [*groups, "job", "value", "geomean", "points", "candidates"]:
        table.add_column(col, justify="left" if col == "value" else "right", no_wrap=col != "value")
    for _, r in picks.iterrows():
        table.add_row(*[str(r[c]) for c in groups], str(r["job"]), escape(str(r["value"])),
                      _ratio(r["geomean_ratio"]), str(r["points"]), str(r["candidates"]))
    console.print(table)
