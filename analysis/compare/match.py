"""Which point of A meets which point of B, and what each side has to say about it.

A point's key is what was measured, never where or when: ``kind`` (cpu | gpu), ``backend``,
``variant``, ``precision``, ``op``, ``m``, ``n``, ``k``, ``cache`` (flush, rotate and warm time
different things), plus ``layout``, ``batch`` and ``shape_name`` where either side has such a
column. Not in it: ``run_id``, ``point_key`` (a hash of the whole config, run settings included),
``timestamp``, ``host``, ``device`` (comparing this GPU with the reference H200 is the point).

Per side and key, the point's row is its best evidence row (:func:`analysis.data.best_rows`
over :func:`analysis.data.evidence`), one row of one run; ``rows`` counts the evidence rows it
was chosen from. A key without evidence but with rows that are evidence in all but reliability
(noise above max_noise, the SM clock drifting over the samples: on the H200 a power-bound GEMM
throttles within a second) is still compared, from its best such row: ``unreliable`` says why and
``drift`` is its clock drift, which the verdict's threshold then covers (:mod:`.core`). A key with
rows but none of either kind carries the reason instead.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import pandas as pd

from gemmlab import samples as sample_files

from .. import data

KEY = ["kind", "backend", "variant", "precision", "op", "m", "n", "k", "cache"]
OPTIONAL_KEY = ["layout", "batch", "shape_name"]
SIDE_COLUMNS = ["run_id", "point_key", "device", "time_median_s", "time_p20_s", "time_p80_s", "samples",
                "noise", "rows", "clock_mhz", "clock_from", "why_not", "unreliable", "drift"]
UNRELIABLE = "unreliable"


@dataclass
class Side:
    """One input of the comparison: what was given, its rows and their samples."""

    name: str  # "A" or "B"
    path: Path
    rows: pd.DataFrame  # every row, normalised (analysis.data.load)
    samples: pd.DataFrame  # gemmlab.samples.read of the same path

    @classmethod
    def load(cls, name: str, path: os.PathLike) -> "Side":
        return cls(name, Path(path), data.load(path), sample_files.read(path))

    def renamed(self, variants: dict) -> "Side":
        """This side with its variants renamed (``{"warp_tiled_s4": "warp_tiled"}``): rows and the
        samples' ``call``, so a variant is matched with another name's points (``--match``)."""
        if not variants:
            return self
        samples = self.samples
        if not samples.empty:
            samples = samples.assign(call=samples["call"].replace(variants))
        return Side(self.name, self.path, self.rows.assign(variant=self.rows["variant"].replace(variants)), samples)

    @property
    def devices(self) -> List[str]:
        return sorted(set(data.measured(self.rows)["device"]) - {""})


def key_columns(a: pd.DataFrame, b: pd.DataFrame) -> List[str]:
    """KEY plus the OPTIONAL_KEY columns either side has."""
    return KEY + [c for c in OPTIONAL_KEY if c in a.columns or c in b.columns]


def _keyed(rows: pd.DataFrame, key: Sequence[str]) -> pd.DataFrame:
    rows = rows.copy()
    for c in key:
        if c not in rows.columns:
            rows[c] = ""
        if c not in ("m", "n", "k"):
            rows[c] = rows[c].astype(object).where(rows[c].notna(), "").astype(str)
    return rows


def _clock(row: pd.Series, times: Optional[pd.DataFrame]) -> tuple:
    """The SM clock the point ran at, MHz, and where it was read: the median of the in-band clock
    before each sample, else the row's in-band [min, median, max], else NVML's range midpoint."""
    if times is not None and times["sm_clock_mhz"].notna().any():
        return float(times["sm_clock_mhz"].median()), "samples"
    inband = data.extra_of(row.get("extra", "")).get("timer", {}).get("sm_clock_inband_mhz")
    if isinstance(inband, list) and len(inband) == 3 and inband[1]:
        return float(inband[1]), "in-band"
    lo, hi = row.get("sm_clock_min_mhz"), row.get("sm_clock_max_mhz")
    if pd.notna(lo) and pd.notna(hi) and lo > 0:
        return float((lo + hi) / 2), "NVML"
    return float("nan"), ""


def _why_not(group: pd.DataFrame) -> str:
    """Why none of a key's rows is evidence: the reason of its best measured row, else the
    status (and reason) of its first row."""
    measured = data.measured(group)
    if not measured.empty:
        best = measured.sort_values(data.BEST_ORDER, kind="stable").iloc[0]
        # evidence without a positive median time (a probe that reports something else) has no ratio
        return data.not_evidence_reasons(best.to_frame().T).iloc[0] or "no median time"
    first = group.iloc[0]
    why = str(first.get("reason") or "").strip()
    return f"{first['status'] or 'no status'}" + (f" ({why})" if why and why != "nan" else "")


def _only_unreliable(rows: pd.DataFrame) -> pd.DataFrame:
    """Measured rows whose one defect is being unreliable (noise, clock drift), with their reason."""
    measured = data.measured(rows)
    why = data.not_evidence_reasons(measured)
    return measured[why.str.startswith(UNRELIABLE)].assign(unreliable=why)


def _drift(row: pd.Series) -> float:
    drift = data.extra_of(row.get("extra", "")).get("timer", {}).get("sm_clock_drift")
    return abs(float(drift)) if isinstance(drift, (int, float)) and np.isfinite(drift) else float("nan")


def points(side: Side, key: Sequence[str]) -> pd.DataFrame:
    """One line per key of ``side``: its best evidence row (with its samples' times and clock),
    else its best row that is unreliable and nothing else (``unreliable``: why), or ``why_not``
    where it has rows but none of either."""
    rows = _keyed(side.rows, key)
    best = data.best_rows(data.evidence(rows), key)
    have = set(best[list(key)].itertuples(index=False, name=None))
    shaky = _only_unreliable(rows)
    shaky = shaky[[k not in have for k in shaky[list(key)].itertuples(index=False, name=None)]]
    best = pd.concat([best.assign(unreliable=""), data.best_rows(shaky, key)], ignore_index=True) \
        if not shaky.empty else best.assign(unreliable="")
    by_key = {tuple(r): i for i, r in enumerate(best[list(key)].itertuples(index=False, name=None))}
    samples = side.samples
    grouped = {k: g for k, g in samples.groupby(["run_id", "point_key", "call"], sort=False)} \
        if not samples.empty else {}
    lines, times = [], []
    for k, group in rows.groupby(list(key), sort=True, dropna=False):
        line = dict(zip(key, k))
        if k in by_key:
            row = best.iloc[by_key[k]]
            t = grouped.get((row["run_id"], row["point_key"], row["variant"]))
            clock, source = _clock(row, t)
            line.update({c: row[c] for c in SIDE_COLUMNS if c in row.index})
            line.update(rows=int(row["rows"]), clock_mhz=clock, clock_from=source, why_not="",
                        drift=_drift(row) if row["unreliable"] else float("nan"))
            times.append(None if t is None or t.empty else t.sort_values("sample")["time_s"].to_numpy(float))
        else:
            line.update({c: np.nan for c in SIDE_COLUMNS}, rows=0, why_not=_why_not(group),
                        run_id=str(group["run_id"].iloc[0]), device=str(group["device"].iloc[0]),
                        clock_from="")
            times.append(None)
        lines.append(line)
    out = pd.DataFrame(lines, columns=list(key) + SIDE_COLUMNS)
    out["times"] = pd.Series(times, index=out.index, dtype=object)
    return out


def pair(a: Side, b: Side) -> tuple:
    """The points of A and B side by side (``*_a``, ``*_b``) with ``present`` = both | A | B, and
    the key used."""
    key = key_columns(a.rows, b.rows)
    pa, pb = points(a, key), points(b, key)
    both = pa.merge(pb, on=key, how="outer", suffixes=("_a", "_b"), indicator=True)
    both["present"] = both.pop("_merge").map({"both": "both", "left_only": "A", "right_only": "B"}).astype(str)
    return both, key
