"""Whether a measured row can be trusted, decided once for every backend.

- ``reliability``: a row is ``reliable`` when it has at least ``measure.min_samples`` samples,
  noise at most ``measure.max_noise``, and the SM clock did not drift over the samples by more
  than ``measure.clock_stable_fraction`` (the median of the last third of the per-sample clock
  readings against the first third: a power-capped GEMM's clock oscillates around a settled
  level, which is not drift; a clock still falling when the samples started is).
- ``impossible``: a row faster than the device can go fails: TFLOP/s above the precision's peak
  at the highest SM clock seen while it ran (per-SM, per-clock rate x SMs x clock, from the device
  config), or a memory-bound probe moving more bytes per second than the device's bandwidth.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ..rows import as_float as _num
from ..rows import row_extra as _extra

# A measured rate may exceed the computed ceiling by this much before it counts as impossible:
# the clock is read right before each sample, not during it.
IMPOSSIBLE_MARGIN = 0.05
# Probes whose bytes_min is DRAM traffic once the data is much larger than the L2.
MEMORY_BOUND_OPS = ("copy", "vecadd", "gemv")


def reliability(row: Mapping[str, Any], measure) -> Dict[str, Any]:
    """{'reliable': bool, 'unreliable_reason': str | None} for a timed ok row, else {}."""
    samples = _num(row.get("samples"))
    if row.get("status") != "ok" or samples is None:
        return {}
    reasons = []
    if samples < measure.min_samples:
        reasons.append(f"{int(samples)} samples < min_samples {measure.min_samples}")
    noise = _num(row.get("noise"))
    if noise is not None and noise > measure.max_noise:
        reasons.append(f"noise {noise:.1%} > max_noise {measure.max_noise:.1%}")
    drift = _num(_extra(row).get("timer", {}).get("sm_clock_drift"))
    if drift is not None and abs(drift) > measure.clock_stable_fraction:
        reasons.append(f"SM clock drifted {drift:+.1%} over the samples "
                       f"(> clock_stable_fraction {measure.clock_stable_fraction:.0%})")
    return {"reliable": not reasons, "unreliable_reason": "; ".join(reasons) or None}


def peak_tflops(rate_per_sm_clock: float, sm_count: int, clock_mhz: float) -> float:
    return rate_per_sm_clock * sm_count * clock_mhz * 1e6 / 1e12


def impossible(row: Mapping[str, Any], rate: Optional[float], sm_count: Optional[int],
               clock_mhz: Optional[float], bandwidth_gbs: Optional[float],
               l2_bytes: Optional[int]) -> Optional[str]:
    """Why the row's throughput is beyond the device, or None."""
    if row.get("status") != "ok":
        return None
    tflops, flops = _num(row.get("tflops")), _num(row.get("flops"))
    if rate and sm_count and clock_mhz and tflops and flops:
        peak = peak_tflops(rate, sm_count, clock_mhz)
        if tflops > peak * (1 + IMPOSSIBLE_MARGIN):
            return (f"impossible result: {tflops:.4g} TFLOP/s is above the {row.get('precision')} peak of "
                    f"{peak:.4g} TFLOP/s at the highest SM clock seen ({clock_mhz:.0f} MHz x {sm_count} SMs x "
                    f"{rate:g} FLOP/clock/SM): the timing or the kernel is wrong")
    t, nbytes = _num(row.get("time_median_s")), _num(row.get("bytes_min"))
    if (row.get("op") in MEMORY_BOUND_OPS and bandwidth_gbs and t and nbytes and l2_bytes
            and nbytes >= 2 * l2_bytes):
        gbs = nbytes / t / 1e9
        if gbs > bandwidth_gbs * (1 + IMPOSSIBLE_MARGIN):
            return (f"impossible result: {gbs:.4g} GB/s moved by {row.get('op')} is above the device's "
                    f"memory bandwidth ({bandwidth_gbs:g} GB/s) with {nbytes / 2**20:.0f} MiB, far past "
                    "the L2: the timing or the byte count is wrong")
    return None
