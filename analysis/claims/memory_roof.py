"""Claims measured by ``experiments/claims_memory_roof.yaml`` (the copy probe's memory roof,
vector add and GEMV), with the peaks of ``cublas_square``: the roofline (C1), the intensity
table (C2), GEMV on both sides (C13)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import pandas as pd

from .. import data, tables
from .chapter import BANDWIDTH_BOUND_FRACTION, CHAPTER, EXPLAINED_FACTOR, ROOF_SLACK
from .evidence import Evidence, f, shape, where
from .registry import claim
from .verdict import (
    DOES_NOT_HOLD,
    HOLDS,
    OTHER_NUMBER,
    SAME_NUMBER_RULE,
    Part,
    in_range,
    need_rows,
    not_measured,
    same_number,
    same_orders,
)

DRAM_OPS = ("gemm", "gemv", "vecadd")  # ops whose bytes_min is DRAM traffic (copy defines the roof)


def _ridge_text(ev: Evidence, precision: str) -> Tuple[Optional[float], str]:
    r = ev.ridge(precision)
    if r is None:
        return None, ""
    ridge, peak, bw, src = r
    return ridge, (f"I* = {f(peak['tflops'])} TFLOP/s ({where(peak)}, best row) / {f(bw / 1e3)} TB/s ({src}) "
                   f"= {f(ridge)} FLOP/B")


@claim("C1", "5.1", "Roofline: I = FLOPs/bytes, I* = P/BW, T = max(FLOPs/P, bytes/BW); H100 FP32 I* ≈ 20, "
                    "TF32 ≈ 148 FLOP/B.", "roofline; table peaks")
def c1(ev: Evidence) -> List[Part]:
    parts = []
    for p in ("fp32", "tf32"):
        chapter = ev.chapter_ridge(p)
        ridge, text = _ridge_text(ev, p)
        what = f"ridge I* = P / BW for {p.upper()} (chapter {f(chapter)} FLOP/B on the H100)"
        if ridge is None or chapter is None:
            parts.append(not_measured(what, need_rows(f"{p} GEMMs (cuBLAS peak)", "cublas_square")))
            continue
        parts.append(Part(what, same_number(ridge, chapter), text, SAME_NUMBER_RULE + f" (of {f(chapter)})",
                          {f"ridge_{p}": ridge, f"chapter_ridge_{p}": chapter}))
    # the model's bound: no measured time below T = max(FLOPs / P, bytes / BW), with P and BW the
    # datasheet's peaks (upper bounds a row can only beat through a timing or accounting error).
    # The measured ceilings cannot serve here: P is the best row itself (never beaten by
    # construction), and the copy probe reads and writes, so read-only streams beat it.
    what = "T = max(FLOPs/P, bytes/BW) bounds every measured GPU time (GEMM, GEMV, vector add)"
    rows = ev.device_rows("gpu")
    rows = rows[rows["op"].isin(DRAM_OPS) & rows["time_median_s"].notna() & (rows["time_median_s"] > 0)
                & (rows["cache"] != "warm") & (rows["bytes_min"] > 0)]
    sheet = ev.gpu_ceil.datasheet_tflops
    rows = rows[rows["precision"].isin(list(sheet))]
    if rows.empty:
        parts.append(not_measured(what, need_rows("GPU GEMMs", "claims_memory_roof")))
        return parts
    bw = ev.gpu_ceil.datasheet_bandwidth_gbs * 1e9
    p_flops = rows["precision"].map(lambda p: sheet[p] * 1e12)
    roof_s = pd.concat([rows["flops"] / p_flops, rows["bytes_min"] / bw], axis=1).max(axis=1)
    ratio = rows["time_median_s"] / roof_s
    below = rows[ratio < 1 - ROOF_SLACK]
    worst = rows.loc[ratio.idxmin()]
    text = (f"{len(rows)} rows (cold L2); closest to its roof: {where(worst)} at "
            f"{f(1 / ratio.min() * 100)} % of T's speed (datasheet P and BW, "
            f"{f(ev.gpu_ceil.datasheet_bandwidth_gbs / 1e3)} TB/s)")
    if not below.empty:
        text += f"; {len(below)} rows faster than T, e.g. {where(below.iloc[0])}"
    copy_bw = ev.measured_bandwidth("gpu")
    if copy_bw is not None:
        rate = rows["bytes_min"] / rows["time_median_s"] / 1e9
        beyond = rows[rate > copy_bw * (1 + ROOF_SLACK)]
        if not beyond.empty:
            text += (f"; {len(beyond)} rows stream faster than the copy probe's {f(copy_bw / 1e3)} TB/s "
                     f"(up to {f(rate.max() / 1e3)} TB/s, {where(rows.loc[rate.idxmax()])}): read-mostly "
                     f"traffic beats a copy, so the copy probe understates the DRAM roof for them")
    parts.append(Part(what, HOLDS if below.empty else DOES_NOT_HOLD, text,
                      f"no row faster than T by more than {ROOF_SLACK:.0%} (P, BW: the datasheet's "
                      f"dense peaks)",
                      {"roofline_rows": float(len(rows)), "roofline_violations": float(len(below)),
                       "roofline_best_fraction": float(1 / ratio.min())}))
    return parts


@claim("C2", "5.1", "Vector add I ≈ 0.17 and GEMV I = 0.5 are bandwidth-bound; square GEMM N = 1024, I ≈ 170, is "
                    "compute-bound; a thousandfold apart.", "roofline; table intensity")
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
            missing = need_rows(f"GPU {op.op} in FP32", "claims_cpu_gpu" if op.op == "gemm" else "claims_memory_roof")
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
            parts.append(not_measured(what_b, need_rows("the FP32 peak and the copy probe", "claims_memory_roof")))
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
        parts.append(not_measured(what, need_rows("GPU vector add and GEMM N = 1024", "claims_memory_roof")))
    return parts


def _gemv_rows(ev: Evidence, kind: str, precision: str = "fp32") -> pd.DataFrame:
    rows = ev.op("gemv", kind, precision)
    if rows.empty:  # cuBLAS GEMM points with n = 1 are GEMVs too
        g = ev.op("gemm", kind, precision)
        rows = g[(g["n"] == 1) | (g["m"] == 1)]
    return rows


@claim("C13", "5.6", "GEMV is bandwidth-bound on both sides: the GPU's speedup is the bandwidth ratio, 5–10×, "
                     "never 100×.", "roofline; table intensity", ("cpu", "gpu"))
def c13(ev: Evidence) -> List[Part]:
    lo, hi = CHAPTER.gemv_speedup_range
    what = f"GEMV: the GPU's speedup is its bandwidth ratio, {f(lo)}–{f(hi)}×, never {f(CHAPTER.gemv_speedup_never)}×"
    g, c = _gemv_rows(ev, "gpu"), _gemv_rows(ev, "cpu")
    keys = ["m", "n", "k"]
    common = g.merge(c[keys].drop_duplicates(), on=keys)
    row_g = ev.largest(common)
    if row_g is None:
        return [not_measured(what, need_rows("GEMV on the GPU and the CPU at one shape", "claims_memory_roof"))]
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
