"""What a decode kernel costs per launch and per byte: ``time = t0 + bytes / bw`` fitted over one
run's decode points of one variant, precision and token count (least squares on the median times).

Why: a decode GEMM streams its weights once, so its time is a fixed cost (the launch, the first
loads' latency, the tail and the split tiles' sums) plus its bytes at a streaming rate. The two
numbers say where a bar on "% of the copy probe" can be met at all: with a roof R (the run's copy
probe), the fitted time reaches ``pct`` % of R from ``t0 / (1 / (pct/100 R) - 1 / bw)`` bytes on,
and never where ``bw`` itself is under pct % of R. On the H200's session34c decode experiment
(fp8, 1 token) stage 17 fits t0 8.3 us and bw 4413 GB/s against the libraries' ~6.4-6.9 us and
4080-4210 GB/s: it streams faster but pays more a launch, which puts 90% of the copy probe (4281
GB/s) past ~250 MB, just above Llama-3 70B's mlp_down (235 MB, 89.7%).

A bare copy follows no such line at the sizes of a decode GEMM (the copy probe ramps from 8 MB to ~70 MB), so
:func:`bar_room` reads it measured, not fitted: for each decode point timed against a library, the time a bar of
``factor`` x that library asks (its interleaved time / factor) beside what the copy probe takes to move the
point's bytes on the same device (``copy_sizes`` in .ci/h200-session.sh measures it at 8 MB-1 GiB). A ratio
``needed / copy`` near or under 1 leaves the GEMM no more time than a bare copy of its bytes. Where the run
fits lines (:func:`launch_costs`), it also gives the fixed cost the bar leaves at the point's own fitted streaming
rate (``t0_room``: the time asked less the bytes at the variant's bw) beside the lowest t0 any variant of that run,
precision and token count fits: a room under every fitted t0 asks for a launch no kernel measured has paid.

A group is fitted over its points of at least MIN_BYTES (past the L2 of an H100 or H200 and enough
tiles for every SM: smaller matrices leave SMs idle and follow no line) where it has at least
MIN_POINTS of them spanning MIN_SPAN times in bytes; its ``worst_residual_pct`` says how far the
line misses its worst point (the fit is a model, not a measurement).
``python -m analysis.decode_cost [RESULTS ...] [--pct 90]`` prints the table; ``--room FACTOR [--shapes REGEX]``
prints :func:`bar_room`'s instead.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from . import data
from .cli import DEFAULT_RESULTS
from .decode import POINT_BY, copy_roofs, copy_rows, decode_mask, tokens_of

MIN_BYTES = 64 * 2**20  # the points a fit reads: at least this many bytes moved
MIN_POINTS = 4  # points a fit needs
MIN_SPAN = 3.0  # largest over smallest bytes among them
COLUMNS = ["device", "run_id", "variant", "precision", "tokens", "points", "t0_us", "bw_gbs", "roof_gbs",
           "bw_pct_of_roof", "mb_for_pct", "worst_residual_pct"]


def fit(bytes_: Sequence[float], times_s: Sequence[float]):
    """(t0 in seconds, bw in bytes/s, worst residual as % of its point's time) of the least-squares
    line time = t0 + bytes / bw; bw is inf where the times do not grow with the bytes."""
    b, t = np.asarray(bytes_, dtype=float), np.asarray(times_s, dtype=float)
    slope, t0 = np.polyfit(b, t, 1)
    resid = 100.0 * np.abs(t - (t0 + slope * b)) / t
    return float(t0), (1.0 / slope if slope > 0 else math.inf), float(resid.max())


def bytes_for(pct: float, t0_s: float, bw: float, roof: float) -> float:
    """The bytes from which the fitted time reaches ``pct`` % of ``roof`` (bytes/s): NaN where it never
    does (``bw`` at or under that), 0 where it always does (a fixed cost of 0 or less)."""
    target = pct / 100.0 * roof
    if not (math.isfinite(roof) and roof > 0 and bw > target):
        return math.nan
    return max(0.0, t0_s / (1.0 / target - 1.0 / bw))


def launch_costs(ds: data.Dataset, pct: float = 90.0) -> pd.DataFrame:
    """Each (run, variant, precision, tokens) group of decode evidence rows on the primary GPU that can
    be fitted, with its fit and the run's copy roof (COLUMNS; ``mb_for_pct``: MB from which the
    fitted time is at ``pct`` % of the roof, NaN: never)."""
    rows = ds.gpu
    rows = rows[decode_mask(rows) & (rows["time_median_s"] > 0) & (rows["bytes_min"] >= MIN_BYTES)]
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = rows.assign(tokens=tokens_of(rows))
    roofs, _best = copy_roofs(ds.gpu)
    roof_of = {(r.run_id, r.device): float(r.roof_gbs) * 1e9 for r in roofs.itertuples()}
    out = []
    for (device, run, variant, precision, tokens), g in rows.groupby(
            ["device", "run_id", "variant", "precision", "tokens"], sort=True):
        g = g.sort_values("bytes_min")
        b = g["bytes_min"].astype(float)
        if g["bytes_min"].nunique() < MIN_POINTS or b.iloc[-1] < MIN_SPAN * b.iloc[0]:
            continue
        t0, bw, worst = fit(b, g["time_median_s"].astype(float))
        roof = roof_of.get((run, device), math.nan)
        out.append({"device": device, "run_id": run, "variant": variant, "precision": precision,
                    "tokens": int(tokens), "points": len(g), "t0_us": 1e6 * t0, "bw_gbs": bw / 1e9,
                    "roof_gbs": roof / 1e9, "bw_pct_of_roof": 100.0 * bw / roof,
                    "mb_for_pct": bytes_for(pct, t0, bw, roof) / 1e6, "worst_residual_pct": worst})
    return pd.DataFrame(out, columns=COLUMNS)


def table(costs: pd.DataFrame, pct: float = 90.0) -> str:
    """The fits as a markdown table."""
    head = (f"| run | variant | precision | tokens | points | t0 (us) | bw (GB/s) | copy probe (GB/s) | "
            f"MB for {pct:g}% | worst residual |\n|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in costs.itertuples():
        mb = "never" if math.isnan(r.mb_for_pct) else f"{r.mb_for_pct:.0f}"
        roof = "-" if math.isnan(r.roof_gbs) else f"{r.roof_gbs:.0f}"
        lines.append(f"| {r.run_id} | {r.variant} | {r.precision} | {r.tokens} | {r.points} | {r.t0_us:.1f} | "
                     f"{r.bw_gbs:.0f} | {roof} | {mb} | {r.worst_residual_pct:.1f}% |")
    return head + "\n".join(lines) + "\n"


MIN_COPY_SIZES = 3  # copy rows of distinct sizes one run needs to be read as the copy's time against its bytes
ROOM_COLUMNS = ["device", "variant", "precision", "point", "tokens", "mb", "time_us", "library", "library_us",
                "needed_us", "copy_us", "needed_over_copy", "t0_us", "bw_gbs", "t0_room_us", "best_t0_us",
                "best_t0_variant", "run_id"]


def copy_curve(rows: pd.DataFrame) -> pd.DataFrame:
    """The copy probe's time against its bytes on one device: the evidence copy rows of the run with the
    most distinct sizes (at least MIN_COPY_SIZES; ties to the latest run), the shortest median per size
    (columns bytes_min, time_median_s, run_id, sorted by bytes); empty where no run has that many."""
    c = copy_rows(rows)
    if c.empty:
        return pd.DataFrame(columns=["bytes_min", "time_median_s", "run_id"])
    sizes = c.groupby("run_id")["bytes_min"].nunique()
    sizes = sizes[sizes >= MIN_COPY_SIZES]
    if sizes.empty:
        return pd.DataFrame(columns=["bytes_min", "time_median_s", "run_id"])
    run = max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0]  # run ids start with their UTC time
    best = c[c["run_id"] == run].groupby("bytes_min", as_index=False)["time_median_s"].min()
    return best.assign(run_id=run).sort_values("bytes_min").reset_index(drop=True)


def copy_time_at(curve: pd.DataFrame, nbytes: float) -> float:
    """The copy's time (s) at ``nbytes``, log-log between the measured sizes around it; NaN outside them."""
    b, t = curve["bytes_min"].to_numpy(float), curve["time_median_s"].to_numpy(float)
    if not len(b) or not b[0] <= nbytes <= b[-1]:
        return math.nan
    return float(np.exp(np.interp(np.log(nbytes), np.log(b), np.log(t))))


