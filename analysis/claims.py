"""The chapter's claims, C1 to C14f, each with a verdict computed from result rows.

    python -m analysis.claims RESULTS ...              # -> RESULTS/paper/claims.md
    python -m analysis.claims RESULTS ... --out DIR    # results.csv files or folders holding them
    python -m analysis.claims --out outputs/paper      # the reference data -> the committed report

One row per claim of ``../shared/seed/CLAIMS.md``: what the chapter says, what the rows show
(device, size, precision, figure), and a verdict: **holds**, **holds with another number** (the
statement is right, its number is not this hardware's), **does not hold** (the rows contradict
it: its direction, its order of magnitude, or its range), or **not measured** (with the
experiment that measures it). A claim is checked as one or more parts; the claim's verdict is
its worst measured part. Every rule can come out "does not hold", every threshold is a constant
below and is quoted next to the verdict it decides. The chapter's own figures come from
``conf/device/h100.yaml`` (its peaks and bandwidth), ``analysis.tables.CHAPTER_OPS`` (its
intensity table) and ``CHAPTER`` below (the numbers in its text); the measured side comes only
from rows.

Rows are read with :mod:`analysis.data`, which decides what is evidence (ok, event-timed,
reliable, not contended): the GPU and CPU of a dataset are the devices with the most measured
rows; "peak" is the best GEMM evidence row per precision there; the memory roof is the copy
probe's bandwidth (the datasheet's, said so, when no copy row exists); a point's number is its
best row (one row of one run), and comparisons between variants are made inside one run at one
size. Intensities the chapter derives from a formula (0.25, T/4, 32) are measured with hardware
counters where rows carry them (``intensity_l1``: the bytes the kernel's global loads move, what
the formulas count; ``intensity_dram``: what reaches DRAM, what the ridge is about); a part that
only a kernel's configured formula would back is "not measured".

``analysis.paper`` calls :func:`write_claims` beside the figures.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from gemmlab.config import ROOT, load_variant

from . import data, tables
from .style import format_sig, write_if_changed

DEFAULT_RESULTS = ROOT / "outputs" / "reference"
COMMITTED_OUT = ROOT / "outputs" / "paper"  # written only when --out names it
CLAIMS_FILE = "claims.md"

HOLDS = "holds"
OTHER_NUMBER = "holds with another number"
DOES_NOT_HOLD = "does not hold"
NOT_MEASURED = "not measured"
VERDICTS = (HOLDS, OTHER_NUMBER, DOES_NOT_HOLD, NOT_MEASURED)
_SEVERITY = {HOLDS: 0, OTHER_NUMBER: 1, DOES_NOT_HOLD: 2}

# -- thresholds: part of the logic, quoted in every rule text -----------------------------------
SAME_NUMBER_REL = 0.25  # a measured number within +-25 % of the chapter's is "the same number"
ORDER_HALF_DECADES = 0.5  # beyond 10**0.5 (about 3.2x) from the chapter's number: another order of magnitude
BANDWIDTH_BOUND_FRACTION = 0.60  # bandwidth-bound in practice: >= 60 % of the measured memory roof
FEW_PERCENT_MAX = 10.0  # "only a few percent of peak": at most 10 %
ROOF_SLACK = 0.05  # no measured time may beat the roofline's T by more than 5 %
FASTER_MIN_GAIN = 0.02  # without quantiles, "faster" needs a 2 % lower median
FIRST_RUN_MIN_RATIO = 1.10  # a first run counts as slower from 10 % above the settled median
CLOCK_DROP_MIN = 0.02  # the SM clock "ramps" after idle only if it sat > 2 % below the settled clock
WRONG_MIN_REL_ERROR = 0.1  # a result that is "wrong", not rounding
SAME_PRODUCT_MAX_REL_ERROR = 1e-2  # a result that "is" another product (FP16 inputs)
TF32_LOSS_MIN_FACTOR = 10.0  # TF32 "not lossless": its error at least 10x FP32's at every K
ERROR_GROWTH_MIN_SLOPE = 0.25  # error "grows with K" like sqrt(K): log-log slope of error against K >= 0.25
ERROR_FLAT_MAX_SLOPE = 0.10  # at most this slope the error does not grow with K
SLOWDOWN_MIN = 1.10  # a misaligned call counts as "slow path" from 10 % slower
MAJORITY = 0.5  # "often": in at least half of the measured sizes
DOMINATE_MIN = 0.5  # overheads "dominate": more than half of the GPU's end-to-end time
TENS_OF_TFLOPS = (10.0, 100.0)  # "tens of TFLOP/s"
EXPLAINED_FACTOR = 2.0  # a speedup "is" a bandwidth ratio within this factor

DRAM_OPS = ("gemm", "gemv", "vecadd")  # ops whose bytes_min is DRAM traffic (copy defines the roof)
CHAPTER_DEVICE = "h100"  # conf/device/h100.yaml: the chapter's peaks and bandwidth
COUNTERS = " measure.counters=ncu"  # what a run needs for the counter columns
NO_PROBE = "no probe in the harness measures it yet"  # a NOT_MEASURED part no experiment can fill


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


def _decades(measured: float, reference: float) -> float:
    return abs(math.log10(measured / reference)) if measured > 0 and reference > 0 else math.inf


def same_number(measured: float, chapter: float, rel: float = SAME_NUMBER_REL) -> str:
    """HOLDS within ``rel`` of ``chapter``; OTHER_NUMBER within the same order of magnitude (a
    factor below 10**ORDER_HALF_DECADES); DOES_NOT_HOLD beyond (or at a sign the chapter's
    number does not have)."""
    if abs(measured - chapter) <= rel * abs(chapter):
        return HOLDS
    return OTHER_NUMBER if _decades(measured, chapter) < ORDER_HALF_DECADES else DOES_NOT_HOLD


SAME_NUMBER_RULE = (f"within ±{SAME_NUMBER_REL:.0%}: holds; within a factor {10 ** ORDER_HALF_DECADES:.1f}: "
                    f"another number; beyond: does not hold")


def in_range(measured: float, lo: float, hi: float) -> str:
    """HOLDS inside [lo, hi]; OTHER_NUMBER within a factor 10**ORDER_HALF_DECADES of the nearer
    end; DOES_NOT_HOLD beyond."""
    if lo <= measured <= hi:
        return HOLDS
    edge = lo if measured < lo else hi
    return OTHER_NUMBER if _decades(measured, edge) < ORDER_HALF_DECADES else DOES_NOT_HOLD


RANGE_RULE = (f"inside: holds; within a factor {10 ** ORDER_HALF_DECADES:.1f} of the range: another number; "
              f"beyond: does not hold")


def orders(ratio: float) -> int:
    """Orders of magnitude of a ratio, rounded (1.5 -> 0, 8 -> 1, 48 -> 2)."""
    return int(round(math.log10(ratio))) if ratio > 0 else 0


def same_orders(ratio: float, expected: int) -> str:
    """HOLDS when ``ratio`` rounds to ``expected`` orders of magnitude, else DOES_NOT_HOLD."""
    return HOLDS if ratio > 0 and orders(ratio) == expected else DOES_NOT_HOLD


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


def _str(v) -> str:
    """A cell as text ("" for a missing one)."""
    return "" if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)


def defines(row: pd.Series) -> Dict[str, float]:
    """The kernel's compile-time parameters as its row names them (the ``defines`` column, else
    ``kernel_name`` = ``name<BM=128,BN=128,...>``): what the variant was when it was measured."""
    x = _str(row.get("defines"))
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


# -- what the rows hold ------------------------------------------------------------------------
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


def _ridge_text(ev: Evidence, precision: str) -> Tuple[Optional[float], str]:
    r = ev.ridge(precision)
    if r is None:
        return None, ""
    ridge, peak, bw, src = r
    return ridge, (f"I* = {f(peak['tflops'])} TFLOP/s ({where(peak)}, best row) / {f(bw / 1e3)} TB/s ({src}) "
                   f"= {f(ridge)} FLOP/B")


def _need(what: str, experiment: str) -> str:
    return f"rows of {what}: python run.py +experiment={experiment}"


def _counters_need(what: str) -> str:
    return _need(f"{what} with hardware counters", "claims_ladder") + COUNTERS


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
        parts.append(Part(what, same_number(ridge, chapter), text, SAME_NUMBER_RULE + f" (of {f(chapter)})",
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
    gpu_only = data.Dataset(ev.rows[ev.rows["kind"] == "gpu"], ev.ds.sources)
    for op in tables.CHAPTER_OPS:
        chapter_i = op.intensity(1, op.square_n or 1, 1)
        # the intensity table's row for this op (its best row), on the GPU
        row = tables.chapter_row(gpu_only, op)
        if row is not None and op.op == "gemv" and row["precision"] != "fp32":
            row = None
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
        name = f"{row['variant']} {row['precision']} {int(row['m'])}×{int(row['n'])}×{int(row['k'])}"
        parts.append(Part(what_i, same_number(i, chapter_i),
                          f"{name}: {f(row['flops'])} FLOP / {f(row['bytes_min'])} B = {f(i)} FLOP/B{note}",
                          SAME_NUMBER_RULE, {f"intensity_{op.op}": i}))
        if ridge_info is None or bw_gbs is None:
            parts.append(not_measured(what_b, _need("the FP32 peak and the copy probe", "claims_memory_roof")))
            continue
        ridge = ridge_info[0]
        gbs = float(row["bytes_min"]) / float(row["time_s"]) / 1e9
        frac = gbs / bw_gbs
        if chapter_bound == "bandwidth":
            ok = i < ridge and frac >= BANDWIDTH_BOUND_FRACTION
            rule = f"I < I* and achieved bytes/time >= {BANDWIDTH_BOUND_FRACTION:.0%} of the copy bandwidth"
        else:
            ok = i > ridge
            rule = "I > I* (measured FP32 ridge)"
        parts.append(Part(what_b, HOLDS if ok else DOES_NOT_HOLD,
                          f"I = {f(i)} vs I* = {f(ridge)} FLOP/B; {f(gbs)} GB/s = {f(frac * 100)} % of the copy "
                          f"bandwidth; {f(row['tflops'])} TFLOP/s (best row)", rule,
                          {f"bandwidth_fraction_{op.op}": frac, f"tflops_{op.op}": float(row["tflops"])}))
    what = "a thousandfold between vector add and GEMM N = 1024"
    if "vecadd" in intensities and "gemm" in intensities:
        ratio = intensities["gemm"] / intensities["vecadd"]
        parts.append(Part(what, same_orders(ratio, CHAPTER.orders_vecadd_to_gemm),
                          f"I(GEMM) / I(vector add) = {f(ratio)}",
                          f"round(log10 ratio) == {CHAPTER.orders_vecadd_to_gemm}: holds; else does not hold",
                          {"intensity_ratio": ratio}))
    else:
        parts.append(not_measured(what, _need("GPU vector add and GEMM N = 1024", "claims_memory_roof")))
    return parts


def _first(*rows: Optional[pd.Series]) -> Optional[pd.Series]:
    return next((r for r in rows if r is not None), None)


def _ladder_row(ev: Evidence, variant: str) -> Optional[pd.Series]:
    """The variant's best FP32 row at its largest square N."""
    return ev.largest(data.square(ev.variant(variant, "gpu", "fp32")))


