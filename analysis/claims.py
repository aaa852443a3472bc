"""The chapter's claims, C1 to C14f, each with a verdict computed from result rows.

    python -m analysis.claims                          # outputs/reference/ -> outputs/paper/claims.md
    python -m analysis.claims RESULTS ... --out DIR    # results.csv files or folders holding them

One row per claim of ``../shared/seed/CLAIMS.md``: what the chapter says, what the rows show
(device, size, precision, figure), and a verdict: **holds**, **holds with another number** (the
statement is right, its number is not this hardware's), **does not hold**, or **not measured**
(with the experiment that measures it). A claim is checked as one or more parts; the claim's
verdict is its worst measured part. Every threshold is a constant below and is quoted next to
the verdict it decides. The chapter's own figures come from ``conf/device/h100.yaml`` (its
peaks and bandwidth), ``analysis.tables.CHAPTER_OPS`` (its intensity table) and ``CHAPTER`` below
(the numbers in its text); the measured side comes only from rows.

Rows are read with :mod:`analysis.data`: the GPU and CPU of a dataset are the devices with the
most ok rows; "peak" is the best ok throughput per precision there; the memory roof is the copy
probe's bandwidth (the datasheet's, said so, when no copy row exists). Modeled intensities come
from the row's ``intensity_model`` unless the row carries hardware-counter DRAM bytes
(``intensity_dram``); each verdict says which one it used.

``analysis.paper`` calls :func:`write_claims` beside the figures.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from gemmlab.config import ROOT, load_variant

from . import data, tables
from .style import format_sig, write_if_changed

DEFAULT_RESULTS = ROOT / "outputs" / "reference"
DEFAULT_OUT = ROOT / "outputs" / "paper"
CLAIMS_FILE = "claims.md"

HOLDS = "holds"
OTHER_NUMBER = "holds with another number"
DOES_NOT_HOLD = "does not hold"
NOT_MEASURED = "not measured"
VERDICTS = (HOLDS, OTHER_NUMBER, DOES_NOT_HOLD, NOT_MEASURED)
_SEVERITY = {HOLDS: 0, OTHER_NUMBER: 1, DOES_NOT_HOLD: 2}

# -- thresholds: part of the logic, quoted in every rule text -----------------------------------
SAME_NUMBER_REL = 0.25  # a measured number within +-25 % of the chapter's is "the same number"
BANDWIDTH_BOUND_FRACTION = 0.60  # bandwidth-bound in practice: >= 60 % of the measured memory roof
FEW_PERCENT_MAX = 10.0  # "only a few percent of peak": at most 10 %
ROOF_SLACK = 0.05  # no measured time may beat the roofline's T by more than 5 %
FASTER_MIN_GAIN = 0.02  # without quantiles, "faster" needs a 2 % lower median
FIRST_RUN_MIN_RATIO = 1.10  # a first run counts as slower from 10 % above the settled median
WRONG_MIN_REL_ERROR = 0.1  # a result that is "wrong", not rounding
SAME_PRODUCT_MAX_REL_ERROR = 1e-2  # a result that "is" another product (FP16 inputs)
TF32_LOSS_MIN_FACTOR = 10.0  # TF32 "not lossless": its error at least 10x FP32's at every K
ERROR_GROWTH_MIN_SLOPE = 0.25  # error "grows with K": log-log slope of error against K >= 0.25
SLOWDOWN_MIN = 1.10  # a misaligned call counts as "slow path" from 10 % slower
MAJORITY = 0.5  # "often": in at least half of the measured sizes
TENS_OF_TFLOPS = (10.0, 100.0)  # "tens of TFLOP/s"

DRAM_OPS = ("gemm", "gemv", "vecadd")  # ops whose bytes_min is DRAM traffic (copy defines the roof)
CHAPTER_DEVICE = "h100"  # conf/device/h100.yaml: the chapter's peaks and bandwidth


@dataclass(frozen=True)
class ChapterNumbers:
    """Numbers the chapter states in its text (not measurements; see CLAIMS.md)."""

    naive_intensity: float = 0.25  # C3, FLOP/B
    naive_orders_below_ridge: int = 2  # C3
    tile: int = 32  # C4, sgemm32's T
    block_tile_intensity: float = 32.0  # C4, C6: 128 x 128 block tile, FLOP/B
    smem_bandwidth_ratio_min: float = 10.0  # C5: "more than ten times"
    smem_latency_cycles: Tuple[float, float] = (20.0, 30.0)  # C5
    fma_per_shared_read: float = 4.0  # C6
    tensor_core_orders: int = 1  # C8: "an order of magnitude"
    wmma_error_range: Tuple[float, float] = (1e-4, 1e-3)  # C9, against FP32
    wmma_alignment_bytes: int = 32  # C9
    cpu_flop_per_cycle_core: float = 32.0  # C11, AVX-512 + FMA
    small_n: int = 128  # C12: "N < 128"
    gemv_speedup_range: Tuple[float, float] = (5.0, 10.0)  # C13
    gemv_speedup_never: float = 100.0  # C13: "never 100x"
    bank_conflict_ways: float = 32.0  # C14b
    gemm_1024_ms: float = 0.3  # C14d
    orders_vecadd_to_gemm: int = 3  # C2: "a thousandfold"


CHAPTER = ChapterNumbers()


# -- verdicts ----------------------------------------------------------------------------------
@dataclass
class Part:
    """One checked statement of a claim."""

    what: str  # the statement
    verdict: str
    measured: str = ""  # numbers and where they come from
    rule: str = ""  # the threshold that decided
    numbers: Dict[str, float] = field(default_factory=dict)
    missing: str = ""  # for NOT_MEASURED: what would measure it
    from_rows: bool = True  # False: a fact of a kernel's config, which alone measures nothing


@dataclass
class Verdict:
    claim: str
    section: str
    chapter: str
    figure: str
    parts: List[Part]
    device: str = ""

    @property
    def verdict(self) -> str:
        if all(p.verdict == NOT_MEASURED for p in self.parts if p.from_rows):
            return NOT_MEASURED  # a config fact alone is no measurement
        return combine([p.verdict for p in self.parts])

    def numbers(self) -> Dict[str, float]:
        out: Dict[str, float] = {}
        for p in self.parts:
            out.update(p.numbers)
        return out


def combine(verdicts: Sequence[str]) -> str:
    """The worst measured verdict; NOT_MEASURED only when nothing was measured."""
    measured = [v for v in verdicts if v != NOT_MEASURED]
    if not measured:
        return NOT_MEASURED
    return max(measured, key=_SEVERITY.__getitem__)


def same_number(measured: float, chapter: float, rel: float = SAME_NUMBER_REL) -> str:
    """HOLDS when ``measured`` is within ``rel`` of ``chapter``, else OTHER_NUMBER."""
    return HOLDS if abs(measured - chapter) <= rel * abs(chapter) else OTHER_NUMBER


def in_range(measured: float, lo: float, hi: float) -> str:
    return HOLDS if lo <= measured <= hi else OTHER_NUMBER


def orders(ratio: float) -> int:
    """Orders of magnitude of a ratio, rounded (1.5 -> 0, 8 -> 1, 48 -> 2)."""
    return int(round(math.log10(ratio))) if ratio > 0 else 0


def faster(a: pd.Series, b: pd.Series) -> bool:
    """``a`` is faster than ``b`` beyond their noise: a's p80 below b's p20 (or, without
    quantiles, a median FASTER_MIN_GAIN lower)."""
    if pd.notna(a.get("time_p80_s")) and pd.notna(b.get("time_p20_s")):
        return float(a["time_p80_s"]) < float(b["time_p20_s"])
    return float(a["time_median_s"]) < (1 - FASTER_MIN_GAIN) * float(b["time_median_s"])


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
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    return f"{m}³" if m == n == k else f"{m}×{n}×{k}"


def where(row: pd.Series) -> str:
    return f"{row['variant']} {row['precision']} {shape(row)}"


def not_measured(what: str, missing: str, rule: str = "") -> Part:
    return Part(what, NOT_MEASURED, rule=rule, missing=missing)


# -- what the rows hold ------------------------------------------------------------------------
class Evidence:
    """Selections of one dataset's rows that the claims share."""

    def __init__(self, ds: data.Dataset):
        self.ds = ds
        self.rows = ds.rows
        self.gpu_ceil, self.cpu_ceil = ds.gpu_ceilings, ds.cpu_ceilings
        chapter = {c.stem: c for c in data.device_configs()}
        self.chapter_device = chapter.get(CHAPTER_DEVICE)

    # rows -------------------------------------------------------------------------------
    def device_rows(self, kind: str = "gpu", statuses: Sequence[str] = ("ok",)) -> pd.DataFrame:
        device = (self.gpu_ceil if kind == "gpu" else self.cpu_ceil).device
        r = self.rows
        if device is None:
            return r.iloc[:0]
        return r[(r["kind"] == kind) & (r["device"] == device) & r["status"].isin(list(statuses))]

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
        """The row of the largest problem (m*n*k), fastest on a tie."""
        if rows.empty:
            return None
        r = rows.assign(_size=rows["m"].astype(float) * rows["n"].astype(float) * rows["k"].astype(float))
        return r.sort_values(["_size", "time_median_s"], ascending=[False, True], kind="stable").iloc[0]

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
        pick = lambda r: r[(r["run_id"] == best["run_id"]) & (r["m"] == best["m"]) & (r["n"] == best["n"])
                           & (r["k"] == best["k"])].iloc[0]
        return pick(ra), pick(rb)

    # ceilings ---------------------------------------------------------------------------
    def peak(self, precision: str, kind: str = "gpu") -> Optional[pd.Series]:
        """The GEMM row with the best throughput of ``precision`` on the primary device (GEMMs
        only: a probe's FLOP count is not a GEMM's)."""
        rows = self.peaks_rows(kind)
        rows = rows[rows["precision"] == precision]
        return None if rows.empty else rows.iloc[0]

    def peaks_rows(self, kind: str = "gpu") -> pd.DataFrame:
        """Per precision, the fastest GEMM row (op gemm) of the primary device."""
        rows = self.device_rows(kind)
        rows = rows[(rows["op"] == data.GEMM) & rows["tflops"].notna() & (rows["tflops"] > 0)]
        rows = rows.sort_values(["precision", "tflops", "variant"], ascending=[True, False, True], kind="stable")
        return rows.groupby("precision", sort=True).head(1)

    def peaks(self, kind: str = "gpu") -> Dict[str, float]:
        r = self.peaks_rows(kind)
        return dict(zip(r["precision"], r["tflops"].astype(float)))

    def bandwidth(self, kind: str = "gpu") -> Tuple[float, str]:
        """Memory roof in GB/s and where it comes from."""
        ceil = self.gpu_ceil if kind == "gpu" else self.cpu_ceil
        if ceil.measured_bandwidth_gbs is not None:
            row = self.largest(self.op("copy", kind))
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

    @staticmethod
    def intensity_used(row: pd.Series) -> Tuple[Optional[float], str]:
        """DRAM intensity from hardware counters when the row has them, else the model."""
        if pd.notna(row.get("intensity_dram")):
            return float(row["intensity_dram"]), "measured DRAM intensity (counters)"
        if pd.notna(row.get("intensity_model")):
            return float(row["intensity_model"]), "modeled DRAM intensity (intensity_model; no counters)"
        return None, "no intensity"

    @property
    def gpu_label(self) -> str:
        return self.gpu_ceil.device or "no GPU rows"

    @property
    def cpu_label(self) -> str:
        return self.cpu_ceil.device or "no CPU rows"


