"""The normalized mode: two runs, each point's time over the baseline timed interleaved with it in its
own run, compared.

    python -m analysis.compare --normalized A B     # A, B: runs or sweeps with measure.baseline set
    python -m analysis.compare --normalized SWEEP   # each job of a define sweep against its first (.sweep)

Between two runs the H200's clock and power state move every time by a few percent (the two-run mode's
threshold, :data:`.stats.RUN_TO_RUN_DRIFT`, 3.2%), more than most changes a kernel writer weighs. A
library timed batch by batch beside the kernel in each run (``measure.baseline=[cublaslt]``) lives through
the same states; dividing by it takes most of that drift out: ``time_ratio`` = (B's median time / its
baseline's) / (A's median time / its baseline's), = A's pct_of_baseline / B's; below 1 B is faster
against the same yardstick. The interval is a percentile bootstrap over the four calls' samples; the
default threshold is the measured drift of that ratio between runs of unchanged code,
:data:`.stats.NORMALIZED_DRIFT` (1.0%). One line per (point, baseline timed with it on both sides); a
point whose rows have no samples gets the ratio of its pct_of_baseline (same baseline) and no interval:
UNSURE. A point with no baseline on one side is listed, not compared.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import pandas as pd

from . import stats
from .core import COMPARED, NO_BASELINE, NORMALIZED, NOT_EVIDENCE, ONLY_A, ONLY_B, SKIPPED, Comparison, _num, build
from .match import Side, pair
from .paired import BASELINE, _calls, _name


def _row(side: Side, run_id, point_key) -> Optional[pd.Series]:
    rows = side.rows
    hit = rows[(rows["run_id"].astype(str) == str(run_id)) & (rows["point_key"].astype(str) == str(point_key))]
    return None if hit.empty else hit.iloc[0]


def _pct(x: float) -> str:
    return f"{x:.1f}%"


def _lines(line: pd.Series, key: List[str], a: Side, b: Side, calls_a, calls_b, threshold: Optional[float],
           seed: int) -> List[dict]:
    """The compared lines of one key both sides measured as evidence: one per common baseline."""
    variant = str(line["variant"])
    own_a = calls_a.get((str(line["run_id_a"]), str(line["point_key_a"])), {})
    own_b = calls_b.get((str(line["run_id_b"]), str(line["point_key_b"])), {})
    row_a, row_b = _row(a, line["run_id_a"], line["point_key_a"]), _row(b, line["run_id_b"], line["point_key_b"])
    base = {**{c: line[c] for c in key}, "run_id_a": line["run_id_a"], "run_id_b": line["run_id_b"],
            "device_a": line["device_a"], "device_b": line["device_b"], "rows_a": line["rows_a"],
            "rows_b": line["rows_b"], "clock_a_mhz": line["clock_mhz_a"], "clock_b_mhz": line["clock_mhz_b"],
            "time_a_s": line["time_median_s_a"], "time_b_s": line["time_median_s_b"], "clock_note": ""}
    t = float(threshold) if threshold is not None else stats.NORMALIZED_DRIFT
    shaky = "; ".join(f"{s} {line[f'unreliable_{s.lower()}']}" for s in "AB" if line.get(f"unreliable_{s.lower()}"))
    names = sorted((set(own_a) & set(own_b)) - {variant})
    out = []
    for name in names:
        (ta, _), (tba, _), (tb, _), (tbb, _) = own_a[variant], own_a[name], own_b[variant], own_b[name]
        if not (len(ta) and len(tba) and len(tb) and len(tbb)):
            continue
        point = "|".join(str(line[c]) for c in key) + "|" + name
        ratio, lo, hi = stats.bootstrap_normalized(ta, tba, tb, tbb, stats.point_seed(point, seed))
        v, why = stats.verdict(lo, hi, t)
        pa, pb = 100 * np.median(tba) / np.median(ta), 100 * np.median(tbb) / np.median(tb)
        why += (f"; A at {_pct(pa)} of {name}, B at {_pct(pb)}; {name} itself B/A "
                f"{np.median(tbb) / np.median(tba):.3f}" + (f"; {shaky}" if shaky else ""))
        out.append({**base, BASELINE: name, "status": COMPARED, "verdict": v, "why": why, "time_ratio": ratio,
                    "ci_lo": lo, "ci_hi": hi, "threshold": t, "interval_from": stats.BOOTSTRAP,
                    "time_a_s": float(np.median(ta)), "time_b_s": float(np.median(tb)),
                    "samples_a": len(ta), "samples_b": len(tb)})
    if out:
        return out
    # no samples of a common baseline: the rows' pct_of_baseline, where both name the same baseline
    named = [_name(r.get("baseline_variant")) if r is not None else "" for r in (row_a, row_b)]
    pcts = [_num(r.get("pct_of_baseline")) if r is not None else float("nan") for r in (row_a, row_b)]
    if named[0] and named[0] == named[1] and all(np.isfinite(p) and p > 0 for p in pcts):
        return [{**base, BASELINE: named[0], "status": COMPARED, "verdict": stats.UNSURE,
                 "time_ratio": pcts[0] / pcts[1], "threshold": t, "interval_from": stats.NO_INTERVAL,
                 "why": f"no interval: samples missing; A at {_pct(pcts[0])} of {named[0]}, B at {_pct(pcts[1])}"}]
    said = {s: sorted(set(own) - {variant}) or ([n] if n else []) for s, own, n in
            (("A", own_a, named[0]), ("B", own_b, named[1]))}
    return [{**base, BASELINE: "", "status": NO_BASELINE, "verdict": "", "interval_from": "",
             "why": "no baseline timed with it on both sides (A: " + (", ".join(said["A"]) or "none") +
                    "; B: " + (", ".join(said["B"]) or "none") + ")"}]


def compare_normalized(a: Side, b: Side, threshold: Optional[float] = None, seed: int = 0) -> Comparison:
    """Every key of A and B: where both measured it as evidence, B's time over its baseline against A's,
    per baseline timed with it in both runs; otherwise listed with the reason, as the two-run mode does."""
    both, key = pair(a, b)
    calls_a, calls_b = _calls(a.samples), _calls(b.samples)
    lines = []
    for _, line in both.iterrows():
        head = {**{c: line[c] for c in key}, BASELINE: "", "interval_from": "", "clock_note": "", "verdict": ""}
        if line["present"] != "both":
            lines.append({**head, "status": ONLY_A if line["present"] == "A" else ONLY_B,
                          "why": "not measured in " + ("B" if line["present"] == "A" else "A")})
        elif str(line["why_not_a"]).startswith("skipped") and str(line["why_not_b"]).startswith("skipped"):
            lines.append({**head, "status": SKIPPED, "why": f"A: {line['why_not_a']}; B: {line['why_not_b']}"})
        elif line["why_not_a"] or line["why_not_b"]:
            why = "; ".join(f"{s}: {line[f'why_not_{s.lower()}']}" for s in "AB" if line[f"why_not_{s.lower()}"])
            lines.append({**head, "status": NOT_EVIDENCE, "verdict": stats.UNSURE, "why": f"not evidence: {why}"})
        else:
            lines += _lines(line, key, a, b, calls_a, calls_b, threshold, seed)
    return build(a, b, key + [BASELINE], lines, threshold, NORMALIZED)
