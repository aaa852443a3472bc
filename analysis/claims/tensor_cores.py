"""Claims measured by ``experiments/claims_tensor_cores.yaml``: WMMA's error, layout and
alignment (C9), mma.sync and wgmma against WMMA (C10)."""
from __future__ import annotations

from typing import List, Optional, Sequence

import pandas as pd

from .. import data
from .chapter import CHAPTER, SAME_PRODUCT_MAX_REL_ERROR, SLOWDOWN_MIN, WRONG_MIN_REL_ERROR
from .evidence import Evidence, extra, f, shape
from .registry import claim
from .verdict import DOES_NOT_HOLD, HOLDS, OTHER_NUMBER, RANGE_RULE, Part, faster, in_range, need_rows, not_measured

HAND_WRITTEN_MMA = ("mma_sync", "wgmma_tma", "wgmma_ws")
WMMA_STAGES = ("wmma", "wmma_tiled")


@claim("C9", "5.5", "WMMA: 32-byte alignment or a crash / slow path; a layout mismatch silently transposes; "
                    "1e-4 to 1e-3 relative error against FP32 is normal.", "error_vs_precision; probe rows")
def c9(ev: Evidence) -> List[Part]:
    parts = []
    lo, hi = CHAPTER.wmma_error_range
    row = ev.largest(ev.variant("wmma_layout", precision="fp16", timed=False))
    x = extra(row) if row is not None else {}
    what = f"wmma_gemm's relative error against FP32 is {lo:g} to {hi:g}"
    if "rel_error_vs_fp64_of_fp32_data" not in x:
        parts.append(not_measured(what, need_rows("wmma_layout", "claims_tensor_cores")))
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
        parts.append(not_measured(what, need_rows("wmma_layout", "claims_tensor_cores")))
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
        parts.append(not_measured(what, need_rows("wmma_alignment", "claims_tensor_cores")))
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


@claim("C10", "5.5", "mma.sync and wgmma are faster still; production code uses CUTLASS or cuBLAS.", "ladder")
def c10(ev: Evidence) -> List[Part]:
    what = "mma.sync / wgmma are faster still than WMMA"
    at = _one_run_point(ev, (WMMA_STAGES, HAND_WRITTEN_MMA), "fp16")
    if at is None:
        return [not_measured(what, need_rows("wmma or wmma_tiled, and mma_sync or wgmma_*, in one run at one size",
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
