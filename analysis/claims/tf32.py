"""The claim measured by ``experiments/claims_tf32.yaml`` (cuBLAS FP32 and TF32 on the same
inputs, over a K sweep): TF32 is not lossless (C14c)."""
from __future__ import annotations

from typing import List

import numpy as np

from .chapter import ERROR_FLAT_MAX_SLOPE, ERROR_GROWTH_MIN_SLOPE, TF32_LOSS_MIN_FACTOR
from .evidence import Evidence, f
from .registry import claim
from .verdict import DOES_NOT_HOLD, HOLDS, OTHER_NUMBER, Part, need_rows, not_measured


@claim("C14c", "5.7", "TF32 is not lossless: its 10-bit mantissa makes accumulated error sensitive.",
       "error_vs_precision")
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
        return [not_measured(what, need_rows("cuBLAS FP32 and TF32 at the same shapes in one run", "claims_tf32")),
                not_measured("its accumulated error grows with K", need_rows("a K sweep", "claims_tf32"))]
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
        parts.append(not_measured(what, need_rows("a K sweep (3+ K at one m, n in one run)", "claims_tf32")))
        return parts
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