def _ridge_text(ev: Evidence, precision: str) -> Tuple[Optional[float], str]:
    r = ev.ridge(precision)
    if r is None:
        return None, ""
    ridge, peak, bw, src = r
    return ridge, (f"I* = {f(peak['tflops'])} TFLOP/s ({where(peak)}) / {f(bw / 1e3)} TB/s ({src}) "
                   f"= {f(ridge)} FLOP/B")


def _need(what: str, experiment: str) -> str:
    return f"rows of {what}: python run.py +experiment={experiment}"


# -- the claims ----------------------------------------------------------------------------------
def c1(ev: Evidence) -> List[Part]:
    parts = []
    for p in ("fp32", "tf32"):
        chapter = ev.chapter_ridge(p)
        ridge, text = _ridge_text(ev, p)
        what = f"ridge I* = P / BW for {p.upper()} (chapter {f(chapter)} FLOP/B on the H100)"
        if ridge is None or chapter is None:
            parts.append(not_measured(what, _need(f"{p} GEMMs (cuBLAS peak)", "cublas_square")))
            continue
        parts.append(Part(what, same_number(ridge, chapter), text,
                          f"same number: within ±{SAME_NUMBER_REL:.0%} of {f(chapter)}",
                          {f"ridge_{p}": ridge, f"chapter_ridge_{p}": chapter}))
    # the model's bound: no measured time below T = max(FLOPs / P, bytes / BW)
    what = "T = max(FLOPs/P, bytes/BW) bounds every measured GPU time (GEMM, GEMV, vector add)"
    rows = ev.device_rows("gpu")
    rows = rows[rows["op"].isin(DRAM_OPS) & rows["time_median_s"].notna() & (rows["time_median_s"] > 0)
                & (rows["cache"] != "warm") & (rows["bytes_min"] > 0)]
    peaks = ev.peaks("gpu")
    rows = rows[rows["precision"].isin(list(peaks))]
    if rows.empty or ev.measured_bandwidth("gpu") is None:
        parts.append(not_measured(what, _need("GPU GEMMs and the copy probe", "claims_memory_roof")))
        return parts
    bw = ev.measured_bandwidth("gpu") * 1e9
    p_flops = rows["precision"].map(lambda p: peaks[p] * 1e12)
    roof_s = pd.concat([rows["flops"] / p_flops, rows["bytes_min"] / bw], axis=1).max(axis=1)
    ratio = rows["time_median_s"] / roof_s
    below = rows[ratio < 1 - ROOF_SLACK]
    worst = rows.loc[ratio.idxmin()]
    text = (f"{len(rows)} rows (cold L2); closest to its roof: {where(worst)} at "
            f"{f(1 / ratio.min() * 100)} % of T's speed")
    if not below.empty:
        text += f"; {len(below)} rows faster than T, e.g. {where(below.iloc[0])}"
    parts.append(Part(what, HOLDS if below.empty else DOES_NOT_HOLD, text,
                      f"no row faster than T by more than {ROOF_SLACK:.0%} (P: measured peak per "
                      f"precision; BW: copy probe)",
                      {"roofline_rows": float(len(rows)), "roofline_violations": float(len(below)),
                       "roofline_best_fraction": float(1 / ratio.min())}))
    return parts


def _gemv_rows(ev: Evidence, kind: str, precision: str = "fp32") -> pd.DataFrame:
    rows = ev.op("gemv", kind, precision)
    if rows.empty:  # cuBLAS GEMM points with n = 1 are GEMVs too
        g = ev.op("gemm", kind, precision)
        rows = g[(g["n"] == 1) | (g["m"] == 1)]
    return rows


def c2(ev: Evidence) -> List[Part]:
    parts: List[Part] = []
    bw_gbs = ev.measured_bandwidth("gpu")
    ridge_info = ev.ridge("fp32")
    intensities: Dict[str, float] = {}
    chapter_ridge = ev.chapter_ridge("fp32")
    for op in tables.CHAPTER_OPS:
        chapter_i = op.intensity(1, op.square_n or 1, 1)
        if op.op == "gemv":
            rows = _gemv_rows(ev, "gpu")
        elif op.square_n is not None:
            rows = data.square(ev.op(op.op, "gpu", "fp32"))
            rows = rows[rows["n"] == op.square_n]
            rows = rows.sort_values("time_median_s").head(1)
        else:
            rows = ev.op(op.op, "gpu", "fp32")
        row = ev.largest(rows)
        what_i = f"{op.label}: I = {op.flops} / {op.bytes_min} = {f(chapter_i)} FLOP/B"
        chapter_bound = "bandwidth" if chapter_ridge is None or chapter_i < chapter_ridge else "compute"
        what_b = f"{op.label} is {chapter_bound}-bound"
        if row is None:
            missing = _need(f"GPU {op.op} in FP32", "claims_cpu_gpu" if op.op == "gemm" else "claims_memory_roof")
            parts += [not_measured(what_i, missing), not_measured(what_b, missing)]
            continue
        i = float(row["flops"]) / float(row["bytes_min"])
        intensities[op.op] = i
        note = " (one add per element: 1 FLOP, not 2)" if op.op == "vecadd" else ""
        parts.append(Part(what_i, same_number(i, chapter_i),
                          f"{where(row)}: {f(row['flops'])} FLOP / {f(row['bytes_min'])} B = {f(i)} FLOP/B{note}",
                          f"same number: within ±{SAME_NUMBER_REL:.0%}", {f"intensity_{op.op}": i}))
        if ridge_info is None or bw_gbs is None:
            parts.append(not_measured(what_b, _need("the FP32 peak and the copy probe", "claims_memory_roof")))
            continue
        ridge = ridge_info[0]
        gbs = float(row["bytes_min"]) / float(row["time_median_s"]) / 1e9
        frac = gbs / bw_gbs
        if chapter_bound == "bandwidth":
            ok = i < ridge and frac >= BANDWIDTH_BOUND_FRACTION
            rule = f"I < I* and achieved bytes/time >= {BANDWIDTH_BOUND_FRACTION:.0%} of the copy bandwidth"
        else:
            ok = i > ridge
            rule = "I > I* (measured FP32 ridge)"
        parts.append(Part(what_b, HOLDS if ok else DOES_NOT_HOLD,
                          f"I = {f(i)} vs I* = {f(ridge)} FLOP/B; {f(gbs)} GB/s = {f(frac * 100)} % of the copy "
                          f"bandwidth; {f(row['tflops'])} TFLOP/s", rule,
                          {f"bandwidth_fraction_{op.op}": frac}))
    what = "a thousandfold between vector add and GEMM N = 1024"
    if "vecadd" in intensities and "gemm" in intensities:
        ratio = intensities["gemm"] / intensities["vecadd"]
        parts.append(Part(what, HOLDS if orders(ratio) == CHAPTER.orders_vecadd_to_gemm else OTHER_NUMBER,
                          f"I(GEMM) / I(vector add) = {f(ratio)}",
                          f"round(log10 ratio) == {CHAPTER.orders_vecadd_to_gemm}", {"intensity_ratio": ratio}))
    else:
        parts.append(not_measured(what, _need("GPU vector add and GEMM N = 1024", "claims_memory_roof")))
    return parts