def _levels(row: pd.Series) -> str:
    return (f"counters: L1 {f(row.get('intensity_l1'))}, L2 {f(row.get('intensity_l2'))}, "
            f"DRAM {f(row.get('intensity_dram'))} FLOP/B")


def _formula_part(ev: Evidence, what: str, variant: str, chapter_i: float, figure: str) -> Part:
    """A part the chapter derives from a formula (the bytes a kernel's global loads move):
    measured with the L1 counters of the variant's row (``intensity_l1``); not measured from
    the configured formula alone."""
    row = ev.counters_row(variant)
    if row is None or pd.isna(row.get("intensity_l1")):
        model = _ladder_row(ev, variant)
        model_text = f" (the configured formula alone says {f(model['intensity_model'])})" \
            if model is not None and pd.notna(model.get("intensity_model")) else ""
        return not_measured(what, _counters_need(variant) + model_text)
    i = float(row["intensity_l1"])
    return Part(what, same_number(i, chapter_i),
                f"{where(row)} ({figure}): {f(i)} FLOP/B moved by its global loads (L1 counters); "
                f"{_levels(row)}", SAME_NUMBER_RULE + " (L1 counters: the traffic the formula counts)",
                {f"{variant}_intensity_l1": i})


def _dram_row(ev: Evidence, variant: str, what: str) -> Tuple[Optional[pd.Series], Optional[Part]]:
    row = ev.counters_row(variant)
    if row is None or pd.isna(row.get("intensity_dram")):
        return None, not_measured(what, _counters_need(variant))
    if ev.ridge("fp32") is None:
        return None, not_measured(what, _need("the FP32 peak", "cublas_square"))
    return row, None


