"""What the chapter states (its numbers and its reference device) and every threshold a
verdict turns on; the report quotes each threshold next to the verdict it decides."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

CHAPTER_DEVICE = "h100"  # conf/device/h100.yaml: the chapter's peaks and bandwidth

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

# the thresholds the report lists, in its order
LISTED_THRESHOLDS = ("SAME_NUMBER_REL", "ORDER_HALF_DECADES", "BANDWIDTH_BOUND_FRACTION", "FEW_PERCENT_MAX",
                     "ROOF_SLACK", "FASTER_MIN_GAIN", "FIRST_RUN_MIN_RATIO", "CLOCK_DROP_MIN", "WRONG_MIN_REL_ERROR",
                     "SAME_PRODUCT_MAX_REL_ERROR", "TF32_LOSS_MIN_FACTOR", "ERROR_GROWTH_MIN_SLOPE",
                     "ERROR_FLAT_MAX_SLOPE", "SLOWDOWN_MIN", "MAJORITY", "DOMINATE_MIN", "EXPLAINED_FACTOR")


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

