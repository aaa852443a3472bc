"""The paired mode: each row's variant against the baseline timed interleaved with it, in one run.

    python -m analysis.compare --paired RUN        # RUN: a run or sweep folder, or a results.csv

A GPU point with baselines (``variant=B measure.baseline=[A]``; by default cuBLAS and cuBLASLt)
has its own call and each baseline's timed batch by batch by one timer, and samples.parquet keeps
them apart by ``call``: the variant's name, and each baseline's. Here A is the baseline and B the
row's variant, as in ``compare A B``: ``time_ratio`` = median time of the variant / median time of
the baseline, below 1 the variant is faster. One line per (point, baseline timed with it), with
the two-run mode's bootstrap interval and verdicts (:mod:`.stats`); the default threshold is the
within-run one (:data:`.stats.WITHIN_RUN_DRIFT`, or the noisier call's noise), since both calls
saw the same clock states. A row without samples (rows older than samples.parquet) gets the ratio
from its pct_of_baseline and no interval: UNSURE. Rows with no baseline timed with them (library
and CPU points, ``measure.baseline=[]``) are listed, not compared.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from .. import data
from . import stats
from .core import COMPARED, NO_BASELINE, NOT_EVIDENCE, PAIRED, Comparison, _num, _point, build
from .match import Side, _clock, _keyed, _why_not, key_columns

BASELINE = "baseline"  # the key's last column here: which baseline the line compares with
Calls = Dict[str, Tuple[np.ndarray, np.ndarray]]  # call name -> (times in sample order, in-band clocks)


def _calls(samples: pd.DataFrame) -> Dict[Tuple[str, str], Calls]:
    """Per (run_id, point_key), each call's samples."""
    out: Dict[Tuple[str, str], Calls] = {}
    if samples.empty:
        return out
    for (run_id, point_key, call), g in samples.groupby(["run_id", "point_key", "call"], sort=True):
        g = g.sort_values("sample")
        out.setdefault((str(run_id), str(point_key)), {})[str(call)] = (
            g["time_s"].to_numpy(float), g["sm_clock_mhz"].to_numpy(float))
    return out


def _noise(t: np.ndarray) -> float:
    p20, med, p80 = np.quantile(t, [0.2, 0.5, 0.8])  # as gemmlab.measure.stats.Summary.noise
    return float((p80 - p20) / med) if med > 0 else float("nan")


def _clock_of(clocks: Optional[np.ndarray]) -> float:
    ok = clocks[np.isfinite(clocks)] if clocks is not None else np.array([])
    return float(np.median(ok)) if ok.size else float("nan")


def _name(x) -> str:
    """A name cell as text; "" where empty (NaN, NA, None)."""
    return "" if x is None or pd.isna(x) else str(x)


def _baselines(row: pd.Series, calls: Calls) -> List[str]:
    """The baselines timed with ``row``: every other call in its samples, else the row's
    baseline_variant (the fastest, the one pct_of_baseline divides by)."""
    named = [c for c in calls if c != str(row["variant"])]
    if named:
        return named
    fastest = _name(row.get("baseline_variant"))
    return [fastest] if fastest else []


def _line(row: pd.Series, name: str, calls: Calls, key: List[str], threshold: Optional[float],
          seed: int) -> dict:
    """One compared line: the row's own call (B) against baseline ``name`` (A)."""
    own, base = calls.get(str(row["variant"])), calls.get(name)
    clock_b, _ = _clock(row, None if own is None else pd.DataFrame({"sm_clock_mhz": own[1]}))
    line = {"time_b_s": _num(row["time_median_s"]), "samples_b": _num(row["samples"]), "rows_b": row["rows"],
            "clock_b_mhz": clock_b, "run_id_a": row["run_id"], "run_id_b": row["run_id"],
            "device_a": row["device"], "device_b": row["device"], "rows_a": row["rows"]}
    if own is None or base is None or not len(own[0]) or not len(base[0]):
        t_a = _num(row.get("baseline_time_median_s")) if name == _name(row.get("baseline_variant")) else float("nan")
        lo, hi = _num(row.get("baseline_sm_clock_min_mhz")), _num(row.get("baseline_sm_clock_max_mhz"))
        line.update(time_a_s=t_a, clock_a_mhz=(lo + hi) / 2 if lo > 0 and hi > 0 else float("nan"))
        ratio = line["time_b_s"] / t_a if t_a > 0 else float("nan")
        return {**line, "status": COMPARED, "verdict": stats.UNSURE, "time_ratio": ratio,
                "threshold": stats.point_threshold(np.nan, _num(row["noise"]), threshold, stats.WITHIN_RUN_DRIFT),
                "interval_from": stats.NO_INTERVAL, "clock_note": "",
                "why": "no interval: samples missing (the rows keep no p20/p80 of the baseline)"}
    line.update(time_a_s=float(np.median(base[0])), samples_a=len(base[0]), clock_a_mhz=_clock_of(base[1]),
                time_b_s=float(np.median(own[0])), samples_b=len(own[0]))
    both = pd.Series({**{c: row[c] for c in key}, BASELINE: name, "why_not_a": "", "why_not_b": "",
                      "times_a": base[0], "times_b": own[0], "noise_a": _noise(base[0]),
                      "noise_b": _noise(own[0]), "clock_mhz_a": line["clock_a_mhz"],
                      "clock_mhz_b": clock_b})
    return {**line, **_point(both, key + [BASELINE], threshold, seed, floor=stats.WITHIN_RUN_DRIFT)}


def compare_paired(side: Side, threshold: Optional[float] = None, seed: int = 0) -> Comparison:
    """Every point of ``side``: its best evidence row against each baseline timed with it; UNSURE
    with the reason where its rows are not evidence; listed where no baseline was timed with it."""
    key = key_columns(side.rows, side.rows)
    rows = _keyed(side.rows, key)
    best = data.best_rows(data.evidence(rows), key)
    by_key = {tuple(r): i for i, r in enumerate(best[key].itertuples(index=False, name=None))}
    calls = _calls(side.samples)
    lines = []
    for k, group in rows.groupby(key, sort=True, dropna=False):
        head = dict(zip(key, k))
        if k not in by_key:
            named = group["baseline_variant"] if "baseline_variant" in group else pd.Series(dtype=object)
            named = sorted({_name(x) for x in named} - {""})
            got = {"status": NOT_EVIDENCE, "verdict": stats.UNSURE, "why": f"not evidence: B: {_why_not(group)}"} \
                if named else {"status": NO_BASELINE, "verdict": "", "why": "no baseline timed with it"}
            lines.append({**head, BASELINE: ", ".join(named), "interval_from": "", "clock_note": "", **got,
                          "run_id_b": str(group["run_id"].iloc[0]), "device_b": str(group["device"].iloc[0])})
            continue
        row = best.iloc[by_key[k]]
        mine = calls.get((str(row["run_id"]), str(row["point_key"])), {})
        names = _baselines(row, mine)
        if not names:
            lines.append({**head, BASELINE: "", "status": NO_BASELINE, "verdict": "", "interval_from": "",
                          "why": "no baseline timed with it", "clock_note": "", "time_b_s": row["time_median_s"],
                          "run_id_b": row["run_id"], "device_b": row["device"], "rows_b": row["rows"]})
        for name in names:
            lines.append({**head, BASELINE: name, **_line(row, name, mine, key, threshold, seed)})
    return build(side, side, key + [BASELINE], lines, threshold, PAIRED)