def c3(ev: Evidence) -> List[Part]:
    parts = [_formula_part(ev, f"naive GEMM reads 2N³ elements: I = {f(CHAPTER.naive_intensity)} FLOP/B",
                           "naive", CHAPTER.naive_intensity, "one thread per output")]
    what = f"{CHAPTER.naive_orders_below_ridge} orders of magnitude below the FP32 ridge"
    row, missing = _dram_row(ev, "naive", what)
    if missing:
        parts.append(missing)
    else:
        ridge = ev.ridge("fp32")[0]
        i = float(row["intensity_dram"])
        ratio = ridge / i
        if i >= ridge:
            v, note = DOES_NOT_HOLD, ": above the ridge, not below it"
        else:
            v, note = same_orders(ratio, CHAPTER.naive_orders_below_ridge), ""
        parts.append(Part(what, v, f"{where(row)}: DRAM intensity {f(i)} FLOP/B (counters) vs I* = {f(ridge)}; "
                                   f"I* / I = {f(ratio)}{note}",
                          f"I < I* and round(log10(I*/I)) == {CHAPTER.naive_orders_below_ridge}: holds; else does "
                          f"not hold", {"naive_ridge_ratio": ratio, "naive_intensity_dram": i}))
    what = "reaches only a few percent of peak"
    row, peak = _ladder_row(ev, "naive"), ev.peak("fp32")
    if row is None or peak is None:
        parts.append(not_measured(what, _need("the naive stage and the FP32 peak", "claims_ladder")))
    else:
        pct = 100 * float(row["tflops"]) / float(peak["tflops"])
        parts.append(Part(what, HOLDS if pct <= FEW_PERCENT_MAX else DOES_NOT_HOLD,
                          f"{where(row)}: {f(row['tflops'])} TFLOP/s (best row) = {f(pct)} % of the FP32 peak "
                          f"{f(peak['tflops'])} ({where(peak)})",
                          f"at most {FEW_PERCENT_MAX:g} % of the measured FP32 peak: holds; above: does not hold",
                          {"naive_pct_of_peak": pct}))
    what = "L1/L2 win back part of the traffic"
    row = ev.counters_row("naive")
    issued = None if row is None else row.get("intensity_l1")
    if row is not None and pd.notna(row.get("intensity_dram")) and pd.notna(issued):
        won = float(row["intensity_dram"]) > float(issued)
        parts.append(Part(what, HOLDS if won else DOES_NOT_HOLD,
                          f"{where(row)}: DRAM intensity {f(row['intensity_dram'])} vs {f(issued)} FLOP/B at L1 "
                          f"(counters): DRAM moves {f(float(row['intensity_dram']) / float(issued))}× fewer bytes "
                          f"than the loads ask for",
                          "counters: DRAM intensity above the L1 intensity (caches serve part of the loads): "
                          "holds; else does not hold", {"naive_cache_reuse": float(row["intensity_dram"]) / float(issued)}))
    else:
        row, bw = _ladder_row(ev, "naive"), ev.measured_bandwidth("gpu")
        if row is None or bw is None:
            parts.append(not_measured(what, _counters_need("naive")))
        else:
            roof = CHAPTER.naive_intensity * bw / 1e3  # TFLOP/s if every load came from DRAM
            won = float(row["tflops"]) > roof
            parts.append(Part(what, HOLDS if won else DOES_NOT_HOLD,
                              f"{where(row)}: {f(row['tflops'])} TFLOP/s against {f(roof)} TFLOP/s if every load "
                              f"came from DRAM ({f(CHAPTER.naive_intensity)} FLOP/B × copy bandwidth)",
                              "achieved above I·BW at the no-reuse intensity (caches serve part of it): holds; "
                              "else does not hold", {"naive_over_dram_roof": float(row["tflops"]) / roof}))
    return parts


def _bandwidth_bound_part(ev: Evidence, row: pd.Series, what: str) -> Part:
    """Bandwidth-bound: DRAM intensity (counters) under the ridge and the throughput near its
    memory roof."""
    i = float(row["intensity_dram"])
    bw = ev.measured_bandwidth("gpu")
    r = ev.ridge("fp32")
    if bw is None:
        return not_measured(what, _need("the copy probe", "claims_memory_roof"))
    roof = min(float(r[1]["tflops"]), i * bw / 1e3)
    frac = float(row["tflops"]) / roof
    ok = i < r[0] and frac >= BANDWIDTH_BOUND_FRACTION
    text = (f"{where(row)}: DRAM intensity {f(i)} (counters) vs I* = {f(r[0])}; {f(row['tflops'])} TFLOP/s = "
            f"{f(frac * 100)} % of its roof min(P, I·BW) = {f(roof)}")
    if i >= r[0]:
        text += ": above the ridge"
    elif not ok:
        text += ": under the ridge, but far from the bandwidth roof; DRAM bandwidth is not what limits it"
    return Part(what, HOLDS if ok else DOES_NOT_HOLD, text,
                f"I < I* and achieved >= {BANDWIDTH_BOUND_FRACTION:.0%} of min(P, I·BW): holds; else does not hold",
                {"roof_fraction_" + str(row["variant"]): frac})


def c4(ev: Evidence) -> List[Part]:
    tiled = _first(ev.counters_row("smem_tiled"), _ladder_row(ev, "smem_tiled"))
    t = defines(tiled).get("TILE", float(CHAPTER.tile)) if tiled is not None else float(CHAPTER.tile)
    parts = [_formula_part(ev, f"T×T tiles: I = T/4, {f(CHAPTER.tile / 4)} FLOP/B at T = {CHAPTER.tile}",
                           "smem_tiled", t / 4, f"TILE = {f(t)}")]
    what = "still under the FP32 ridge"
    row, missing = _dram_row(ev, "smem_tiled", what)
    if missing:
        parts.append(missing)
    else:
        r = ev.ridge("fp32")
        i = float(row["intensity_dram"])
        parts.append(Part(what, HOLDS if i < r[0] else DOES_NOT_HOLD,
                          f"{where(row)}: DRAM intensity {f(i)} (counters) vs I* = {f(r[0])} FLOP/B (chapter "
                          f"{f(ev.chapter_ridge('fp32'))})", "I < I* (measured): holds; else does not hold",
                          {"smem_tiled_ridge_ratio": r[0] / i}))
    what = "the textbook kernel is still bandwidth-bound"
    row, missing = _dram_row(ev, "smem_tiled", what)
    parts.append(missing or _bandwidth_bound_part(ev, row, what))
    rb = _first(ev.counters_row("register_blocked"), _ladder_row(ev, "register_blocked"))
    d = defines(rb) if rb is not None else {}
    tile = f"{f(d.get('BM'))}×{f(d.get('BN'))}, BK = {f(d.get('BK'))}" if d else "its block tile"
    parts.append(_formula_part(ev, f"a 128×128 block tile gives {f(CHAPTER.block_tile_intensity)} FLOP/B",
                               "register_blocked", CHAPTER.block_tile_intensity, tile))
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
        parts.append(Part(what, in_range(float(cycles), lo, hi),
                          f"{f(cycles)} SM cycles per dependent load (pointer chase, clock64)",
                          f"{f(lo)}–{f(hi)} cycles: " + RANGE_RULE, {"smem_latency_cycles": float(cycles)}))
    return parts