def bar_room(ds: data.Dataset, factor: float, shapes: str = "") -> pd.DataFrame:
    """Each decode point on the primary GPU timed against a library (its best evidence row with a
    ``baseline_time_median_s``; ``shapes``: a regex on its shape name or MxNxK): the time ``factor`` x the
    library asks (``needed_us``) beside the copy probe's time at the point's bytes (``copy_us``, from
    :func:`copy_curve` on the same device, NaN outside the sizes it measured) and ``needed_over_copy``;
    and, where its run fits the point's variant (:func:`launch_costs`), that fit (``t0_us``, ``bw_gbs``), the
    fixed cost the bar leaves at that bw (``t0_room_us``) and the lowest t0 of the run's fits at the point's
    precision and token count (``best_t0_us``, ``best_t0_variant``) (ROOM_COLUMNS). Points with neither a copy
    time nor a fit are left out."""
    if not factor > 0:
        raise ValueError(f"the bar's factor must be positive, not {factor}")
    rows = ds.gpu
    if "baseline_time_median_s" not in rows.columns:
        return pd.DataFrame(columns=ROOM_COLUMNS)
    curve = copy_curve(rows)
    costs = launch_costs(ds)
    fits = costs.set_index(["run_id", "variant", "precision", "tokens"])
    rows = rows[decode_mask(rows) & (rows["time_median_s"] > 0)
                & (pd.to_numeric(rows["baseline_time_median_s"], errors="coerce") > 0)]
    rows = rows.assign(tokens=tokens_of(rows))
    out = []
    for r in data.best_rows(rows, POINT_BY).itertuples():
        mnk = f"{r.m}x{r.n}x{r.k}"
        point = r.shape_name if isinstance(r.shape_name, str) and r.shape_name else mnk
        if shapes and not (re.search(shapes, point) or re.search(shapes, mnk)):
            continue
        copy_s = copy_time_at(curve, float(r.bytes_min)) if not curve.empty else math.nan
        key = (r.run_id, r.variant, r.precision, int(r.tokens))
        own = fits.loc[key] if key in fits.index else None
        if math.isnan(copy_s) and own is None:
            continue
        peers = costs[(costs["run_id"] == r.run_id) & (costs["precision"] == r.precision)
                      & (costs["tokens"] == int(r.tokens))]
        needed = float(r.baseline_time_median_s) / factor
        best = peers.loc[peers["t0_us"].idxmin()] if len(peers) else None
        out.append({"device": r.device, "variant": r.variant, "precision": r.precision, "point": point,
                    "tokens": int(r.tokens), "mb": r.bytes_min / 1e6,
                    "time_us": 1e6 * r.time_median_s, "library": r.baseline_variant,
                    "library_us": 1e6 * float(r.baseline_time_median_s), "needed_us": 1e6 * needed,
                    "copy_us": 1e6 * copy_s, "needed_over_copy": needed / copy_s,
                    "t0_us": own["t0_us"] if own is not None else math.nan,
                    "bw_gbs": own["bw_gbs"] if own is not None else math.nan,
                    "t0_room_us": 1e6 * needed - r.bytes_min / own["bw_gbs"] / 1e3 if own is not None else math.nan,
                    "best_t0_us": best["t0_us"] if best is not None else math.nan,
                    "best_t0_variant": best["variant"] if best is not None else "", "run_id": r.run_id})
    return pd.DataFrame(out, columns=ROOM_COLUMNS)