def _ladder_row(ev: Evidence, variant: str) -> Optional[pd.Series]:
    """The variant's FP32 row at its largest square N, where cuBLAS ran in the same run if any."""
    rows = data.square(ev.variant(variant, "gpu", "fp32"))
    return ev.largest(rows)


def c3(ev: Evidence) -> List[Part]:
    row = _ladder_row(ev, "naive")
    whats = [f"naive GEMM: I = {f(CHAPTER.naive_intensity)} FLOP/B",
             f"{CHAPTER.naive_orders_below_ridge} orders of magnitude below the FP32 ridge",
             "reaches only a few percent of peak",
             "L1/L2 win back part of the traffic"]
    if row is None:
        return [not_measured(w, _need("the naive stage", "claims_ladder")) for w in whats]
    i, source = ev.intensity_used(row)
    parts = [Part(whats[0], same_number(i, CHAPTER.naive_intensity) if i else NOT_MEASURED,
                  f"{where(row)}: {f(i)} FLOP/B ({source})", f"same number: within ±{SAME_NUMBER_REL:.0%}",
                  {"naive_intensity": i or float("nan")})]
    r = ev.ridge("fp32")
    peak = ev.peak("fp32")
    if r is None or i is None:
        parts.append(not_measured(whats[1], _need("the FP32 peak", "cublas_square")))
    else:
        ratio = r[0] / i
        parts.append(Part(whats[1], HOLDS if orders(ratio) == CHAPTER.naive_orders_below_ridge else OTHER_NUMBER,
                          f"I* / I = {f(r[0])} / {f(i)} = {f(ratio)}",
                          f"round(log10(I*/I)) == {CHAPTER.naive_orders_below_ridge}", {"naive_ridge_ratio": ratio}))
    if peak is None:
        parts.append(not_measured(whats[2], _need("the FP32 peak", "cublas_square")))
    else:
        pct = 100 * float(row["tflops"]) / float(peak["tflops"])
        parts.append(Part(whats[2], HOLDS if pct <= FEW_PERCENT_MAX else DOES_NOT_HOLD,
                          f"{f(row['tflops'])} TFLOP/s = {f(pct)} % of the FP32 peak {f(peak['tflops'])} "
                          f"({where(peak)})", f"at most {FEW_PERCENT_MAX:g} % of the measured FP32 peak",
                          {"naive_pct_of_peak": pct}))
    bw = ev.measured_bandwidth("gpu")
    if pd.notna(row.get("intensity_dram")) and pd.notna(row.get("intensity_model")):
        won = float(row["intensity_dram"]) > float(row["intensity_model"])
        parts.append(Part(whats[3], HOLDS if won else DOES_NOT_HOLD,
                          f"DRAM intensity {f(row['intensity_dram'])} (counters) vs modeled {f(row['intensity_model'])}",
                          "counters: measured DRAM intensity above the no-reuse model", {}))
    elif bw is None or i is None:
        parts.append(not_measured(whats[3], _need("the copy probe", "claims_memory_roof")))
    else:
        roof = i * bw / 1e3  # TFLOP/s if every operand came from DRAM
        won = float(row["tflops"]) > roof
        parts.append(Part(whats[3], HOLDS if won else DOES_NOT_HOLD,
                          f"{f(row['tflops'])} TFLOP/s against {f(roof)} TFLOP/s if every operand came from "
                          f"DRAM (I·BW)", "achieved above I·BW at the modeled intensity: caches serve part of it",
                          {"naive_over_dram_roof": float(row["tflops"]) / roof}))
    return parts


def _define(variant: str, name: str) -> Optional[float]:
    try:
        v = load_variant(variant)
        return float(v.cuda.defines[name]) if v.cuda is not None and name in v.cuda.defines else None
    except Exception:
        return None


def _bandwidth_bound_part(ev: Evidence, row: pd.Series, what: str) -> Part:
    i, source = ev.intensity_used(row)
    bw = ev.measured_bandwidth("gpu")
    r = ev.ridge("fp32")
    if i is None or bw is None or r is None:
        return not_measured(what, _need("the copy probe and the FP32 peak", "claims_memory_roof"))
    roof = min(float(r[1]["tflops"]), i * bw / 1e3)
    frac = float(row["tflops"]) / roof
    ok = i < r[0] and frac >= BANDWIDTH_BOUND_FRACTION
    text = (f"{where(row)}: I = {f(i)} ({source}) vs I* = {f(r[0])}; {f(row['tflops'])} TFLOP/s = "
            f"{f(frac * 100)} % of its roof min(P, I·BW) = {f(roof)}")
    if i < r[0] and not ok:
        text += ": under the ridge, but far from the bandwidth roof; DRAM bandwidth is not what limits it"
    return Part(what, HOLDS if ok else DOES_NOT_HOLD, text,
                f"I < I* and achieved >= {BANDWIDTH_BOUND_FRACTION:.0%} of min(P, I·BW)",
                {"roof_fraction_" + str(row["variant"]): frac})


def c4(ev: Evidence) -> List[Part]:
    parts = []
    row = _ladder_row(ev, "smem_tiled")
    tile = _define("smem_tiled", "TILE")
    what = f"T×T tiles: I = T/4, {f(CHAPTER.tile / 4)} FLOP/B at T = {CHAPTER.tile}"
    if row is None:
        parts.append(not_measured(what, _need("smem_tiled", "claims_ladder")))
    else:
        i = float(row["intensity_model"]) if pd.notna(row["intensity_model"]) else None
        parts.append(Part(what, same_number(i, CHAPTER.tile / 4) if i else NOT_MEASURED,
                          f"{where(row)} (TILE = {f(tile)}): modeled I = {f(i)} FLOP/B",
                          f"same number: within ±{SAME_NUMBER_REL:.0%}", {"smem_tiled_intensity": i or float("nan")}))
    what = "still under the FP32 ridge"
    r = ev.ridge("fp32")
    if row is None or r is None:
        parts.append(not_measured(what, _need("smem_tiled and the FP32 peak", "claims_ladder")))
    else:
        i, source = ev.intensity_used(row)
        parts.append(Part(what, HOLDS if i < r[0] else DOES_NOT_HOLD,
                          f"I = {f(i)} ({source}) vs I* = {f(r[0])} FLOP/B (chapter {f(ev.chapter_ridge('fp32'))})",
                          "I < I* (measured)", {"smem_tiled_ridge_ratio": r[0] / i}))
    what = "the textbook kernel is still bandwidth-bound"
    parts.append(_bandwidth_bound_part(ev, row, what) if row is not None
                 else not_measured(what, _need("smem_tiled", "claims_ladder")))
    what = f"a 128×128 block tile gives {f(CHAPTER.block_tile_intensity)} FLOP/B"
    rb = _ladder_row(ev, "register_blocked")
    if rb is None or pd.isna(rb["intensity_model"]):
        parts.append(not_measured(what, _need("register_blocked", "claims_ladder")))
    else:
        i = float(rb["intensity_model"])
        parts.append(Part(what, same_number(i, CHAPTER.block_tile_intensity),
                          f"{where(rb)} ({f(_define('register_blocked', 'BM'))}×{f(_define('register_blocked', 'BN'))}, "
                          f"BK = {f(_define('register_blocked', 'BK'))}): modeled I = {f(i)} FLOP/B; shared memory "
                          f"{f(rb['smem_bytes'])} B per block", f"same number: within ±{SAME_NUMBER_REL:.0%}",
                          {"block_tile_intensity": i}))
    return parts