def c6(ev: Evidence) -> List[Part]:
    parts = []
    row = _ladder_row(ev, "register_blocked")
    d = defines(row) if row is not None else {}
    tm, tn = d.get("TM"), d.get("TN")
    what = f"8×8 outputs per thread: {f(CHAPTER.fma_per_shared_read)} FMA per shared read"
    formula = (f" (the kernel's TM × TN = {f(tm)} × {f(tn)} would give {f(tm * tn)} FMA per {f(tm + tn)} shared "
               f"reads = {f(tm * tn / (tm + tn))} by construction)") if tm and tn else ""
    parts.append(not_measured(what, f"a count of shared-memory loads per FMA (an ncu shared-load counter): "
                                    f"{NO_PROBE}{formula}"))
    what = (f"128×128 block tile: DRAM intensity ≈ {f(CHAPTER.block_tile_intensity)} FLOP/B, just over the ridge")
    row, missing = _dram_row(ev, "register_blocked", what)
    if missing:
        parts.append(missing)
    else:
        r = ev.ridge("fp32")
        i = float(row["intensity_dram"])
        ratio = i / r[0]
        v = DOES_NOT_HOLD if ratio <= 1 else same_number(i, CHAPTER.block_tile_intensity)
        parts.append(Part(what, v, f"{where(row)}: DRAM intensity {f(i)} FLOP/B (counters) = {f(ratio)}× the measured "
                                   f"I* {f(r[0])}; {_levels(row)}",
                          f"I > I*, and I against {f(CHAPTER.block_tile_intensity)}: " + SAME_NUMBER_RULE,
                          {"register_blocked_intensity_dram": i, "register_blocked_ridge_ratio": ratio}))
    what = "register blocking is faster than the shared-memory tile"
    pair = ev.pair("register_blocked", "smem_tiled", "fp32")
    if pair is None:
        parts.append(not_measured(what, _need("register_blocked and smem_tiled in one run", "claims_ladder")))
    else:
        a, b = pair
        parts.append(Part(what, HOLDS if faster(a, b) else DOES_NOT_HOLD,
                          f"{shape(a)}, one run: {f(a['tflops'])} vs {f(b['tflops'])} TFLOP/s "
                          f"({f(b['time_median_s'] / a['time_median_s'])}×)",
                          "faster beyond noise (p80 below the other's p20): holds; else does not hold",
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
                 f"{shape(a)} FP32, one run: double_buffered {f(a['tflops'])} vs register_blocked {f(b['tflops'])} "
                 f"TFLOP/s ({f(speedup)}×)", "faster beyond noise (p80 below the other's p20): holds; else does not hold",
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
                          f"{f(measured[p])} TFLOP/s = {f(100 * measured[p] / chapter[p])} % (best row: {where(row)}{clock})",
                          SAME_NUMBER_RULE, {f"peak_{p}": measured[p]}))
    what = "tensor cores raise P by about an order of magnitude over FP32"
    if "fp32" in measured and len(measured) > 1:
        ratios = {p: v / measured["fp32"] for p, v in measured.items() if p != "fp32"}
        v = combine([same_orders(r, CHAPTER.tensor_core_orders) for r in ratios.values()])
        parts.append(Part(what, v, ", ".join(f"{p.upper()}/FP32 = {f(r)}×" for p, r in ratios.items()),
                          f"round(log10 ratio) == {CHAPTER.tensor_core_orders} for each: holds; else does not hold",
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
                          f"{f(lo)}–{f(hi)}: " + RANGE_RULE, {"wmma_rel_error_vs_fp32": e32}))
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
                          f"{SAME_PRODUCT_MAX_REL_ERROR:g} from the transposed product: holds; else does not hold", {}))
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


def _one_run_point(ev: Evidence, groups: Sequence[Sequence[str]], precision: str) -> Optional[pd.DataFrame]:
    """Square rows of ``precision`` from the one run and size where every group of variants has
    an evidence row: the largest such N, then the run with the most of the variants, then the
    latest run. None when no run measured them all at one size."""
    rows = pd.concat([data.square(ev.variant(v, "gpu", precision)) for g in groups for v in g])
    if rows.empty:
        return None
    candidates = []
    for (run, n), g in rows.groupby(["run_id", "n"], sort=True):
        if all(g["variant"].isin(list(grp)).any() for grp in groups):
            candidates.append((int(n), g["variant"].nunique(), run))
    if not candidates:
        return None
    n, _, run = max(candidates)
    return rows[(rows["run_id"] == run) & (rows["n"] == n)]


def c10(ev: Evidence) -> List[Part]:
    what = "mma.sync / wgmma are faster still than WMMA"
    at = _one_run_point(ev, (WMMA_STAGES, HAND_WRITTEN_MMA), "fp16")
    if at is None:
        return [not_measured(what, _need("wmma or wmma_tiled, and mma_sync or wgmma_*, in one run at one size",
                                         "claims_tensor_cores"))]
    w = ev.largest(at[at["variant"].isin(WMMA_STAGES)])
    h = ev.largest(at[at["variant"].isin(HAND_WRITTEN_MMA)])
    lib = ""
    if pd.notna(h.get("baseline_tflops")) and pd.notna(h.get("pct_of_baseline")):
        lib = (f"; {h['baseline_variant']} timed interleaved with it: {f(h['baseline_tflops'])} TFLOP/s, so the best "
               f"hand-written kernel is at {f(h['pct_of_baseline'])} % of cuBLAS")
    return [Part(what, HOLDS if faster(h, w) else DOES_NOT_HOLD,
                 f"FP16 {shape(h)}, one run: {h['variant']} {f(h['tflops'])} vs {w['variant']} {f(w['tflops'])} "
                 f"TFLOP/s ({f(w['time_median_s'] / h['time_median_s'])}×){lib}",
                 "the fastest mma.sync/wgmma stage faster beyond noise than the fastest WMMA stage of the same run "
                 "and size: holds; else does not hold",
                 {"mma_over_wmma": float(w["time_median_s"] / h["time_median_s"])})]


def _host_facts(ev: Evidence) -> dict:
    """The host facts a cpu_probe row carries (model, AVX-512F, FMA, cores, clock): facts of the
    machine, not timings, so any measured probe row of the CPU tells them, reliable or not."""
    rows = data.device_rows(ev.rows, "cpu", rows="measured")
    for _, r in rows[rows["backend"] == "cpu_probe"].iterrows():
        x = extra(r)
        if x.get("cpu_max_mhz"):
            return x
    return {}


MAX_CLOCK_SOURCE = "cpuinfo_max_freq"  # host facts whose clock is the CPU's maximum (cpufreq)


