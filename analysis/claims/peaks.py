"""The claim on the datasheet peaks (C8), measured by ``experiments/cublas_square.yaml`` (the
best cuBLAS row per precision), no claims experiment."""
from __future__ import annotations

from typing import List

import pandas as pd

from .chapter import CHAPTER
from .evidence import Evidence, f, where
from .registry import claim
from .verdict import SAME_NUMBER_RULE, Part, combine, need_rows, not_measured, same_number, same_orders


@claim("C8", "5.5", "Tensor cores raise P by about an order of magnitude; H100: FP32 67, TF32 495, BF16/FP16 "
                    "989 TFLOP/s.", "roofline; table peaks")
def c8(ev: Evidence) -> List[Part]:
    parts = []
    chapter = ev.chapter_device.peak_tflops if ev.chapter_device else {}
    measured = {}
    for p in ("fp32", "tf32", "bf16", "fp16"):
        what = f"{p.upper()} peak ≈ {f(chapter.get(p))} TFLOP/s (H100 datasheet)"
        row = ev.peak(p)
        if row is None or p not in chapter:
            parts.append(not_measured(what, need_rows(f"{p} GEMMs", "cublas_square")))
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
        parts.append(not_measured(what, need_rows("FP32 and tensor-core GEMMs", "cublas_square")))
    return parts