def c5(ev: Evidence) -> List[Part]:
    parts = []
    what = f"shared memory has more than {f(CHAPTER.smem_bandwidth_ratio_min)}× the device-memory bandwidth"
    row = ev.largest(ev.variant("smem_bandwidth"))
    bw = ev.measured_bandwidth("gpu")
    if row is None or bw is None:
        parts.append(not_measured(what, _need("smem_bandwidth and the copy probe", "claims_smem") +
                                  " and +experiment=claims_memory_roof"))
    else:
        smem = float(row["bytes_min"]) / float(row["time_median_s"]) / 1e9
        ratio = smem / bw
        v = HOLDS if ratio > CHAPTER.smem_bandwidth_ratio_min else OTHER_NUMBER if ratio >= 2 else DOES_NOT_HOLD
        parts.append(Part(what, v, f"{f(smem / 1e3)} TB/s (smem_bandwidth, {f(row['sm_clock_max_mhz'])} MHz) / "
                                   f"{f(bw / 1e3)} TB/s (copy) = {f(ratio)}×",
                          f"ratio > {f(CHAPTER.smem_bandwidth_ratio_min)}: holds; 2 to 10: another number; < 2: does not hold",
                          {"smem_bandwidth_gbs": smem, "smem_to_dram_ratio": ratio}))
    lo, hi = CHAPTER.smem_latency_cycles
    what = f"shared-memory latency of {f(lo)}–{f(hi)} cycles"
    row = ev.largest(ev.variant("smem_latency"))
    cycles = extra(row).get("cycles_per_load") if row is not None else None
    if cycles is None:
        parts.append(not_measured(what, _need("smem_latency", "claims_smem")))
    else:
        parts.append(Part(what, in_range(cycles, lo, hi),
                          f"{f(cycles)} SM cycles per dependent load (pointer chase, clock64)",
                          f"within {f(lo)}–{f(hi)} cycles", {"smem_latency_cycles": float(cycles)}))
    return parts


def c6(ev: Evidence) -> List[Part]:
    parts = []
    tm, tn = _define("register_blocked", "TM"), _define("register_blocked", "TN")
    what = f"8×8 outputs per thread: {f(CHAPTER.fma_per_shared_read)} FMA per shared read"
    if tm and tn:
        per = tm * tn / (tm + tn)
        parts.append(Part(what, same_number(per, CHAPTER.fma_per_shared_read),
                          f"register_blocked's TM × TN = {f(tm)} × {f(tn)}: {f(tm * tn)} FMA per {f(tm + tn)} "
                          f"shared reads = {f(per)} (by construction, from conf/variant/register_blocked.yaml)",
                          "TM·TN/(TM+TN) within ±25 %", {"fma_per_shared_read": per}, from_rows=False))
    else:
        parts.append(not_measured(what, "conf/variant/register_blocked.yaml with TM, TN"))
    row = _ladder_row(ev, "register_blocked")
    r = ev.ridge("fp32")
    chapter_ratio = CHAPTER.block_tile_intensity / ev.chapter_ridge("fp32") if ev.chapter_ridge("fp32") else None
    what = (f"128×128 block tile: DRAM intensity ≈ {f(CHAPTER.block_tile_intensity)} FLOP/B, just over the ridge "
            f"(chapter: {f(chapter_ratio)}× I*)")
    if row is None or r is None:
        parts.append(not_measured(what, _need("register_blocked and the FP32 peak", "claims_ladder")))
    else:
        i, source = ev.intensity_used(row)
        ratio = i / r[0]
        v = DOES_NOT_HOLD if ratio <= 1 else same_number(ratio, chapter_ratio)
        parts.append(Part(what, v, f"I = {f(i)} ({source}) = {f(ratio)}× the measured I* {f(r[0])}",
                          f"I > I*; I/I* within ±{SAME_NUMBER_REL:.0%} of the chapter's {f(chapter_ratio)}",
                          {"register_blocked_ridge_ratio": ratio}))
    what = "register blocking is faster than the shared-memory tile"
    pair = ev.pair("register_blocked", "smem_tiled", "fp32")
    if pair is None:
        parts.append(not_measured(what, _need("register_blocked and smem_tiled in one run", "claims_ladder")))
    else:
        a, b = pair
        pct = a.get("pct_of_baseline")
        parts.append(Part(what, HOLDS if faster(a, b) else DOES_NOT_HOLD,
                          f"{shape(a)}: {f(a['tflops'])} vs {f(b['tflops'])} TFLOP/s "
                          f"({f(b['time_median_s'] / a['time_median_s'])}×; {f(pct)} % of cuBLAS)",
                          "faster beyond noise: p80 below the other's p20",
                          {"register_blocked_speedup": float(b["time_median_s"] / a["time_median_s"])}))
    return parts


def c7(ev: Evidence) -> List[Part]:
    what = "double buffering with cp.async hides load latency (faster than the same tile without it)"
    pair = ev.pair("double_buffered", "register_blocked", "fp32")
    if pair is None:
        return [not_measured(what, _need("double_buffered and register_blocked in one run", "claims_ladder"))]
    a, b = pair
    speedup = float(b["time_median_s"] / a["time_median_s"])
    return [Part(what, HOLDS if faster(a, b) else DOES_NOT_HOLD,
                 f"{shape(a)} FP32: double_buffered {f(a['tflops'])} vs register_blocked {f(b['tflops'])} TFLOP/s "
                 f"({f(speedup)}×)", "faster beyond noise: p80 below the other's p20",
                 {"double_buffer_speedup": speedup})]


def c8(ev: Evidence) -> List[Part]:
    parts = []
    chapter = ev.chapter_device.peak_tflops if ev.chapter_device else {}
    measured = {}
    for p in ("fp32", "tf32", "bf16", "fp16"):
        what = f"{p.upper()} peak ≈ {f(chapter.get(p))} TFLOP/s (H100 datasheet)"
        row = ev.peak(p)
        if row is None or p not in chapter:
            parts.append(not_measured(what, _need(f"{p} GEMMs", "cublas_square")))
            continue
        measured[p] = float(row["tflops"])
        clock = f", SM clock {f(row['sm_clock_min_mhz'])}–{f(row['sm_clock_max_mhz'])} MHz" \
            if pd.notna(row.get("sm_clock_min_mhz")) else ""
        parts.append(Part(what, same_number(measured[p], chapter[p]),
                          f"{f(measured[p])} TFLOP/s = {f(100 * measured[p] / chapter[p])} % ({where(row)}{clock})",
                          f"same number: within ±{SAME_NUMBER_REL:.0%}", {f"peak_{p}": measured[p]}))
    what = "tensor cores raise P by about an order of magnitude over FP32"
    if "fp32" in measured and len(measured) > 1:
        ratios = {p: v / measured["fp32"] for p, v in measured.items() if p != "fp32"}
        ok = all(orders(r) == CHAPTER.tensor_core_orders for r in ratios.values())
        parts.append(Part(what, HOLDS if ok else OTHER_NUMBER,
                          ", ".join(f"{p.upper()}/FP32 = {f(r)}×" for p, r in ratios.items()),
                          f"round(log10 ratio) == {CHAPTER.tensor_core_orders} for each",
                          {f"tensor_core_ratio_{p}": r for p, r in ratios.items()}))
    else:
        parts.append(not_measured(what, _need("FP32 and tensor-core GEMMs", "cublas_square")))
    return parts