def c11(ev: Evidence) -> List[Part]:
    parts = []
    per_cycle = CHAPTER.cpu_flop_per_cycle_core
    what = f"CPU: AVX-512 + FMA ≈ {f(per_cycle)} FLOP per core per cycle (FP32 peak)"
    cpu = ev.peak("fp32", "cpu")
    facts = _host_facts(ev)
    probe = (f"the per-cycle peak needs a cycle-counted FMA-throughput probe on the CPU: {NO_PROBE}; "
             f"cpu_blas bounds it from below only at the CPU's maximum clock (cpufreq {MAX_CLOCK_SOURCE})")
    if cpu is None or not facts.get("cpu_max_mhz"):
        parts.append(not_measured(what, _need("CPU BLAS FP32 and the host facts of a cpu_probe row",
                                              "claims_cpu_gpu") + " and +experiment=claims_memory_roof"))
    else:
        threads = int(cpu["blas_threads"]) if pd.notna(cpu.get("blas_threads")) and str(cpu["blas_threads"]).strip() \
            else facts.get("cpus_allowed")
        cores = min(threads, facts.get("physical_cores_allowed") or threads)
        ghz = facts["cpu_max_mhz"] / 1e3
        per = float(cpu["tflops"]) * 1e12 / (cores * ghz * 1e9)
        is_max = MAX_CLOCK_SOURCE in str(facts.get("cpu_mhz_source") or "")
        text = (f"{cpu['device']}: BLAS {f(cpu['tflops'] * 1e3)} GFLOP/s ({where(cpu)}, best row, {threads} threads) "
                f"/ ({cores} cores × {f(ghz)} GHz, {facts.get('cpu_mhz_source')}) = {f(per)} FLOP/cycle/core achieved; "
                f"AVX-512F: {facts.get('avx512f')}, FMA: {facts.get('fma')}")
        numbers = {"cpu_flop_per_cycle_core": per, "cpu_gflops": float(cpu["tflops"]) * 1e3}
        rule = (f"achieved BLAS rate per cycle at the maximum clock is a lower bound of the peak: above "
                f"{f(per_cycle * (1 + SAME_NUMBER_REL))} (the chapter's +{SAME_NUMBER_REL:.0%}): does not hold; "
                f"else the peak itself is not measured")
        if not (facts.get("avx512f") and facts.get("fma")):
            p = not_measured(what, f"a CPU with AVX-512F and FMA (the chapter's); {probe}. Measured: {text}", rule)
        elif is_max and per > per_cycle * (1 + SAME_NUMBER_REL):
            p = Part(what, DOES_NOT_HOLD, text + ": the peak is at least that", rule)
        else:
            bound = "a lower bound of the peak, consistent with it" if is_max else \
                "not a bound: the clock is a current reading, not the maximum"
            p = not_measured(what, f"{probe}. Measured: {text} ({bound})", rule)
        p.numbers = numbers
        parts.append(p)
    what = "one GPU has tens of TFLOP/s in FP32"
    gpu = ev.peak("fp32")
    if gpu is None:
        parts.append(not_measured(what, _need("FP32 GEMMs on the GPU", "cublas_square")))
    else:
        lo, hi = TENS_OF_TFLOPS
        g = float(gpu["tflops"])
        text = f"{f(g)} TFLOP/s ({where(gpu)}, best row)"
        if cpu is not None:
            text += f" = {f(g / float(cpu['tflops']))}× the CPU BLAS's {f(float(cpu['tflops']) * 1e3)} GFLOP/s (best row)"
        parts.append(Part(what, in_range(g, lo, hi), text, f"{f(lo)}–{f(hi)} TFLOP/s: " + RANGE_RULE,
                          {"gpu_fp32_tflops": g}))
    what = "an order of magnitude more with tensor cores"
    tc = [ev.peak(p) for p in ("fp16", "bf16")]
    tc = [r for r in tc if r is not None]
    if gpu is None or not tc:
        parts.append(not_measured(what, _need("FP16/BF16 GEMMs", "cublas_square")))
    else:
        best = max(tc, key=lambda r: float(r["tflops"]))
        ratio = float(best["tflops"]) / float(gpu["tflops"])
        parts.append(Part(what, same_orders(ratio, CHAPTER.tensor_core_orders),
                          f"{f(best['tflops'])} TFLOP/s ({where(best)}, best row) = {f(ratio)}× FP32 (both achieved)",
                          f"round(log10 ratio) == {CHAPTER.tensor_core_orders}: holds; else does not hold",
                          {"tensor_core_ratio": ratio}))
    return parts


def _best_by_n(rows: pd.DataFrame) -> pd.Series:
    """Per square N, the best row's median time (one row of one run per N)."""
    rows = data.square(rows)
    if rows.empty:
        return pd.Series(dtype=float)
    best = data.best_rows(rows, ["n"])
    return pd.Series(best["time_median_s"].astype(float).to_numpy(), index=best["n"].astype(int).to_numpy())


def _cublas_by_n(ev: Evidence, precision: str) -> pd.Series:
    """The best standalone cuBLAS row's time per square N (:func:`analysis.data.cublas_standalone`)."""
    kern = data.cublas_standalone(ev.device_rows("gpu"))
    kern = kern[(kern["precision"] == precision) & (kern["m"] == kern["n"]) & (kern["n"] == kern["k"])]
    return pd.Series(kern["cublas_time_s"].astype(float).to_numpy(), index=kern["n"].astype(int).to_numpy())


def c12(ev: Evidence) -> List[Part]:
    what = f"for N < {CHAPTER.small_n} the CPU is often faster"
    cpu = _best_by_n(ev.variant("cpu_blas", "cpu", "fp32"))
    e2e = _best_by_n(ev.op("gemm_e2e", "gpu", "fp32"))
    kern = _cublas_by_n(ev, "fp32")
    common = sorted(set(cpu.index) & set(e2e.index))
    small = [n for n in common if n < CHAPTER.small_n]
    need = _need("CPU BLAS and the GPU end to end (gemm_e2e_gpu) at N < 128", "claims_cpu_gpu")
    if not small:
        return [not_measured(what, need), not_measured("launch and transfers dominate", need)]
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
    text = (f"CPU faster at {len(cpu_wins)} of {len(small)} sizes below {CHAPTER.small_n} "
            f"({', '.join(f'N={n}: CPU {f(cpu[n] * 1e6)} µs vs GPU {f(e2e[n] * 1e6)} µs' for n in small)}; best rows)")
    text += f"; GPU (end to end) faster from N = {cross}" if cross is not None else "; the GPU never overtakes"
    if share < MAJORITY:
        v = DOES_NOT_HOLD
    elif cross is not None and CHAPTER.small_n // 2 < cross <= 2 * CHAPTER.small_n:
        v = HOLDS
    else:
        v = OTHER_NUMBER
    parts = [Part(what, v, text,
                  f"CPU faster at >= {MAJORITY:.0%} of the N < {CHAPTER.small_n}, else does not hold; crossover "
                  f"within ({CHAPTER.small_n // 2}, {2 * CHAPTER.small_n}]: holds, elsewhere: another number",
                  {"cpu_wins_small_share": share, "crossover_n": float(cross) if cross else float("nan")})]
    what = "launch and transfers dominate (most of the GPU's end-to-end time at those N)"
    overhead = {n: 1 - kern[n] / e2e[n] for n in small if n in kern.index}
    if not overhead:
        parts.append(not_measured(what, _need("cuBLAS FP32 at N < 128 beside gemm_e2e_gpu", "claims_cpu_gpu")))
    else:
        low = min(overhead.values())
        parts.append(Part(what, HOLDS if low > DOMINATE_MIN else DOES_NOT_HOLD,
                          "; ".join(f"N={n}: kernel (cuBLAS, best row) {f(kern[n] * 1e6)} µs of {f(e2e[n] * 1e6)} µs "
                                    f"end to end: {f(100 * o)} % overhead" for n, o in sorted(overhead.items())),
                          f"1 - kernel / end to end > {DOMINATE_MIN:.0%} at every such N: holds; else does not hold",
                          {"gpu_overhead_min": low}))
    return parts