def room_table(room: pd.DataFrame, factor: float) -> str:
    """:func:`bar_room` as a markdown table ("-": not measured)."""
    def num(v, fmt):
        return "-" if pd.isna(v) else format(v, fmt)

    head = (f"| point | precision | variant | MB | time (us) | library (us) | {factor:g}x asks (us) | copy (us) | "
            f"asks / copy | fit t0 (us) @ GB/s | t0 left (us) | lowest fitted t0 (us) |\n"
            f"|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = [f"| {r.point} | {r.precision} | {r.variant} | {r.mb:.1f} | {r.time_us:.2f} | {r.library_us:.2f} "
             f"({r.library}) | {r.needed_us:.2f} | {num(r.copy_us, '.2f')} | {num(r.needed_over_copy, '.3f')} | "
             f"{num(r.t0_us, '.1f')} @ {num(r.bw_gbs, '.0f')} | {num(r.t0_room_us, '.1f')} | "
             f"{num(r.best_t0_us, '.1f')} ({r.best_t0_variant or '-'}) |"
             for r in room.itertuples()]
    return head + "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.decode_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="*", help="results.csv files or folders (default: the reference data)")
    ap.add_argument("--pct", type=float, default=90.0, help="the bar, as %% of the run's copy probe (default 90)")
    ap.add_argument("--room", type=float, metavar="FACTOR",
                    help="instead of the fits, print per decode point timed against a library the time a bar of "
                         "FACTOR x it asks beside the copy probe's time at the point's bytes and the fixed cost it "
                         "leaves at the variant's fitted rate (bar_room)")
    ap.add_argument("--shapes", default="", metavar="REGEX",
                    help="with --room: only points whose shape name (or MxNxK) matches REGEX")
    args = ap.parse_args(argv)
    ds = data.dataset_from_cli("analysis.decode_cost", args.results or [DEFAULT_RESULTS])
    if ds is None:
        return 2
    if args.room is not None:
        try:
            re.compile(args.shapes)
            room = bar_room(ds, args.room, args.shapes)
        except (re.error, ValueError) as e:
            print(f"analysis.decode_cost: {e}", file=sys.stderr)
            return 2
        if room.empty:
            print("analysis.decode_cost: no decode point timed against a library has copy probe rows around its "
                  f"bytes on its device (at least {MIN_COPY_SIZES} sizes in one run: copy_sizes in "
                  ".ci/h200-session.sh) or a fit of its variant in its run (at least "
                  f"{MIN_POINTS} points of {MIN_BYTES // 2**20} MiB or more)", file=sys.stderr)
            return 2
        sys.stdout.write(room_table(room, args.room))
        return 0
    costs = launch_costs(ds, args.pct)
    if costs.empty:
        print("analysis.decode_cost: no run has enough decode points of one variant, precision and token count "
              f"to fit (at least {MIN_POINTS} of {MIN_BYTES // 2**20} MiB or more, spanning {MIN_SPAN:g}x in bytes)",
              file=sys.stderr)
        return 2
    sys.stdout.write(table(costs, args.pct))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
