"""The rows the claims read: :class:`Evidence` (selections of one dataset's rows) and helpers
that read or name one row."""
from __future__ import annotations

import json
import re
from typing import Dict, Optional, Sequence, Tuple

import pandas as pd

from .. import data
from ..style import format_sig
from .chapter import CHAPTER_DEVICE


def extra(row: pd.Series) -> dict:
    text = row.get("extra", "")
    try:
        v = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def f(x, digits: int = 3) -> str:
    return format_sig(x, digits)


def shape(row: pd.Series) -> str:
    return data.problem_text(row)


def where(row: pd.Series) -> str:
    return f"{row['variant']} {row['precision']} {shape(row)}"


def as_text(v) -> str:
    """A cell as text ("" for a missing one)."""
    return "" if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)


def defines(row: pd.Series) -> Dict[str, float]:
    """The kernel's compile-time parameters as its row names them (the ``defines`` column, else
    ``kernel_name`` = ``name<BM=128,BN=128,...>``): what the variant was when it was measured."""
    x = as_text(row.get("defines"))
    try:
        parsed = json.loads(x) if x else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        out_: Dict[str, float] = {}
        for k, v in parsed.items():
            try:
                out_[str(k)] = float(v)
            except (TypeError, ValueError):
                continue
        if out_:
            return out_
    name = row.get("kernel_name")
    m = re.search(r"<([^<>]*)>\s*$", "" if name is None or pd.isna(name) else str(name))
    out: Dict[str, float] = {}
    for item in (m.group(1).split(",") if m else []):
        k, _, v = item.partition("=")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            continue
    return out