def c13(ev: Evidence) -> List[Part]:
    lo, hi = CHAPTER.gemv_speedup_range
    what = f"GEMV: the GPU's speedup is its bandwidth ratio, {f(lo)}–{f(hi)}×, never {f(CHAPTER.gemv_speedup_never)}×"
    g, c = _gemv_rows(ev, "gpu"), _gemv_rows(ev, "cpu")
    keys = ["m", "n", "k"]
    common = g.merge(c[keys].drop_duplicates(), on=keys)
    row_g = ev.largest(common)
    if row_g is None:
        return [not_measured(what, _need("GEMV on the GPU and the CPU at one shape", "claims_memory_roof"))]
    row_c = ev.largest(c[(c["m"] == row_g["m"]) & (c["n"] == row_g["n"]) & (c["k"] == row_g["k"])])
    speedup = float(row_c["time_median_s"] / row_g["time_median_s"])
    gbw, cbw = ev.measured_bandwidth("gpu"), ev.measured_bandwidth("cpu")
    text = (f"{shape(row_g)} FP32, best rows: CPU {f(row_c['time_median_s'] * 1e3)} ms vs GPU "
            f"{f(row_g['time_median_s'] * 1e3)} ms = {f(speedup)}×")
    numbers = {"gemv_speedup": speedup}
    if gbw is None or cbw is None:
        text += "; bandwidth ratio not measured (copy probes missing)"
        v = in_range(speedup, lo, hi) if speedup < CHAPTER.gemv_speedup_never else DOES_NOT_HOLD
    else:
        bw_ratio = gbw / cbw
        numbers["bandwidth_ratio"] = bw_ratio
        text += f"; copy bandwidth {f(gbw)} / {f(cbw)} GB/s = {f(bw_ratio)}×"
        explained = 1 / EXPLAINED_FACTOR <= speedup / bw_ratio <= EXPLAINED_FACTOR
        if speedup >= CHAPTER.gemv_speedup_never or not explained:
            v = DOES_NOT_HOLD
        else:  # the bandwidth ratio is this pair of machines', the chapter's range another pair's
            v = HOLDS if lo <= speedup <= hi else OTHER_NUMBER
    return [Part(what, v, text,
                 f"speedup >= {f(CHAPTER.gemv_speedup_never)}× or not within a factor {f(EXPLAINED_FACTOR)} of the "
                 f"copy-bandwidth ratio: does not hold; else in {f(lo)}–{f(hi)}×: holds, elsewhere: another number",
                 numbers)]


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
        parts.append(Part(what, HOLDS if (odd["status"] == "failed").all() and right_even else DOES_NOT_HOLD,
                          f"{shape(r)}: {x.get('unwritten_elements')} elements of C never written, error of the "
                          f"written ones {f(x.get('rel_error_of_written_elements'))}{ceil_text}; correct at "
                          f"{', '.join(dict.fromkeys(shape(e) for _, e in even.iterrows() if e['status'] == 'ok')) or 'no multiple of 32'}",
                          "fails its check where 32 does not divide the size and passes where it does: holds; else "
                          "does not hold", {"sgemm32_unwritten": float(x.get("unwritten_elements") or 0)}))
    what = "guards (or padding) fix it"
    guarded = rows[(rows["variant"] == "smem_tiled") & ((rows["m"] % t != 0) | (rows["n"] % t != 0) | (rows["k"] % t != 0))]
    if guarded.empty:
        parts.append(not_measured(what, _need("smem_tiled at a size no tile divides", "claims_ladder")))
    else:
        passed = guarded[guarded["status"] == "ok"]
        r = ev.largest(guarded.assign(time_median_s=guarded["time_median_s"].fillna(0)))
        parts.append(Part(what, HOLDS if len(passed) == len(guarded) else DOES_NOT_HOLD,
                          f"smem_tiled (sgemm32 plus guards): {len(passed)} of {len(guarded)} rows at sizes 32 does not "
                          f"divide pass their FP64 check (largest {shape(r)}: {r['status']}, rel. error "
                          f"{f(r['rel_error'])})", "every such row passes its check: holds; a failure: does not hold", {}))
    return parts


def c14b(ev: Evidence) -> List[Part]:
    parts = []
    what = f"a column read of an unpadded tile is a {f(CHAPTER.bank_conflict_ways)}-way bank conflict"
    s32 = ev.largest(ev.variant("smem_bank_stride32"))
    same_run = lambda rows: rows[rows["run_id"] == s32["run_id"]] if s32 is not None else rows.iloc[:0]
    ref = [ev.largest(same_run(ev.variant(v))) for v in ("smem_bank_stride33", "smem_bank_stride1")]
    ref = [r for r in ref if r is not None]
    if s32 is None or not ref:
        parts.append(not_measured(what, _need("smem_bank_stride32 and stride33/stride1 in one run", "claims_smem")))
    else:
        base = ref[0]
        ratio = float(s32["time_median_s"] / base["time_median_s"])
        v = same_number(ratio, CHAPTER.bank_conflict_ways) if ratio >= 2 else DOES_NOT_HOLD
        parts.append(Part(what, v, f"stride 32 takes {f(ratio)}× the time of {base['variant'].replace('smem_bank_', '')} "
                                   f"(same loads, conflict-free, one run)" + "".join(
                                       f"; {r['variant'].replace('smem_bank_', '')}: {f(s32['time_median_s'] / r['time_median_s'])}×"
                                       for r in ref[1:]),
                          f"time ratio against {f(CHAPTER.bank_conflict_ways)}: {SAME_NUMBER_RULE}; < 2: does not hold",
                          {"bank_conflict_ratio": ratio}))
    what = "padding the tile ([T][T+1]) removes it in the GEMM"
    pair = ev.pair("smem_tiled_colread_padded", "smem_tiled_colread", "fp32")
    if pair is None:
        parts.append(not_measured(what, _need("smem_tiled_colread and _padded in one run", "claims_ladder")))
    else:
        a, b = pair
        ratio = float(b["time_median_s"] / a["time_median_s"])
        parts.append(Part(what, HOLDS if faster(a, b) else DOES_NOT_HOLD,
                          f"{shape(a)} FP32, one run: column read {f(b['tflops'])} vs padded {f(a['tflops'])} TFLOP/s "
                          f"({f(ratio)}× slower unpadded)", "padded faster beyond noise: holds; else does not hold",
                          {"colread_slowdown": ratio}))
    return parts


