"""Claims measured by ``experiments/claims_ladder.yaml`` (the hand-written stages, with hardware
counters for the intensities): naive GEMM (C3), shared tiles (C4), register blocking (C6),
double buffering (C7), unguarded tiles (C14a), the missing barrier (C14f)."""
from __future__ import annotations

from typing import List, Optional, Tuple

import pandas as pd

from .. import data
from .chapter import BANDWIDTH_BOUND_FRACTION, CHAPTER, FEW_PERCENT_MAX
from .evidence import Evidence, defines, extra, f, shape, where
from .registry import claim
from .verdict import (
    DOES_NOT_HOLD,
    HOLDS,
    NO_PROBE,
    OTHER_NUMBER,
    SAME_NUMBER_RULE,
    Part,
    faster,
    need_rows,
    not_measured,
    same_number,
    same_orders,
)

COUNTERS = " measure.counters=ncu"  # what a run needs for the counter columns


def _counters_need(what: str) -> str:
    return need_rows(f"{what} with hardware counters", "claims_ladder") + COUNTERS


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
        return None, not_measured(what, need_rows("the FP32 peak", "cublas_square"))
    return row, None


def _bandwidth_bound_part(ev: Evidence, row: pd.Series, what: str) -> Part:
    """Bandwidth-bound: DRAM intensity (counters) under the ridge and the throughput near its
    memory roof."""
    i = float(row["intensity_dram"])
    bw = ev.measured_bandwidth("gpu")
    r = ev.ridge("fp32")
    if bw is None:
        return not_measured(what, need_rows("the copy probe", "claims_memory_roof"))
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


@claim("C3", "5.2", "Naive GEMM: I ≈ 0.25 FLOP/B, two orders below the ridge, a few percent of peak; L1/L2 win "
                    "back part.", "ladder; roofline")
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
        parts.append(not_measured(what, need_rows("the naive stage and the FP32 peak", "claims_ladder")))
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


@claim("C4", "5.3", "T×T shared tiles: I = T/4 = 8 at T = 32, under the FP32 ridge: still bandwidth-bound; 32 "
                    "FLOP/B needs a 128×128 block tile.", "ladder; roofline")
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


@claim("C6", "5.4", "Register blocking 8×8 per thread: 4 FMA per shared read; 128×128 block tile ≈ 32 FLOP/B, "
                    "just over the ridge.", "ladder; roofline")
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
        parts.append(not_measured(what, need_rows("register_blocked and smem_tiled in one run", "claims_ladder")))
    else:
        a, b = pair
        parts.append(Part(what, HOLDS if faster(a, b) else DOES_NOT_HOLD,
                          f"{shape(a)}, one run: {f(a['tflops'])} vs {f(b['tflops'])} TFLOP/s "
                          f"({f(b['time_median_s'] / a['time_median_s'])}×)",
                          "faster beyond noise (p80 below the other's p20): holds; else does not hold",
                          {"register_blocked_speedup": float(b["time_median_s"] / a["time_median_s"])}))
    return parts


@claim("C7", "5.4", "Double buffering with cp.async hides the load latency.", "ladder")
def c7(ev: Evidence) -> List[Part]:
    what = "double buffering with cp.async hides load latency (faster than the same tile without it)"
    pair = ev.pair("double_buffered", "register_blocked", "fp32")
    if pair is None:
        return [not_measured(what, need_rows("double_buffered and register_blocked in one run", "claims_ladder"))]
    a, b = pair
    speedup = float(b["time_median_s"] / a["time_median_s"])
    return [Part(what, HOLDS if faster(a, b) else DOES_NOT_HOLD,
                 f"{shape(a)} FP32, one run: double_buffered {f(a['tflops'])} vs register_blocked {f(b['tflops'])} "
                 f"TFLOP/s ({f(speedup)}×)", "faster beyond noise (p80 below the other's p20): holds; else does not hold",
                 {"double_buffer_speedup": speedup})]


@claim("C14a", "5.7", "Tiles that do not divide M, N, K need guards or padding; sgemm32 assumes multiples of 32.",
       "probe rows (claims_ladder)")
def c14a(ev: Evidence) -> List[Part]:
    parts = []
    t = CHAPTER.tile
    what = "sgemm32 as printed (no guards) is wrong when M, N, K are not multiples of 32"
    rows = ev.device_rows("gpu", ("ok", "failed"))
    ung = rows[rows["variant"] == "sgemm32_unguarded"]
    odd = ung[(ung["m"] % t != 0) | (ung["n"] % t != 0) | (ung["k"] % t != 0)]
    even = ung[(ung["m"] % t == 0) & (ung["n"] % t == 0) & (ung["k"] % t == 0)]
    if odd.empty:
        parts.append(not_measured(what, need_rows("sgemm32_unguarded at a size no tile divides", "claims_ladder")))
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
        parts.append(not_measured(what, need_rows("smem_tiled at a size no tile divides", "claims_ladder")))
    else:
        passed = guarded[guarded["status"] == "ok"]
        r = ev.largest(guarded.assign(time_median_s=guarded["time_median_s"].fillna(0)))
        parts.append(Part(what, HOLDS if len(passed) == len(guarded) else DOES_NOT_HOLD,
                          f"smem_tiled (sgemm32 plus guards): {len(passed)} of {len(guarded)} rows at sizes 32 does not "
                          f"divide pass their FP64 check (largest {shape(r)}: {r['status']}, rel. error "
                          f"{f(r['rel_error'])})", "every such row passes its check: holds; a failure: does not hold", {}))
    return parts


@claim("C14f", "5.7", "Without the second __syncthreads() the next tile overwrites shared memory still being "
                      "read: results become random.", "probe rows (claims_ladder)")
def c14f(ev: Evidence) -> List[Part]:
    what = "without the second __syncthreads() the results become random"
    rows = ev.variant("smem_tiled_nosync", "gpu", "fp32", statuses=("ok", "failed"), timed=False)
    rows = rows[pd.Series([extra(r).get("check_repeats", 1) > 1 for _, r in rows.iterrows()], index=rows.index,
                          dtype=bool)]
    row = ev.largest(rows.assign(time_median_s=rows["time_median_s"].fillna(0)))
    if row is None:
        return [not_measured(what, need_rows("smem_tiled_nosync with measure.check_repeats > 1", "claims_ladder"))]
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