def c9(ev: Evidence) -> List[Part]:
    parts = []
    lo, hi = CHAPTER.wmma_error_range
    row = ev.largest(ev.variant("wmma_layout", precision="fp16", timed=False))
    x = extra(row) if row is not None else {}
    what = f"wmma_gemm's relative error against FP32 is {lo:g} to {hi:g}"
    if "rel_error_vs_fp64_of_fp32_data" not in x:
        parts.append(not_measured(what, _need("wmma_layout", "claims_tensor_cores")))
    else:
        e32 = float(x["rel_error_vs_fp64_of_fp32_data"])
        parts.append(Part(what, in_range(e32, lo, hi),
                          f"{shape(row)}: {f(e32)} against the product of the FP32 data the halves were rounded "
                          f"from; {f(x.get('rel_error_vs_fp64_of_fp16_inputs'))} against the exact product of the "
                          f"halves (accumulation alone); FP32 cuBLAS on the FP32 data: "
                          f"{f(x.get('rel_error_fp32_sgemm_vs_fp64_of_fp32_data'))}",
                          f"within {f(lo)}–{f(hi)}", {"wmma_rel_error_vs_fp32": e32}))
    what = "B declared col_major while row-major in memory: silently transposed"
    checks = []
    for entry, key in (("wmma_gemm_bcol_flag", "rel_error_vs_a_times_tile_transposed_b"),
                       ("wmma_gemm_bcol", "rel_error_vs_a_times_b_transposed")):
        y = x.get(entry)
        if isinstance(y, dict) and key in y:
            checks.append((entry, key, y))
    if not checks:
        parts.append(not_measured(what, _need("wmma_layout", "claims_tensor_cores")))
    else:
        ok = all(y.get("ran_without_error") and not y.get("nonfinite") and
                 y["rel_error_vs_a_times_b"] >= WRONG_MIN_REL_ERROR and y[key] <= SAME_PRODUCT_MAX_REL_ERROR
                 for _, key, y in checks)
        text = "; ".join(f"{entry}: no error raised, rel. error {f(y['rel_error_vs_a_times_b'])} against A·B, "
                         f"{f(y[key])} against {key.replace('rel_error_vs_', '').replace('_', ' ')}, "
                         f"std ratio {f(y.get('std_ratio_to_right_result'))}" for entry, key, y in checks)
        parts.append(Part(what, HOLDS if ok else DOES_NOT_HOLD, text,
                          f"runs without error, >= {WRONG_MIN_REL_ERROR:g} from A·B and <= "
                          f"{SAME_PRODUCT_MAX_REL_ERROR:g} from the transposed product", {}))
    what = f"pointers must be {CHAPTER.wmma_alignment_bytes}-byte aligned, or it crashes or takes a slow path"
    row = ev.largest(ev.variant("wmma_alignment", precision="fp16", timed=False))
    offs = extra(row).get("offsets", {}) if row is not None else {}
    offs = {int(k): v for k, v in offs.items() if isinstance(v, dict) and v.get("outcome") != "unknown"}
    if not offs:
        parts.append(not_measured(what, _need("wmma_alignment", "claims_tensor_cores")))
    else:
        bad = {o: v for o, v in offs.items() if o % CHAPTER.wmma_alignment_bytes}
        hurt = {o: v["outcome"] in ("error", "wrong") or (v.get("slowdown") or 1) >= SLOWDOWN_MIN for o, v in bad.items()}
        text = "; ".join(f"{o} B: " + (f"{v['outcome']}" + (f" ({v.get('error', '')[:80]})" if v.get("error") else "")
                                       + (f", {f(v.get('slowdown'))}× the aligned time" if v.get("slowdown") else ""))
                         for o, v in sorted(offs.items()))
        v = HOLDS if hurt and all(hurt.values()) else OTHER_NUMBER if any(hurt.values()) else DOES_NOT_HOLD
        parts.append(Part(what, v, f"A and B shifted by {text}",
                          f"every offset that breaks {CHAPTER.wmma_alignment_bytes}-byte alignment crashes, is wrong "
                          f"or >= {SLOWDOWN_MIN:g}× slower: holds; only some: another number (a weaker "
                          f"requirement); none: does not hold",
                          {f"wmma_offset_{o}_hurt": float(h) for o, h in hurt.items()}))
    return parts


HAND_WRITTEN_MMA = ("mma_sync", "wgmma_tma", "wgmma_ws")
WMMA_STAGES = ("wmma", "wmma_tiled")


def _best(ev: Evidence, variants: Sequence[str], precision: str, n: Optional[int] = None) -> Optional[pd.Series]:
    rows = pd.concat([data.square(ev.variant(v, "gpu", precision)) for v in variants])
    if n is not None:
        rows = rows[rows["n"] == n]
    return None if rows.empty else rows.sort_values("time_median_s").iloc[0]


def c10(ev: Evidence) -> List[Part]:
    what = "mma.sync / wgmma are faster still than WMMA"
    w = _best(ev, WMMA_STAGES, "fp16")
    h = _best(ev, HAND_WRITTEN_MMA, "fp16", int(w["n"]) if w is not None else None)
    if w is None or h is None:
        return [not_measured(what, _need("wmma, wmma_tiled, mma_sync, wgmma_*", "claims_tensor_cores"))]
    cub = data.best_cublas(ev.device_rows("gpu"))
    cub = cub[(cub["precision"] == "fp16") & (cub["n"] == h["n"]) & (cub["m"] == h["n"]) & (cub["k"] == h["n"])]
    lib = f"; cuBLAS {f(cub['cublas_tflops'].median())} TFLOP/s, so the best hand-written kernel is at " \
          f"{f(100 * h['tflops'] / cub['cublas_tflops'].median())} % of it" if not cub.empty else ""
    return [Part(what, HOLDS if faster(h, w) else DOES_NOT_HOLD,
                 f"FP16 {shape(h)}: {h['variant']} {f(h['tflops'])} vs {w['variant']} {f(w['tflops'])} TFLOP/s "
                 f"({f(w['time_median_s'] / h['time_median_s'])}×){lib}",
                 "the fastest mma.sync/wgmma stage faster beyond noise than the fastest WMMA stage",
                 {"mma_over_wmma": float(w["time_median_s"] / h["time_median_s"])})]


def _host_facts(ev: Evidence) -> dict:
    rows = ev.device_rows("cpu")
    for _, r in rows[rows["backend"] == "cpu_probe"].iterrows():
        x = extra(r)
        if x.get("cpu_max_mhz"):
            return x
    return {}


def c11(ev: Evidence) -> List[Part]:
    parts = []
    what = f"CPU: AVX-512 + FMA ≈ {f(CHAPTER.cpu_flop_per_cycle_core)} FLOP per core per cycle (FP32)"
    cpu = ev.peak("fp32", "cpu")
    facts = _host_facts(ev)
    if cpu is None or not facts.get("cpu_max_mhz"):
        parts.append(not_measured(what, _need("CPU BLAS FP32 and the host facts of a cpu_probe row",
                                              "claims_cpu_gpu") + " and +experiment=claims_memory_roof"))
    else:
        threads = int(cpu["blas_threads"]) if pd.notna(cpu.get("blas_threads")) and str(cpu["blas_threads"]).strip() \
            else facts.get("cpus_allowed")
        cores = min(threads, facts.get("physical_cores_allowed") or threads)
        ghz = facts["cpu_max_mhz"] / 1e3
        per = float(cpu["tflops"]) * 1e12 / (cores * ghz * 1e9)
        parts.append(Part(what, same_number(per, CHAPTER.cpu_flop_per_cycle_core),
                          f"{cpu['device']}: {f(cpu['tflops'] * 1e3)} GFLOP/s ({where(cpu)}, {threads} BLAS threads) "
                          f"/ ({cores} cores × {f(ghz)} GHz, {facts.get('cpu_mhz_source')}) = {f(per)} FLOP/cycle/core; "
                          f"AVX-512F: {facts.get('avx512f')}, FMA: {facts.get('fma')}",
                          f"same number: within ±{SAME_NUMBER_REL:.0%} (clock: the highest the host reports)",
                          {"cpu_flop_per_cycle_core": per, "cpu_gflops": float(cpu["tflops"]) * 1e3}))
    what = "one GPU has tens of TFLOP/s in FP32"
    gpu = ev.peak("fp32")
    if gpu is None:
        parts.append(not_measured(what, _need("FP32 GEMMs on the GPU", "cublas_square")))
    else:
        lo, hi = TENS_OF_TFLOPS
        g = float(gpu["tflops"])
        text = f"{f(g)} TFLOP/s ({where(gpu)})"
        if cpu is not None:
            text += f" = {f(g / float(cpu['tflops']))}× the CPU BLAS's {f(float(cpu['tflops']) * 1e3)} GFLOP/s"
        parts.append(Part(what, HOLDS if lo <= g < hi else DOES_NOT_HOLD, text, f"{f(lo)} <= P < {f(hi)} TFLOP/s",
                          {"gpu_fp32_tflops": g}))
    what = "an order of magnitude more with tensor cores"
    tc = [ev.peak(p) for p in ("fp16", "bf16")]
    tc = [r for r in tc if r is not None]
    if gpu is None or not tc:
        parts.append(not_measured(what, _need("FP16/BF16 GEMMs", "cublas_square")))
    else:
        best = max(tc, key=lambda r: float(r["tflops"]))
        ratio = float(best["tflops"]) / float(gpu["tflops"])
        parts.append(Part(what, HOLDS if orders(ratio) == CHAPTER.tensor_core_orders else OTHER_NUMBER,
                          f"{f(best['tflops'])} TFLOP/s ({where(best)}) = {f(ratio)}× FP32",
                          f"round(log10 ratio) == {CHAPTER.tensor_core_orders}", {"tensor_core_ratio": ratio}))
    return parts


def _by_n(rows: pd.DataFrame) -> pd.Series:
    """Median time per N over square rows (runs pooled)."""
    rows = data.square(rows)
    return rows.groupby(rows["n"].astype(int))["time_median_s"].median()