def c14c(ev: Evidence) -> List[Part]:
    parts = []
    what = "TF32 is not lossless"
    t = ev.variant("cublas", "gpu", "tf32", timed=False)
    s = ev.variant("cublas", "gpu", "fp32", timed=False)
    keys = ["run_id", "m", "n", "k"]  # the same inputs: one run, one shape
    both = t[keys + ["rel_error"]].rename(columns={"rel_error": "tf32"}).merge(
        s[keys + ["rel_error"]].rename(columns={"rel_error": "fp32"}), on=keys).dropna()
    both = both[both["fp32"] > 0]
    # matrix-vector shapes take cuBLAS's FP32 path whatever the compute type (no tensor cores):
    # their TF32 rows carry no TF32 arithmetic to judge (the H200's showed FP32's error exactly)
    gemv = both[(both["m"] == 1) | (both["n"] == 1)]
    both = both[(both["m"] > 1) & (both["n"] > 1)]
    gemv_text = f"; {len(gemv)} matrix-vector shapes left out (no TF32 path in cuBLAS)" if not gemv.empty else ""
    if both.empty:
        return [not_measured(what, _need("cuBLAS FP32 and TF32 at the same shapes in one run", "claims_tf32")),
                not_measured("its accumulated error grows with K", _need("a K sweep", "claims_tf32"))]
    factor = (both["tf32"] / both["fp32"]).min()
    parts.append(Part(what, HOLDS if factor >= TF32_LOSS_MIN_FACTOR else DOES_NOT_HOLD,
                      f"rel. error TF32 {f(both['tf32'].min())}–{f(both['tf32'].max())} vs FP32 "
                      f"{f(both['fp32'].min())}–{f(both['fp32'].max())} over {len(both)} GEMM shapes (same run, same "
                      f"inputs); TF32 at least {f(factor)}× FP32{gemv_text}",
                      f"TF32 error >= {f(TF32_LOSS_MIN_FACTOR)}× FP32's at every shape: holds; else does not hold",
                      {"tf32_over_fp32_min": float(factor)}))
    what = "its accumulated error grows with K"
    sweep = both.groupby(["run_id", "m", "n"]).filter(lambda g: g["k"].nunique() >= 3)
    if sweep.empty:
        parts.append(not_measured(what, _need("a K sweep (3+ K at one m, n in one run)", "claims_tf32")))
        return parts
    import numpy as np

    # the run and (m, n) with the most K
    run, m, n = max(sweep.groupby(["run_id", "m", "n"])["k"].nunique().items(), key=lambda kv: (kv[1], kv[0]))[0]
    sweep = sweep[(sweep["run_id"] == run) & (sweep["m"] == m) & (sweep["n"] == n)]
    slopes = {}
    for col in ("tf32", "fp32"):
        x, y = np.log10(sweep["k"].astype(float)), np.log10(sweep[col].astype(float))
        slopes[col] = float(np.polyfit(x, y, 1)[0])
    ks = sorted(sweep["k"].astype(int).unique())
    st = slopes["tf32"]
    v = HOLDS if st >= ERROR_GROWTH_MIN_SLOPE else DOES_NOT_HOLD if st <= ERROR_FLAT_MAX_SLOPE else OTHER_NUMBER
    text = f"K = {ks[0]}…{ks[-1]}: TF32 error ∝ K^{f(st, 2)}, FP32 ∝ K^{f(slopes['fp32'], 2)}"
    if v == DOES_NOT_HOLD:
        text += ("; TF32's error does not grow with K: it is set by rounding the inputs to 10 bits, not by the "
                 "accumulation (FP32 in both)")
    parts.append(Part(what, v, text,
                      f"log-log slope of TF32's error against K >= {ERROR_GROWTH_MIN_SLOPE:g}: holds; <= "
                      f"{ERROR_FLAT_MAX_SLOPE:g}: does not hold; between: another number",
                      {"tf32_error_slope": st, "fp32_error_slope": slopes["fp32"]}))
    return parts


def c14d(ev: Evidence) -> List[Part]:
    parts = []
    n = 1024
    what = f"a {n}³ GEMM computes in about {f(CHAPTER.gemm_1024_ms)} ms"
    kern = data.cublas_standalone(ev.device_rows("gpu"))
    kern = kern[(kern["precision"] == "fp32") & (kern["m"] == n) & (kern["n"] == n) & (kern["k"] == n)]
    if kern.empty:
        return [not_measured(what, _need(f"cuBLAS FP32 at N = {n}", "claims_cpu_gpu")),
                not_measured("the transfers may take longer", _need("transfer probes", "claims_cpu_gpu"))]
    k = kern.iloc[0]
    k_s = float(k["cublas_time_s"])
    parts.append(Part(what, same_number(k_s * 1e3, CHAPTER.gemm_1024_ms),
                      f"cuBLAS FP32 {n}³ (best row, {k['cublas_variant']}): {f(k_s * 1e3)} ms "
                      f"({f(k['cublas_tflops'])} TFLOP/s)", SAME_NUMBER_RULE, {"gemm_1024_ms": k_s * 1e3}))
    what = "the transfers may take longer than the kernel"
    tr = data.transfer_times(ev.device_rows("gpu"))
    tr = tr[(tr["precision"] == "fp32") & (tr["m"] == n) & (tr["n"] == n) & (tr["k"] == n)]
    if tr.empty:
        parts.append(not_measured(what, _need("transfer probes at N = 1024", "claims_cpu_gpu")))
        return parts
    times = dict(zip(tr["memory"], tr["transfer_s"].astype(float)))
    longer = {mem: t > k_s for mem, t in times.items()}
    text = "; ".join(f"{mem}: {f(t * 1e3)} ms = {f(t / k_s)}× the kernel" for mem, t in sorted(times.items()))
    rows = ev.op("transfer", "gpu", "fp32")
    size = rows[(rows["m"] == n) & (rows["n"] == n) & (rows["k"] == n)]["bytes_min"]
    size_text = f" ({f(size.iloc[0] / 1e6)} MB)" if not size.empty else ""
    parts.append(Part(what, HOLDS if any(longer.values()) else DOES_NOT_HOLD,
                      f"H2D A, B + D2H C{size_text}, best rows: {text}",
                      "transfer time > kernel time (pageable or pinned): holds; else does not hold",
                      {f"transfer_over_kernel_{mem}": t / k_s for mem, t in times.items()}))
    return parts


