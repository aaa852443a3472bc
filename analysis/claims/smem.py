"""Claims measured by ``experiments/claims_smem.yaml`` (shared-memory probes): its bandwidth and
latency (C5), bank conflicts of a column read (C14b)."""
from __future__ import annotations

from typing import List

from .chapter import CHAPTER
from .evidence import Evidence, extra, f, shape
from .registry import claim
from .verdict import (
    DOES_NOT_HOLD,
    HOLDS,
    OTHER_NUMBER,
    RANGE_RULE,
    SAME_NUMBER_RULE,
    Part,
    faster,
    in_range,
    need_rows,
    not_measured,
    same_number,
)


@claim("C5", "5.3", "Shared memory: more than 10× the bandwidth of device memory, 20–30 cycles of latency.",
       "probe rows (claims_smem)")
def c5(ev: Evidence) -> List[Part]:
    parts = []
    what = f"shared memory has more than {f(CHAPTER.smem_bandwidth_ratio_min)}× the device-memory bandwidth"
    row = ev.largest(ev.variant("smem_bandwidth"))
    bw = ev.measured_bandwidth("gpu")
    if row is None or bw is None:
        parts.append(not_measured(what, need_rows("smem_bandwidth and the copy probe", "claims_smem") +
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
        parts.append(not_measured(what, need_rows("smem_latency", "claims_smem")))
    else:
        parts.append(Part(what, in_range(float(cycles), lo, hi),
                          f"{f(cycles)} SM cycles per dependent load (pointer chase, clock64)",
                          f"{f(lo)}–{f(hi)} cycles: " + RANGE_RULE, {"smem_latency_cycles": float(cycles)}))
    return parts


@claim("C14b", "5.7", "Reading an unpadded shared tile by column gives 32-way bank conflicts.",
       "probe rows (claims_smem, claims_ladder)")
def c14b(ev: Evidence) -> List[Part]:
    parts = []
    what = f"a column read of an unpadded tile is a {f(CHAPTER.bank_conflict_ways)}-way bank conflict"
    s32 = ev.largest(ev.variant("smem_bank_stride32"))
    same_run = lambda rows: rows[rows["run_id"] == s32["run_id"]] if s32 is not None else rows.iloc[:0]
    ref = [ev.largest(same_run(ev.variant(v))) for v in ("smem_bank_stride33", "smem_bank_stride1")]
    ref = [r for r in ref if r is not None]
    if s32 is None or not ref:
        parts.append(not_measured(what, need_rows("smem_bank_stride32 and stride33/stride1 in one run", "claims_smem")))
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
        parts.append(not_measured(what, need_rows("smem_tiled_colread and _padded in one run", "claims_ladder")))
    else:
        a, b = pair
        ratio = float(b["time_median_s"] / a["time_median_s"])
        parts.append(Part(what, HOLDS if faster(a, b) else DOES_NOT_HOLD,
                          f"{shape(a)} FP32, one run: column read {f(b['tflops'])} vs padded {f(a['tflops'])} TFLOP/s "
                          f"({f(ratio)}× slower unpadded)", "padded faster beyond noise: holds; else does not hold",
                          {"colread_slowdown": ratio}))
    return parts
