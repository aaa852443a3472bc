"""A against B, point by point: ratio, interval, threshold, verdict, clocks (one table)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
import pandas as pd

from .. import data
from . import stats
from .match import Side, pair

CLOCK_NOTE_FRACTION = 0.02  # clocks further apart than this get a clock_note (as clock_stable_fraction)
# present: both sides measured the point; "A" / "B": only that side did (listed, not compared)
COMPARED, NOT_EVIDENCE, ONLY_A, ONLY_B = "compared", "not evidence", "only in A", "only in B"
SKIPPED = "skipped on both sides"  # neither side measured it (the variant cannot run it): no verdict
NO_BASELINE = "no baseline"  # paired mode: a row no baseline was timed with (listed, not compared)
TWO_RUNS, PAIRED = "two runs", "paired (interleaved in one run)"  # the `pairing` column
NORMALIZED = "normalized (each run over the baseline timed in it)"  # two runs, each over its baseline (.normalized)
OUT_COLUMNS = [
    "status", "verdict", "time_ratio", "ci_lo", "ci_hi", "threshold", "interval_from", "why",
    "time_a_s", "time_b_s", "samples_a", "samples_b", "rows_a", "rows_b", "run_id_a", "run_id_b",
    "device_a", "device_b", "clock_a_mhz", "clock_b_mhz", "clock_note", "ratio_at_clock", "pairing",
]


@dataclass
class Comparison:
    a: Side
    b: Side
    key: List[str]
    table: pd.DataFrame  # one line per key: the key, then OUT_COLUMNS
    threshold_given: Optional[float]
    notes: List[str] = field(default_factory=list)
    mode: str = TWO_RUNS  # or PAIRED: A is the baseline timed interleaved with B in one run (.paired)

    @property
    def compared(self) -> pd.DataFrame:
        return self.table[self.table["status"] == COMPARED]

    def counts(self) -> dict:
        v = self.table["verdict"]
        return {name: int((v == name).sum()) for name in stats.VERDICTS}

    @property
    def regressed(self) -> bool:
        """A significant regression: some point SLOWER beyond its threshold (exit code 1)."""
        return bool((self.table["verdict"] == stats.SLOWER).any())


def _num(x) -> float:
    return float(x) if x is not None and not pd.isna(x) else float("nan")


def _point(line: pd.Series, key: List[str], threshold: Optional[float], seed: int,
           floor: float = stats.RUN_TO_RUN_DRIFT) -> dict:
    """The verdict of one key present on both sides (``floor``: the default threshold's least)."""
    out = {c: "" for c in ("verdict", "interval_from", "why", "clock_note")}
    if str(line["why_not_a"]).startswith("skipped") and str(line["why_not_b"]).startswith("skipped"):
        return {**out, "status": SKIPPED, "why": f"A: {line['why_not_a']}; B: {line['why_not_b']}"}
    if line["why_not_a"] or line["why_not_b"]:
        why = "; ".join(f"{s}: {line[f'why_not_{s.lower()}']}" for s in "AB" if line[f"why_not_{s.lower()}"])
        return {**out, "status": NOT_EVIDENCE, "verdict": stats.UNSURE, "why": f"not evidence: {why}"}
    t_a, t_b = line["times_a"], line["times_b"]
    if t_a is not None and t_b is not None and len(t_a) and len(t_b):
        name = "|".join(str(line[c]) for c in key)
        ratio, lo, hi = stats.bootstrap_interval(t_a, t_b, stats.point_seed(name, seed))
        source = stats.BOOTSTRAP
    else:
        q = [_num(line[f"time_{p}_s_{s}"]) for s in "ab" for p in ("median", "p20", "p80")]
        if not all(math.isfinite(x) and x > 0 for x in q):
            return {**out, "status": NOT_EVIDENCE, "verdict": stats.UNSURE,
                    "why": "no samples and no p20/p80 on both sides: no interval"}
        ratio, lo, hi = stats.quantile_interval(*q[:3], _num(line["samples_a"]), *q[3:], _num(line["samples_b"]))
        source = stats.QUANTILES
    t = stats.point_threshold(_num(line["noise_a"]), _num(line["noise_b"]), threshold, floor)
    shaky = {s: line.get(f"unreliable_{s.lower()}") for s in "AB" if line.get(f"unreliable_{s.lower()}")}
    if threshold is None:  # an unreliable side's clock moved over its samples: the band covers it
        t = max([t] + [d for d in (_num(line.get("drift_a")), _num(line.get("drift_b"))) if math.isfinite(d)])
    v, why = stats.verdict(lo, hi, t)
    if shaky:
        why += "; " + "; ".join(f"{s} {w}" for s, w in shaky.items())
    out.update(status=COMPARED, verdict=v, why=why, time_ratio=ratio, ci_lo=lo, ci_hi=hi, threshold=t,
               interval_from=source)
    ca, cb = _num(line["clock_mhz_a"]), _num(line["clock_mhz_b"])
    if ca > 0 and cb > 0 and abs(cb / ca - 1) > CLOCK_NOTE_FRACTION:
        out["clock_note"] = (f"B at {cb:.0f} MHz, A at {ca:.0f} MHz ({100 * (cb / ca - 1):+.1f}%): "
                             f"ratio_at_clock holds for compute-bound points only")
        out["ratio_at_clock"] = ratio * cb / ca
    return out


def compare(a: Side, b: Side, threshold: Optional[float] = None, seed: int = 0) -> Comparison:
    """Every key of A and B: compared where both sides have an evidence row, UNSURE with the
    reason where one side's rows are not evidence, listed where only one side has it."""
    both, key = pair(a, b)
    lines = []
    for _, line in both.iterrows():
        if line["present"] != "both":
            got = {"status": ONLY_A if line["present"] == "A" else ONLY_B, "verdict": "", "interval_from": "",
                   "why": "not measured in " + ("B" if line["present"] == "A" else "A"), "clock_note": ""}
        else:
            got = _point(line, key, threshold, seed)
        row = {c: line[c] for c in key}
        for c in ("time_median_s", "samples", "rows", "run_id", "device", "clock_mhz"):
            for s in "ab":
                name = {"time_median_s": f"time_{s}_s", "clock_mhz": f"clock_{s}_mhz"}.get(c, f"{c}_{s}")
                row[name] = line.get(f"{c}_{s}")
        row.update(got)
        lines.append(row)
    return build(a, b, key, lines, threshold, TWO_RUNS)


def build(a: Side, b: Side, key: List[str], lines: List[dict], threshold: Optional[float],
          mode: str) -> Comparison:
    """The Comparison of ``lines`` (one dict per key: the key and OUT_COLUMNS), ordered."""
    table = pd.DataFrame(lines, columns=key + OUT_COLUMNS)
    table["pairing"] = mode
    table = _ordered(table[key + OUT_COLUMNS], key)
    for c in ("time_ratio", "ci_lo", "ci_hi", "threshold", "ratio_at_clock", "time_a_s", "time_b_s"):
        table[c] = data.stable(pd.to_numeric(table[c], errors="coerce"))
    comp = Comparison(a, b, key, table, threshold, mode=mode)
    comp.notes = _notes(comp)
    return comp


def _ordered(table: pd.DataFrame, key: List[str]) -> pd.DataFrame:
    """Backends, then variants, precisions and sizes in the legends' order; one-sided last."""
    b_rank = {x: i for i, x in enumerate(data.backend_order(table["backend"]))}
    p_rank = {x: i for i, x in enumerate(data.precision_order(table["precision"]))}
    status_rank = {COMPARED: 0, NOT_EVIDENCE: 1, ONLY_A: 2, ONLY_B: 3, NO_BASELINE: 4, SKIPPED: 5}
    sort = pd.DataFrame({
        "s": table["status"].map(status_rank), "b": table["backend"].map(b_rank).fillna(len(b_rank)),
        "v": table["variant"], "p": table["precision"].map(p_rank).fillna(len(p_rank)),
        "o": table["op"], **{c: pd.to_numeric(table[c], errors="coerce").fillna(-1) for c in ("m", "n", "k")},
        "rest": ["|".join(map(str, r)) for r in table[key].itertuples(index=False, name=None)]})
    order = sort.sort_values(list(sort.columns), kind="stable").index
    return table.loc[order].reset_index(drop=True)


def _notes(comp: Comparison) -> List[str]:
    """What a reader must know beside the table: devices, threshold, chosen rows, clocks."""
    notes = []
    da, db = comp.a.devices, comp.b.devices
    if da != db:
        notes.append(f"devices differ: A {', '.join(da) or 'none'}; B {', '.join(db) or 'none'}")
    if comp.threshold_given is None and comp.mode == NORMALIZED:
        notes.append(f"threshold per point: the measured run-to-run drift of a time over its interleaved baseline "
                     f"({100 * stats.NORMALIZED_DRIFT:.1f}%, {stats.NORMALIZED_SOURCE}); the raw times' drift "
                     f"({100 * stats.RUN_TO_RUN_DRIFT:.1f}%) is divided out by the baseline that lived through it")
    elif comp.threshold_given is None and comp.mode == PAIRED:
        notes.append(f"threshold per point: the larger of the SM clock movement an evidence row allows inside "
                     f"one run ({100 * stats.WITHIN_RUN_DRIFT:.1f}%, {stats.WITHIN_RUN_SOURCE}) and the noisier "
                     f"call's (p80 - p20) / median; the run-to-run drift ({100 * stats.RUN_TO_RUN_DRIFT:.1f}%) "
                     f"does not apply: both calls ran interleaved under the same clock")
    elif comp.threshold_given is None:
        notes.append(f"threshold per point: the larger of the measured run-to-run drift "
                     f"({100 * stats.RUN_TO_RUN_DRIFT:.1f}%, {stats.DRIFT_SOURCE}), the noisier side's "
                     f"(p80 - p20) / median and an unreliable side's SM clock drift over its samples")
    else:
        notes.append(f"threshold: ±{100 * comp.threshold_given:.1f}% (--threshold)")
    shaky = int(comp.table["why"].astype(str).str.contains(" unreliable (", regex=False).sum())
    if shaky:
        notes.append(f"{shaky} compared points have a side that is unreliable (noise above max_noise or the SM "
                     f"clock drifting over the samples; why names it): compared from that row" +
                     (" over its baseline, which drifted with it" if comp.mode == NORMALIZED else
                      ", their band widened by the drift"))
    t = comp.table
    several = t[(pd.to_numeric(t["rows_a"], errors="coerce") > 1) | (pd.to_numeric(t["rows_b"], errors="coerce") > 1)]
    if len(several):
        notes.append(f"{len(several)} points have several evidence rows on one side: each uses its best row "
                     f"(shortest median, analysis.data.best_rows), rows_a / rows_b count them")
    clocks = int((t["clock_note"] != "").sum())
    if clocks:
        notes.append(f"{clocks} points ran at SM clocks more than {100 * CLOCK_NOTE_FRACTION:.0f}% apart: see "
                     f"clock_note and ratio_at_clock (time ratio at A's clock; compute-bound points only)")
    fallback = int((t["interval_from"] == stats.QUANTILES).sum())
    if fallback:
        notes.append(f"{fallback} points lack samples on a side: their interval comes from the rows' p20/p80 "
                     f"(interval_from = {stats.QUANTILES}), a wider rule than the bootstrap")
    bare = int((t["interval_from"] == stats.NO_INTERVAL).sum())
    if bare:
        notes.append(f"{bare} points have no samples: time_ratio is the row's 100 / pct_of_baseline, with no "
                     f"interval (the rows keep no p20/p80 of the baseline), so UNSURE")
    return notes