def c12(ev: Evidence) -> List[Part]:
    what = f"for N < {CHAPTER.small_n} the CPU is often faster (launch and transfers dominate)"
    cpu = _by_n(ev.variant("cpu_blas", "cpu", "fp32"))
    e2e = _by_n(ev.op("gemm_e2e", "gpu", "fp32"))
    kern = data.best_cublas(ev.device_rows("gpu"))
    kern = kern[(kern["precision"] == "fp32") & (kern["m"] == kern["n"]) & (kern["n"] == kern["k"])]
    kern = kern.groupby(kern["n"].astype(int))["cublas_time_s"].median() if not kern.empty else pd.Series(dtype=float)
    common = sorted(set(cpu.index) & set(e2e.index))
    small = [n for n in common if n < CHAPTER.small_n]
    if not small:
        return [not_measured(what, _need("CPU BLAS and the GPU end to end (gemm_e2e_gpu) at N < 128",
                                         "claims_cpu_gpu"))]
    cpu_wins = [n for n in small if cpu[n] < e2e[n]]
    share = len(cpu_wins) / len(small)
    # crossover: smallest common N from which the GPU (end to end) stays faster
    gpu_faster = [e2e[n] < cpu[n] for n in common]
    cross = None
    if gpu_faster and gpu_faster[-1]:
        i = len(gpu_faster)
        while i > 0 and gpu_faster[i - 1]:
            i -= 1
        cross = common[i]
    overhead = {n: 1 - kern[n] / e2e[n] for n in small if n in kern.index}
    text = (f"CPU faster at {len(cpu_wins)} of {len(small)} sizes below {CHAPTER.small_n} "
            f"({', '.join(f'N={n}: CPU {f(cpu[n] * 1e6)} µs vs GPU {f(e2e[n] * 1e6)} µs' for n in small)})")
    if overhead:
        text += f"; launch + transfers = {f(100 * min(overhead.values()))}–{f(100 * max(overhead.values()))} % of the GPU's time"
    text += f"; GPU (end to end) faster from N = {cross}" if cross is not None else "; the GPU never overtakes"
    if share < MAJORITY:
        v = DOES_NOT_HOLD
    elif cross is not None and CHAPTER.small_n // 2 < cross <= 2 * CHAPTER.small_n:
        v = HOLDS
    else:
        v = OTHER_NUMBER
    if v != DOES_NOT_HOLD and overhead and min(overhead.values()) < 0.5:
        text += " (overheads are not the larger part at every such N)"
    return [Part(what, v, text,
                 f"CPU faster at >= {MAJORITY:.0%} of the N < {CHAPTER.small_n}; crossover within "
                 f"({CHAPTER.small_n // 2}, {2 * CHAPTER.small_n}]: holds, elsewhere: another number",
                 {"cpu_wins_small_share": share, "crossover_n": float(cross) if cross else float("nan"),
                  "gpu_overhead_min": min(overhead.values()) if overhead else float("nan")})]


def c13(ev: Evidence) -> List[Part]:
    lo, hi = CHAPTER.gemv_speedup_range
    what = f"GEMV: the GPU's speedup is its bandwidth ratio, {f(lo)}–{f(hi)}×, never {f(CHAPTER.gemv_speedup_never)}×"
    g, c = _gemv_rows(ev, "gpu"), _gemv_rows(ev, "cpu")
    keys = ["m", "n", "k"]
    common = g.merge(c[keys].drop_duplicates(), on=keys)
    row_g = ev.largest(common)
    if row_g is None:
        return [not_measured(what, _need("GEMV on the GPU and the CPU at one shape", "claims_memory_roof"))]
    row_c = c[(c["m"] == row_g["m"]) & (c["n"] == row_g["n"]) & (c["k"] == row_g["k"])].sort_values("time_median_s").iloc[0]
    speedup = float(row_c["time_median_s"] / row_g["time_median_s"])
    gbw, cbw = ev.measured_bandwidth("gpu"), ev.measured_bandwidth("cpu")
    text = (f"{shape(row_g)} FP32: CPU {f(row_c['time_median_s'] * 1e3)} ms vs GPU {f(row_g['time_median_s'] * 1e3)} ms "
            f"= {f(speedup)}×")
    numbers = {"gemv_speedup": speedup}
    if gbw is None or cbw is None:
        text += "; bandwidth ratio not measured (copy probes missing)"
        v = in_range(speedup, lo, hi) if speedup < CHAPTER.gemv_speedup_never else DOES_NOT_HOLD
    else:
        bw_ratio = gbw / cbw
        numbers["bandwidth_ratio"] = bw_ratio
        text += f"; copy bandwidth {f(gbw)} / {f(cbw)} GB/s = {f(bw_ratio)}×"
        explained = 0.5 <= speedup / bw_ratio <= 2.0
        if speedup >= CHAPTER.gemv_speedup_never or not explained:
            v = DOES_NOT_HOLD
        else:
            v = in_range(speedup, lo, hi)
    return [Part(what, v, text,
                 f"speedup within a factor 2 of the copy-bandwidth ratio and < {f(CHAPTER.gemv_speedup_never)}×; "
                 f"in {f(lo)}–{f(hi)}×: holds, elsewhere: another number", numbers)]


def c14a(ev: Evidence) -> List[Part]:
    parts = []
    t = CHAPTER.tile
    what = "sgemm32 as printed (no guards) is wrong when M, N, K are not multiples of 32"
    rows = ev.device_rows("gpu", ("ok", "failed"))
    ung = rows[rows["variant"] == "sgemm32_unguarded"]
    odd = ung[(ung["m"] % t != 0) | (ung["n"] % t != 0) | (ung["k"] % t != 0)]
    even = ung[(ung["m"] % t == 0) & (ung["n"] % t == 0) & (ung["k"] % t == 0)]
    if odd.empty:
        parts.append(not_measured(what, _need("sgemm32_unguarded at a size no tile divides", "claims_ladder")))
    else:
        r = odd.iloc[0]
        x = extra(r)
        right_even = (even["status"] == "ok").all() and not even.empty
        ceil = rows[(rows["variant"] == "sgemm32_unguarded_ceil") & (rows["m"] == r["m"]) & (rows["n"] == r["n"])]
        ceil_text = f"; the grid rounded up writes {extra(ceil.iloc[0]).get('writes_past_c')} elements past C" \
            if not ceil.empty else ""
        parts.append(Part(what, HOLDS if r["status"] == "failed" and right_even else DOES_NOT_HOLD,
                          f"{shape(r)}: {x.get('unwritten_elements')} elements of C never written, error of the "
                          f"written ones {f(x.get('rel_error_of_written_elements'))}{ceil_text}; correct at "
                          f"{', '.join(shape(e) for _, e in even.iterrows() if e['status'] == 'ok') or 'no multiple of 32'}",
                          "fails its check where 32 does not divide the size, passes where it does",
                          {"sgemm32_unwritten": float(x.get("unwritten_elements") or 0)}))
    what = "guards (or padding) fix it"
    ok = ev.device_rows("gpu")
    guarded = ok[(ok["variant"] == "smem_tiled") & ((ok["m"] % t != 0) | (ok["n"] % t != 0) | (ok["k"] % t != 0))]
    if guarded.empty:
        parts.append(not_measured(what, _need("smem_tiled at a size no tile divides", "claims_ladder")))
    else:
        r = guarded.iloc[0]
        parts.append(Part(what, HOLDS, f"smem_tiled (sgemm32 plus guards) at {shape(r)}: rel. error {f(r['rel_error'])}",
                          "the guarded kernel passes its FP64 check at that size", {}))
    return parts


def c14b(ev: Evidence) -> List[Part]:
    parts = []
    what = f"a column read of an unpadded tile is a {f(CHAPTER.bank_conflict_ways)}-way bank conflict"
    s32 = ev.largest(ev.variant("smem_bank_stride32"))
    ref = [ev.largest(ev.variant(v)) for v in ("smem_bank_stride33", "smem_bank_stride1")]
    ref = [r for r in ref if r is not None and s32 is not None and r["run_id"] == s32["run_id"]]
    if s32 is None or not ref:
        parts.append(not_measured(what, _need("smem_bank_stride32 and stride33/stride1 in one run", "claims_smem")))
    else:
        base = ref[0]
        ratio = float(s32["time_median_s"] / base["time_median_s"])
        v = same_number(ratio, CHAPTER.bank_conflict_ways) if ratio >= 2 else DOES_NOT_HOLD
        parts.append(Part(what, v, f"stride 32 takes {f(ratio)}× the time of {base['variant'].replace('smem_bank_', '')} "
                                   f"(same loads, conflict-free)" + "".join(
                                       f"; {r['variant'].replace('smem_bank_', '')}: {f(s32['time_median_s'] / r['time_median_s'])}×"
                                       for r in ref[1:]),
                          f"time ratio within ±{SAME_NUMBER_REL:.0%} of {f(CHAPTER.bank_conflict_ways)}; < 2: does not hold",
                          {"bank_conflict_ratio": ratio}))
    what = "padding the tile ([T][T+1]) removes it in the GEMM"
    pair = ev.pair("smem_tiled_colread_padded", "smem_tiled_colread", "fp32")
    if pair is None:
        parts.append(not_measured(what, _need("smem_tiled_colread and _padded in one run", "claims_ladder")))
    else:
        a, b = pair
        ratio = float(b["time_median_s"] / a["time_median_s"])
        parts.append(Part(what, HOLDS if faster(a, b) else DOES_NOT_HOLD,
                          f"{shape(a)} FP32: column read {f(b['tflops'])} vs padded {f(a['tflops'])} TFLOP/s "
                          f"({f(ratio)}× slower unpadded)", "padded faster beyond noise",
                          {"colread_slowdown": ratio}))
    return parts