def c14e(ev: Evidence) -> List[Part]:
    """The first call after the GPU idled (not the process's first call, which adds one-time
    start-up: module loading, context and handle creation). It includes a clock ramp only if the
    SM clock sat below the settled clock before it, and colder caches than the settled samples
    only if those ran on a warm L2 (``cache == warm``; the probe flushes the L2 before idling)."""
    what = "without warm-up the first run is slower (clock ramp-up, cold caches)"
    rows = ev.variant("first_run_gpu")
    row = ev.largest(rows)
    x = extra(row) if row is not None else {}
    if "after_idle_event_s" not in x:
        return [not_measured(what, _need("first_run_gpu", "claims_first_run"))]
    settled = float(row["time_median_s"])
    again = float(x["after_idle_event_s"])
    ratio = again / settled
    before = x.get("after_idle_sm_clock_before_mhz")
    settled_clock = row.get("sm_clock_min_mhz")
    ramp = before is not None and pd.notna(settled_clock) and float(before) < (1 - CLOCK_DROP_MIN) * float(settled_clock)
    cache = _str(row.get("cache"))
    cold = cache == "warm"
    first = x.get("first_call_event_s")
    text = (f"{where(row)}: first call after {f(x.get('idle_s'))} s idle {f(again * 1e3)} ms = {f(ratio)}× the settled "
            f"median {f(settled * 1e3)} ms (p80 {f(row['time_p80_s'] * 1e3)} ms); SM clock before it {f(before)} MHz, "
            f"settled {f(row['sm_clock_min_mhz'])}–{f(row['sm_clock_max_mhz'])} MHz; settled samples on a "
            f"{cache or '?'} L2")
    if first is not None:
        text += (f"; the process's first call {f(float(first) * 1e3)} ms ({f(float(first) / settled)}×) adds one-time "
                 f"start-up (module loading, handles), not what the chapter names")
    numbers = {"after_idle_ratio": ratio}
    rule = (f"the first call after idle >= {FIRST_RUN_MIN_RATIO:g}× the settled median and above its p80: holds; "
            f"else does not hold; measured only where the clock sat > {CLOCK_DROP_MIN:.0%} below the settled clock "
            f"before it (ramp) or the settled samples ran on a warm L2 (cold caches)")
    if not (ramp or cold):
        p = not_measured(what, _need("first_run_gpu after an idle long enough for the SM clock to drop (params.idle_s),"
                                     " and the settled median on a warm L2 (measure.cache=warm)", "claims_first_run")
                         + f". Measured here: {text}; neither a clock ramp nor colder caches than the settled "
                           f"samples was in the call", rule)
        p.numbers = numbers
        return [p]
    slower = ratio >= FIRST_RUN_MIN_RATIO and again > float(row["time_p80_s"])
    causes = " and ".join(c for c, on in (("a clock ramp", ramp), ("cold caches", cold)) if on)
    return [Part(what, HOLDS if slower else DOES_NOT_HOLD, f"{text} (the call had {causes})", rule, numbers)]


def c14f(ev: Evidence) -> List[Part]:
    what = "without the second __syncthreads() the results become random"
    rows = ev.variant("smem_tiled_nosync", "gpu", "fp32", statuses=("ok", "failed"), timed=False)
    rows = rows[pd.Series([extra(r).get("check_repeats", 1) > 1 for _, r in rows.iterrows()], index=rows.index,
                          dtype=bool)]
    row = ev.largest(rows.assign(time_median_s=rows["time_median_s"].fillna(0)))
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


def _row_counts(rows: pd.DataFrame) -> str:
    """How many rows are ok and how many of those are evidence, and why the others are not."""
    ok_rows = rows[rows["status"] == "ok"]
    why = data.not_evidence_reasons(ok_rows)
    kept = int((why == "").sum())
    left = why[why != ""].map(lambda w: w.split(" (")[0]).value_counts().sort_index()
    text = f"{len(ok_rows)} ok, {kept} of them evidence"
    if not left.empty:
        text += "; left out: " + ", ".join(f"{n} {w}" for w, n in left.items())
    return text


def render_markdown(verdicts: Sequence[Verdict], ds: data.Dataset) -> str:
    ev_gpu, ev_cpu = ds.gpu_ceilings, ds.cpu_ceilings
    lines = ["<!-- generated by `python -m analysis.claims` from result rows; do not edit -->", "",
             "# The chapter's claims, measured", "",
             f"Rows: {len(ds.rows)} ({_row_counts(ds.rows)}) from "
             f"{', '.join(map(_shown_path, ds.sources)) or 'the given data'}.  ",
             f"GPU: {ev_gpu.device or 'none'}; CPU: {ev_cpu.device or 'none'}.  ",
             "Verdicts: **holds**; **holds with another number** (right statement, not this hardware's number); "
             "**does not hold** (the rows contradict it: its direction, its order of magnitude or its range); "
             "**not measured** (the command that measures it is named). A claim's verdict is its worst measured "
             "part. Evidence: ok rows timed with CUDA events (or on the host), reliable and not contended; a "
             "point's number is its best row; comparisons are made inside one run at one size.", "",
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
    for name, value in (("SAME_NUMBER_REL", SAME_NUMBER_REL), ("ORDER_HALF_DECADES", ORDER_HALF_DECADES),
                        ("BANDWIDTH_BOUND_FRACTION", BANDWIDTH_BOUND_FRACTION),
                        ("FEW_PERCENT_MAX", FEW_PERCENT_MAX), ("ROOF_SLACK", ROOF_SLACK),
                        ("FASTER_MIN_GAIN", FASTER_MIN_GAIN), ("FIRST_RUN_MIN_RATIO", FIRST_RUN_MIN_RATIO),
                        ("CLOCK_DROP_MIN", CLOCK_DROP_MIN), ("WRONG_MIN_REL_ERROR", WRONG_MIN_REL_ERROR),
                        ("SAME_PRODUCT_MAX_REL_ERROR", SAME_PRODUCT_MAX_REL_ERROR),
                        ("TF32_LOSS_MIN_FACTOR", TF32_LOSS_MIN_FACTOR), ("ERROR_GROWTH_MIN_SLOPE", ERROR_GROWTH_MIN_SLOPE),
                        ("ERROR_FLAT_MAX_SLOPE", ERROR_FLAT_MAX_SLOPE), ("SLOWDOWN_MIN", SLOWDOWN_MIN),
                        ("MAJORITY", MAJORITY), ("DOMINATE_MIN", DOMINATE_MIN), ("EXPLAINED_FACTOR", EXPLAINED_FACTOR)):
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
    ap.add_argument("--out", type=Path, default=None,
                    help="output folder (default RESULTS/paper; required without RESULTS: --out outputs/paper "
                         "rewrites the committed report)")
    args = ap.parse_args(argv)
    out = data.output_folder("analysis.claims", args.results, args.out)
    if out is None:
        return 2
    results = args.results or [DEFAULT_RESULTS]
    ds = data.dataset_from_cli("analysis.claims", results)
    if ds is None:
        return 2
    verdicts = evaluate(ds)
    path = write_claims(ds, out, verdicts)
    print(f"analysis.claims: {len(ds.rows)} rows -> {path}")
    for v in verdicts:
        print(f"  {v.claim:5s} {v.verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