class Evidence:
    """Selections of one dataset's rows that the claims share (evidence rows only; failed rows
    where a claim is about a check failing)."""

    def __init__(self, ds: data.Dataset):
        self.ds = ds
        self.rows = ds.rows
        self.gpu_ceil, self.cpu_ceil = ds.gpu_ceilings, ds.cpu_ceilings
        chapter = {c.stem: c for c in data.device_configs()}
        self.chapter_device = chapter.get(CHAPTER_DEVICE)
        self._device_rows: Dict[tuple, pd.DataFrame] = {}
        self._peaks: Dict[str, pd.DataFrame] = {}

    # rows -------------------------------------------------------------------------------
    def device_rows(self, kind: str = "gpu", statuses: Sequence[str] = ("ok",)) -> pd.DataFrame:
        """Rows of ``kind`` on its primary device: ok rows that are evidence
        (:func:`analysis.data.evidence_mask`), and rows of the other ``statuses`` (a failed check
        measured something too; its timing, if any, is not used), never CUPTI-timed ones."""
        key = (kind, tuple(statuses))
        if key not in self._device_rows:
            device = (self.gpu_ceil if kind == "gpu" else self.cpu_ceil).device
            r = self.rows
            if device is None:
                r = r.iloc[:0]
            else:
                r = r[(r["kind"] == kind) & (r["device"] == device)]
                good = data.evidence_mask(r)
                other = r["status"].isin([s for s in statuses if s != "ok"]) & (r["timer"] != data.CUPTI_TIMER)
                r = r[(good & ("ok" in statuses)) | other]
            self._device_rows[key] = r
        return self._device_rows[key]

    def variant(self, name: str, kind: str = "gpu", precision: Optional[str] = None,
                statuses: Sequence[str] = ("ok",), timed: bool = True) -> pd.DataFrame:
        r = self.device_rows(kind, statuses)
        r = r[r["variant"] == name]
        if precision is not None:
            r = r[r["precision"] == precision]
        if timed:
            r = r[r["time_median_s"].notna() & (r["time_median_s"] > 0)]
        return r

    def op(self, op: str, kind: str = "gpu", precision: Optional[str] = None) -> pd.DataFrame:
        r = self.device_rows(kind)
        r = r[(r["op"] == op) & r["time_median_s"].notna() & (r["time_median_s"] > 0)]
        return r if precision is None else r[r["precision"] == precision]

    @staticmethod
    def largest(rows: pd.DataFrame) -> Optional[pd.Series]:
        """The best row of the largest problem (m*n*k): the shortest median time there."""
        if rows.empty:
            return None
        r = rows.assign(_size=rows["m"].astype(float) * rows["n"].astype(float) * rows["k"].astype(float))
        return r.sort_values(["_size", "time_median_s", "variant", "run_id"], ascending=[False, True, True, True],
                             kind="stable").iloc[0]

    def pair(self, a: str, b: str, precision: str, kind: str = "gpu",
             square_only: bool = True) -> Optional[Tuple[pd.Series, pd.Series]]:
        """Rows of variants a and b at the same point of the same run (the largest such point)."""
        ra, rb = self.variant(a, kind, precision), self.variant(b, kind, precision)
        if square_only:
            ra, rb = data.square(ra), data.square(rb)
        keys = ["run_id", "m", "n", "k"]
        both = ra.merge(rb[keys], on=keys)
        if both.empty:
            return None
        best = self.largest(both)
        pick = lambda r: self.largest(r[(r["run_id"] == best["run_id"]) & (r["m"] == best["m"])
                                        & (r["n"] == best["n"]) & (r["k"] == best["k"])])
        return pick(ra), pick(rb)

    def counters_row(self, variant: str, precision: str = "fp32") -> Optional[pd.Series]:
        """The variant's row with hardware-counter intensities (the largest N; square GEMMs)."""
        rows = data.square(self.variant(variant, "gpu", precision))
        rows = rows[rows["intensity_dram"].notna() | rows["intensity_l1"].notna()]
        return self.largest(rows)

    # ceilings ---------------------------------------------------------------------------
    def peak(self, precision: str, kind: str = "gpu") -> Optional[pd.Series]:
        """The measured peak of ``precision``: :func:`analysis.data.peak_rows` (the best GEMM
        evidence row; the tables quote the same row)."""
        rows = self.peaks_rows(kind)
        rows = rows[rows["precision"] == precision]
        return None if rows.empty else rows.iloc[0]

    def peaks_rows(self, kind: str = "gpu") -> pd.DataFrame:
        if kind not in self._peaks:
            self._peaks[kind] = data.peak_rows(self.rows, kind)
        return self._peaks[kind]

    def peaks(self, kind: str = "gpu") -> Dict[str, float]:
        r = self.peaks_rows(kind)
        return dict(zip(r["precision"], r["tflops"].astype(float)))

    def bandwidth(self, kind: str = "gpu") -> Tuple[float, str]:
        """Memory roof in GB/s and where it comes from."""
        ceil = self.gpu_ceil if kind == "gpu" else self.cpu_ceil
        if ceil.measured_bandwidth_gbs is not None:
            row = data.copy_row(data.device_rows(self.rows, kind))
            return ceil.measured_bandwidth_gbs, f"copy probe ({row['variant']}, {int(row['m'])} elements)" \
                if row is not None else "copy probe"
        return ceil.datasheet_bandwidth_gbs, f"datasheet {ceil.config.stem} (no copy row)"

    def measured_bandwidth(self, kind: str = "gpu") -> Optional[float]:
        return (self.gpu_ceil if kind == "gpu" else self.cpu_ceil).measured_bandwidth_gbs

    def ridge(self, precision: str, kind: str = "gpu") -> Optional[Tuple[float, pd.Series, float, str]]:
        """(I* in FLOP/B, the peak row, bandwidth GB/s, its source) from measured ceilings."""
        peak = self.peak(precision, kind)
        if peak is None:
            return None
        bw, src = self.bandwidth(kind)
        return float(peak["tflops"]) * 1e12 / (bw * 1e9), peak, bw, src

    def chapter_ridge(self, precision: str) -> Optional[float]:
        c = self.chapter_device
        if c is None or precision not in c.peak_tflops:
            return None
        return c.peak_tflops[precision] * 1e12 / (c.memory_bandwidth_gbs * 1e9)

    @property
    def gpu_label(self) -> str:
        return self.gpu_ceil.device or "no GPU rows"

    @property
    def cpu_label(self) -> str:
        return self.cpu_ceil.device or "no CPU rows"