def c14c(ev: Evidence) -> List[Part]:
    parts = []
    what = "TF32 is not lossless"
    t = ev.variant("cublas", "gpu", "tf32", timed=False)
    s = ev.variant("cublas", "gpu", "fp32", timed=False)
    keys = ["m", "n", "k"]
    both = t.groupby(keys)["rel_error"].max().rename("tf32").to_frame().join(
        s.groupby(keys)["rel_error"].max().rename("fp32"), how="inner").dropna()
    if both.empty:
        return [not_measured(what, _need("cuBLAS FP32 and TF32 at the same shapes", "claims_tf32")),
                not_measured("its error grows with K", _need("a K sweep", "claims_tf32"))]
    factor = (both["tf32"] / both["fp32"]).min()
    parts.append(Part(what, HOLDS if factor >= TF32_LOSS_MIN_FACTOR else DOES_NOT_HOLD,
                      f"rel. error TF32 {f(both['tf32'].min())}–{f(both['tf32'].max())} vs FP32 "
                      f"{f(both['fp32'].min())}–{f(both['fp32'].max())} over {len(both)} shapes; TF32 at least "
                      f"{f(factor)}× FP32", f"TF32 error >= {f(TF32_LOSS_MIN_FACTOR)}× FP32's at every shape",
                      {"tf32_over_fp32_min": float(factor)}))
    what = "its accumulated error grows with K"
    sweep = both.reset_index()
    sweep = sweep.groupby(["m", "n"]).filter(lambda g: g["k"].nunique() >= 3)
    if sweep.empty:
        parts.append(not_measured(what, _need("a K sweep (3+ K at one m, n)", "claims_tf32")))
        return parts
    import numpy as np

    slopes = {}
    for col in ("tf32", "fp32"):
        x, y = np.log10(sweep["k"].astype(float)), np.log10(sweep[col].astype(float))
        slopes[col] = float(np.polyfit(x, y, 1)[0])
    ks = sorted(sweep["k"].astype(int).unique())
    v = HOLDS if slopes["tf32"] >= ERROR_GROWTH_MIN_SLOPE else OTHER_NUMBER
    text = (f"K = {ks[0]}…{ks[-1]}: TF32 error ∝ K^{f(slopes['tf32'], 2)}, FP32 ∝ K^{f(slopes['fp32'], 2)}")
    if v == OTHER_NUMBER:
        text += "; TF32's error is set by rounding the inputs to 10 bits, not by the accumulation (FP32 in both)"
    parts.append(Part(what, v, text, f"log-log slope >= {ERROR_GROWTH_MIN_SLOPE:g}",
                      {"tf32_error_slope": slopes["tf32"], "fp32_error_slope": slopes["fp32"]}))
    return parts


def c14d(ev: Evidence) -> List[Part]:
    parts = []
    n = 1024
    what = f"a {n}³ GEMM computes in about {f(CHAPTER.gemm_1024_ms)} ms"
    kern = data.best_cublas(ev.device_rows("gpu"))
    kern = kern[(kern["precision"] == "fp32") & (kern["m"] == n) & (kern["n"] == n) & (kern["k"] == n)]
    if kern.empty:
        return [not_measured(what, _need(f"cuBLAS FP32 at N = {n}", "claims_cpu_gpu")),
                not_measured("the transfers may take longer", _need("transfer probes", "claims_cpu_gpu"))]
    k_s = float(kern["cublas_time_s"].median())
    parts.append(Part(what, same_number(k_s * 1e3, CHAPTER.gemm_1024_ms),
                      f"cuBLAS FP32 {n}³: {f(k_s * 1e3)} ms ({f(2 * n ** 3 / k_s / 1e12)} TFLOP/s)",
                      f"same number: within ±{SAME_NUMBER_REL:.0%}", {"gemm_1024_ms": k_s * 1e3}))
    what = "the transfers may take longer than the kernel"
    tr = ev.op("transfer", "gpu", "fp32")
    tr = tr[(tr["m"] == n) & (tr["n"] == n) & (tr["k"] == n)]
    if tr.empty:
        parts.append(not_measured(what, _need("transfer probes at N = 1024", "claims_cpu_gpu")))
        return parts
    by_mem = {}
    for _, r in tr.iterrows():
        by_mem.setdefault(extra(r).get("memory", "?"), []).append(float(r["time_median_s"]))
    times = {mem: float(pd.Series(v).median()) for mem, v in by_mem.items()}
    longer = {mem: t > k_s for mem, t in times.items()}
    text = "; ".join(f"{mem}: {f(t * 1e3)} ms = {f(t / k_s)}× the kernel" for mem, t in sorted(times.items()))
    parts.append(Part(what, HOLDS if any(longer.values()) else DOES_NOT_HOLD,
                      f"H2D A, B + D2H C ({f(tr.iloc[0]['bytes_min'] / 1e6)} MB): {text}",
                      "transfer time > kernel time (pageable or pinned)",
                      {f"transfer_over_kernel_{mem}": t / k_s for mem, t in times.items()}))
    return parts


def c14e(ev: Evidence) -> List[Part]:
    what = "without warm-up the first run is slower (clock ramp-up, cold caches)"
    rows = ev.variant("first_run_gpu")
    row = ev.largest(rows)
    x = extra(row) if row is not None else {}
    if "first_call_event_s" not in x:
        return [not_measured(what, _need("first_run_gpu", "claims_first_run"))]
    settled = float(row["time_median_s"])
    first, again = float(x["first_call_event_s"]), float(x["after_idle_event_s"])
    r_first, r_again = first / settled, again / settled
    slower = r_first >= FIRST_RUN_MIN_RATIO and first > float(row["time_p80_s"])
    text = (f"{where(row)}: first call of the process {f(first * 1e3)} ms = {f(r_first)}× the settled median "
            f"{f(settled * 1e3)} ms (host clock incl. launch {f(x['first_call_host_s'] * 1e3)} ms); first call after "
            f"{f(x['idle_s'])} s idle {f(again * 1e3)} ms = {f(r_again)}×; SM clock before it "
            f"{f(x.get('after_idle_sm_clock_before_mhz'))} MHz, settled {f(row['sm_clock_min_mhz'])}–"
            f"{f(row['sm_clock_max_mhz'])} MHz")
    return [Part(what, HOLDS if slower else DOES_NOT_HOLD, text,
                 f"first call >= {FIRST_RUN_MIN_RATIO:g}× the settled median and above its p80",
                 {"first_run_ratio": r_first, "after_idle_ratio": r_again})]


def c14f(ev: Evidence) -> List[Part]:
    what = "without the second __syncthreads() the results become random"
    rows = ev.variant("smem_tiled_nosync", "gpu", "fp32", statuses=("ok", "failed"), timed=False)
    rows = rows[[extra(r).get("check_repeats", 1) > 1 for _, r in rows.iterrows()]]
    row = ev.largest(rows)
    if row is None:
        return [not_measured(what, _need("smem_tiled_nosync with measure.check_repeats > 1", "claims_ladder"))]
    x = extra(row)
    distinct, worst = int(x["rel_error_distinct"]), float(x["rel_error_max"])
    control = ev.variant("smem_tiled", "gpu", "fp32", timed=False)
    control = control[(control["run_id"] == row["run_id"]) & (control["n"] == row["n"])]
    ctl_distinct = extra(control.iloc[0]).get("rel_error_distinct") if not control.empty else None
    ctl = f"; smem_tiled (with the barrier), same run: {ctl_distinct} distinct error(s)" if ctl_distinct else ""
    tol = float(row["tolerance"])
    v = HOLDS if distinct >= 2 and worst > tol else OTHER_NUMBER if worst > tol else DOES_NOT_HOLD
    return [Part(what, v, f"{shape(row)}: {x['check_repeats']} runs on the same inputs gave {distinct} different "
                          f"errors, {f(x['rel_error_min'])} to {f(worst)} (tolerance {f(tol)}){ctl}",
                 "wrong (above tolerance) and different from run to run: holds; wrong but repeatable: another "
                 "number; right: does not hold", {"race_distinct_errors": float(distinct), "race_worst_error": worst})]


@dataclass(frozen=True)
class Claim:
    id: str
    section: str
    chapter: str
    figure: str  # where the paper shows it (analysis.figures.FIGURES / tables), or "probe rows"
    check: Callable[[Evidence], List[Part]]
    kinds: Tuple[str, ...] = ("gpu",)  # the devices its rows come from


