"""Whether a measured row can be trusted, decided once for every backend.

- ``reliability``: a row is ``reliable`` when it has at least ``measure.min_samples`` samples,
  the SM clock did not drift over the samples by more than ``measure.clock_stable_fraction`` (the
  median of the last third of the per-sample clock readings against the first third: a
  power-capped GEMM's clock oscillates around a settled level, which is not drift; a clock still
  falling when the samples started is), and either its noise is at most ``measure.max_noise``
  or its median is pinned down: the median's 95% interval (``median_ci``, its relative
  half-width, gemmlab/measure/stats.py) at most ``measure.max_median_ci`` with noise at most
  ``measure.max_noise_hard``. The second way is for short calls whose spread is the timer's own
  jitter (a 7-30 us GPU call: the CUDA events' start-up): more samples never narrow the spread,
  but they pin down the median, which is what every row reports and every ratio compares. Such
  a row says so in ``extra.reliability``.
- ``impossible``: a row faster than the device can go fails: TFLOP/s above the precision's peak
  at the highest SM clock seen while it ran (per-SM, per-clock rate x SMs x clock, from the device
  config), or a memory-bound probe moving more bytes per second than the device's bandwidth.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional

from ..rows import as_float as _num
from ..rows import row_extra as _extra

# A measured rate may exceed the computed ceiling by this much before it counts as impossible:
# the clock is read right before each sample, not during it.
IMPOSSIBLE_MARGIN = 0.05
# Probes whose bytes_min is DRAM traffic once the data is much larger than the L2.
MEMORY_BOUND_OPS = ("copy", "vecadd", "gemv")


# The settings a reason names (longest first: max_noise_hard before max_noise): the summary of a
# run groups unreliable rows by them.
CRITERIA = re.compile(r"min_samples|max_noise_hard|max_noise|max_median_ci|clock_stable_fraction|measure\.sanitize")


def reliability(row: Mapping[str, Any], measure) -> Dict[str, Any]:
    """{'reliable': bool, 'unreliable_reason': str | None} for a timed ok row, else {}; a row
    reliable by its median's interval rather than its noise also gets ``extra.reliability``."""
    samples = _num(row.get("samples"))
    if row.get("status") != "ok" or samples is None:
        return {}
    reasons = []
    if samples < measure.min_samples:
        reasons.append(f"{int(samples)} samples < min_samples {measure.min_samples}")
    noise, ci = _num(row.get("noise")), _num(row.get("median_ci"))
    by_ci = None
    if noise is not None and noise > measure.max_noise:
        why = f"noise {noise:.1%} > max_noise {measure.max_noise:.1%}"
        if noise > measure.max_noise_hard:
            reasons.append(f"{why} and > max_noise_hard {measure.max_noise_hard:.1%} (too wide for its "
                           "median's interval to count)")
        elif ci is None:
            reasons.append(f"{why} and no median_ci <= max_median_ci (too few samples for one)")
        elif ci > measure.max_median_ci:
            reasons.append(f"{why} and median_ci ±{ci:.2%} > max_median_ci ±{measure.max_median_ci:.2%}")
        else:
            by_ci = {"by": "median_ci", "median_ci": ci, "max_median_ci": measure.max_median_ci,
                     "noise": noise, "max_noise": measure.max_noise}
    drift = _num(_extra(row).get("timer", {}).get("sm_clock_drift"))
    if drift is not None and abs(drift) > measure.clock_stable_fraction:
        reasons.append(f"SM clock drifted {drift:+.1%} over the samples "
                       f"(> clock_stable_fraction {measure.clock_stable_fraction:.0%})")
    out: Dict[str, Any] = {"reliable": not reasons, "unreliable_reason": "; ".join(reasons) or None}
    if by_ci and not reasons:
        out["extra"] = {**_extra(row), "reliability": by_ci}
    return out


def criteria(reason: Optional[str]) -> str:
    """The settings an ``unreliable_reason`` names, in its order ("max_noise + max_median_ci"):
    what a summary groups unreliable rows by (their numbers differ row to row)."""
    found = list(dict.fromkeys(CRITERIA.findall(str(reason or ""))))
    return " + ".join(found) or "other"


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