CLAIMS: Tuple[Claim, ...] = (
    Claim("C1", "5.1", "Roofline: I = FLOPs/bytes, I* = P/BW, T = max(FLOPs/P, bytes/BW); H100 FP32 I* ≈ 20, "
                       "TF32 ≈ 148 FLOP/B.", "roofline; table peaks", c1),
    Claim("C2", "5.1", "Vector add I ≈ 0.17 and GEMV I = 0.5 are bandwidth-bound; square GEMM N = 1024, I ≈ 170, is "
                       "compute-bound; a thousandfold apart.", "roofline; table intensity", c2),
    Claim("C3", "5.2", "Naive GEMM: I ≈ 0.25 FLOP/B, two orders below the ridge, a few percent of peak; L1/L2 win "
                       "back part.", "ladder; roofline", c3),
    Claim("C4", "5.3", "T×T shared tiles: I = T/4 = 8 at T = 32, under the FP32 ridge: still bandwidth-bound; 32 "
                       "FLOP/B needs a 128×128 block tile.", "ladder; roofline", c4),
    Claim("C5", "5.3", "Shared memory: more than 10× the bandwidth of device memory, 20–30 cycles of latency.",
          "probe rows (claims_smem)", c5),
    Claim("C6", "5.4", "Register blocking 8×8 per thread: 4 FMA per shared read; 128×128 block tile ≈ 32 FLOP/B, "
                       "just over the ridge.", "ladder; roofline", c6),
    Claim("C7", "5.4", "Double buffering with cp.async hides the load latency.", "ladder", c7),
    Claim("C8", "5.5", "Tensor cores raise P by about an order of magnitude; H100: FP32 67, TF32 495, BF16/FP16 "
                       "989 TFLOP/s.", "roofline; table peaks", c8),
    Claim("C9", "5.5", "WMMA: 32-byte alignment or a crash / slow path; a layout mismatch silently transposes; "
                       "1e-4 to 1e-3 relative error against FP32 is normal.", "error_vs_precision; probe rows", c9),
    Claim("C10", "5.5", "mma.sync and wgmma are faster still; production code uses CUTLASS or cuBLAS.", "ladder", c10),
    Claim("C11", "5.6", "CPU: AVX-512 + FMA ≈ 32 FLOP/core/cycle; a GPU has tens of TFLOP/s FP32 and an order more "
                        "with tensor cores.", "cpu_gpu_crossover; table peaks", c11, ("cpu", "gpu")),
    Claim("C12", "5.6", "For N < 128 the CPU is often faster: launch and transfers dominate.", "cpu_gpu_crossover", c12,
          ("cpu", "gpu")),
    Claim("C13", "5.6", "GEMV is bandwidth-bound on both sides: the GPU's speedup is the bandwidth ratio, 5–10×, "
                        "never 100×.", "roofline; table intensity", c13, ("cpu", "gpu")),
    Claim("C14a", "5.7", "Tiles that do not divide M, N, K need guards or padding; sgemm32 assumes multiples of 32.",
          "probe rows (claims_ladder)", c14a),
    Claim("C14b", "5.7", "Reading an unpadded shared tile by column gives 32-way bank conflicts.",
          "probe rows (claims_smem, claims_ladder)", c14b),
    Claim("C14c", "5.7", "TF32 is not lossless: its 10-bit mantissa makes accumulated error sensitive.",
          "error_vs_precision", c14c),
    Claim("C14d", "5.7", "Timing only the kernel misleads: a 1024³ GEMM computes in ≈ 0.3 ms, the transfers may "
                         "take longer.", "cpu_gpu_crossover", c14d),
    Claim("C14e", "5.7", "Without warm-up, the first run includes clock ramp-up and cold caches.",
          "probe rows (claims_first_run)", c14e),
    Claim("C14f", "5.7", "Without the second __syncthreads() the next tile overwrites shared memory still being "
                         "read: results become random.", "probe rows (claims_ladder)", c14f),
)
CLAIM_IDS = tuple(c.id for c in CLAIMS)


# -- evaluation and output -----------------------------------------------------------------------
def evaluate(ds: data.Dataset) -> List[Verdict]:
    """A verdict for every claim, in the chapter's order, from the rows of ``ds``."""
    ev = Evidence(ds)
    out = []
    for c in CLAIMS:
        try:
            parts = c.check(ev)
        except Exception as e:  # a malformed row must not hide the other claims
            parts = [Part("evaluation", NOT_MEASURED, missing=f"error while evaluating: {type(e).__name__}: {e}")]
        device = " and ".join(ev.gpu_label if k == "gpu" else ev.cpu_label for k in c.kinds)
        out.append(Verdict(c.id, c.section, c.chapter, c.figure, parts, device))
    return out


def frame(verdicts: Sequence[Verdict]) -> pd.DataFrame:
    """One line per claim: id, verdict, the parts' verdicts (for tests and other reports)."""
    return pd.DataFrame([{"claim": v.claim, "section": v.section, "verdict": v.verdict,
                          "parts": [p.verdict for p in v.parts], **v.numbers()} for v in verdicts])


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _shown_path(p: str) -> str:
    """A source path as the report shows it: relative to the project when inside it, so the
    committed report names no machine's folders."""
    try:
        return str(Path(p).resolve().relative_to(ROOT))
    except (ValueError, AttributeError):
        return Path(p).name


def render_markdown(verdicts: Sequence[Verdict], ds: data.Dataset) -> str:
    ev_gpu, ev_cpu = ds.gpu_ceilings, ds.cpu_ceilings
    lines = ["<!-- generated by `python -m analysis.claims` from result rows; do not edit -->", "",
             "# The chapter's claims, measured", "",
             f"Rows: {len(ds.rows)} ({int((ds.rows['status'] == 'ok').sum())} ok) from "
             f"{', '.join(map(_shown_path, ds.sources)) or 'the given data'}.  ",
             f"GPU: {ev_gpu.device or 'none'}; CPU: {ev_cpu.device or 'none'}.  ",
             "Verdicts: **holds**; **holds with another number** (right statement, not this hardware's number); "
             "**does not hold**; **not measured** (the command that measures it is named). A claim's verdict "
             "is its worst measured part.", "",
             "| Claim | Chapter says | Measured | Verdict | Rule |", "|---|---|---|---|---|"]
    for v in verdicts:
        measured, rules, verdicts_ = [], [], []
        for p in v.parts:
            body = p.measured if p.verdict != NOT_MEASURED else f"not measured: {p.missing}"
            measured.append(f"*{p.what}*: {body}")
            verdicts_.append(f"{p.verdict}")
            rules.append(p.rule or "–")
        lines.append("| " + " | ".join([
            f"**{v.claim}** ({v.section})",
            _cell(v.chapter) + f"<br>figure: {v.figure}",
            f"on {_cell(v.device)}:<br>" + "<br>".join(_cell(m) for m in measured),
            f"**{v.verdict}**<br>" + "<br>".join(_cell(x) for x in verdicts_),
            "<br>".join(_cell(r) for r in rules)]) + " |")
    lines += ["", "## Thresholds", ""]
    for name, value in (("SAME_NUMBER_REL", SAME_NUMBER_REL), ("BANDWIDTH_BOUND_FRACTION", BANDWIDTH_BOUND_FRACTION),
                        ("FEW_PERCENT_MAX", FEW_PERCENT_MAX), ("ROOF_SLACK", ROOF_SLACK),
                        ("FASTER_MIN_GAIN", FASTER_MIN_GAIN), ("FIRST_RUN_MIN_RATIO", FIRST_RUN_MIN_RATIO),
                        ("WRONG_MIN_REL_ERROR", WRONG_MIN_REL_ERROR),
                        ("SAME_PRODUCT_MAX_REL_ERROR", SAME_PRODUCT_MAX_REL_ERROR),
                        ("TF32_LOSS_MIN_FACTOR", TF32_LOSS_MIN_FACTOR), ("ERROR_GROWTH_MIN_SLOPE", ERROR_GROWTH_MIN_SLOPE),
                        ("SLOWDOWN_MIN", SLOWDOWN_MIN), ("MAJORITY", MAJORITY)):
        lines.append(f"- `{name}` = {value:g}")
    lines += ["", "Chapter numbers: conf/device/h100.yaml (peaks, bandwidth), analysis.tables.CHAPTER_OPS "
                  "(intensity table), analysis.claims.CHAPTER (numbers in the text).", ""]
    return "\n".join(lines)


def write_claims(ds: data.Dataset, out_dir: Path, verdicts=None) -> Path:
    """Write ``out_dir/claims.md`` for ``ds`` (unchanged content is not rewritten); returns its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / CLAIMS_FILE
    write_if_changed(path, render_markdown(verdicts if verdicts is not None else evaluate(ds), ds).encode())
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.claims", description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="*", type=Path,
                    help=f"results.csv files or folders searched for them (default {DEFAULT_RESULTS})")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    args = ap.parse_args(argv)
    results = args.results or [DEFAULT_RESULTS]
    ds = data.dataset_from_cli("analysis.claims", results)
    if ds is None:
        return 2
    verdicts = evaluate(ds)
    path = write_claims(ds, args.out, verdicts)
    print(f"analysis.claims: {len(ds.rows)} rows -> {path}")
    for v in verdicts:
        print(f"  {v.claim:5s} {v.verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
