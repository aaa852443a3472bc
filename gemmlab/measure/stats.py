"""Summary statistics of timing samples and the stopping rule shared by every timer."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

Z95 = 1.959964  # two-sided 95% quantile of the standard normal
# Fewer samples than this have no 95% interval of the median: even [min, max] covers the median
# with probability only 1 - 2^(1-n) (0.94 at n = 5, 0.97 at n = 6).
MEDIAN_CI_MIN_SAMPLES = 6


@dataclass
class Summary:
    median_s: float
    p20_s: float
    p80_s: float
    min_s: float
    samples: int
    median_ci: float = math.inf  # relative half-width of the median's 95% interval (median_ci())

    @property
    def noise(self) -> float:
        """(p80 - p20) / median: the spread the stopping rule and comparisons care about."""
        return (self.p80_s - self.p20_s) / self.median_s if self.median_s > 0 else float("inf")


def median_ci_ranks(n: int) -> Tuple[int, int]:
    """0-based indices (lo, hi) into n sorted samples of the distribution-free 95% confidence
    interval of the median: the number of samples below the true median is Binomial(n, 1/2), so
    [x_(j), x_(n+1-j)] (1-based) covers it with probability P(j <= B <= n-j); j = n/2 - 1.96
    sqrt(n)/2 rounded down (outward), at least 1. That covers >= 95% for every n >= 6 (checked
    exactly in tests/test_stats.py)."""
    j = max(1, math.floor(n / 2 - Z95 * math.sqrt(n) / 2))
    return j - 1, n - j


def median_ci(times_s: Sequence[float], median_s: Optional[float] = None) -> float:
    """(x_hi - x_lo) / (2 * median) of the median's 95% interval: the relative half-width, how
    well the samples pin the median down. Unlike the spread, it shrinks as 1/sqrt(n) with more
    samples. inf with fewer than MEDIAN_CI_MIN_SAMPLES samples or a median of 0."""
    t = np.sort(np.asarray(times_s, dtype=np.float64))
    if t.size < MEDIAN_CI_MIN_SAMPLES:
        return math.inf
    med = float(np.median(t)) if median_s is None else median_s
    if not med > 0:
        return math.inf
    lo, hi = median_ci_ranks(int(t.size))
    return float(t[hi] - t[lo]) / (2 * med)


def summarize(times_s: Sequence[float]) -> Summary:
    t = np.asarray(times_s, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no timing samples")
    p20, med, p80 = np.quantile(t, [0.2, 0.5, 0.8])
    return Summary(float(med), float(p20), float(p80), float(t.min()), int(t.size), median_ci(t, float(med)))


def extends(measure) -> bool:
    """Whether the stopping rule may take samples past max_samples (measure.max_samples_ci)."""
    return int(measure.max_samples_ci) > int(measure.max_samples)


def stop_reason(times_s: Sequence[float], elapsed_s: float, measure) -> Optional[str]:
    """Why sampling stops now, or None to go on.

    Up to max_samples: stop once min_samples, min_time_s and max_noise hold, or at max_samples /
    max_time_s. A spread above max_noise does not shrink with more samples, but the median's
    interval does: at max_samples, a row noisier than max_noise (and no noisier than
    max_noise_hard, past which it stays unreliable anyway) goes on, the same samples as before,
    until its median is pinned within max_median_ci, up to max_samples_ci and within max_time_s.
    """
    n = len(times_s)
    if elapsed_s >= measure.max_time_s:
        return "max_time_s"
    if n >= max(measure.max_samples, measure.max_samples_ci):
        return "max_samples_ci" if extends(measure) else "max_samples"
    if n < measure.min_samples or (elapsed_s < measure.min_time_s and n < measure.max_samples):
        return None
    t = np.asarray(times_s, dtype=np.float64)
    p20, med, p80 = np.quantile(t, [0.2, 0.5, 0.8])
    noise = (p80 - p20) / med if med > 0 else math.inf  # Summary.noise, without the interval's sort
    if noise <= measure.max_noise:
        return "max_noise"
    if n < measure.max_samples:
        return None
    if not extends(measure):
        return "max_samples"
    if noise > measure.max_noise_hard:
        return "max_noise_hard"  # unreliable whatever the count: more samples buy nothing
    if median_ci(t, float(med)) <= measure.max_median_ci:
        return "max_median_ci"
    return None


def should_stop(times_s: Sequence[float], elapsed_s: float, measure) -> bool:
    """Whether sampling stops now (stop_reason says why)."""
    return stop_reason(times_s, elapsed_s, measure) is not None


def timing_fields(s: Summary, flops: int) -> Dict[str, Any]:
    """The timing columns of a result row."""
    ci = s.median_ci if math.isfinite(s.median_ci) else None
    return {"time_median_s": s.median_s, "time_p20_s": s.p20_s, "time_p80_s": s.p80_s,
            "time_min_s": s.min_s, "samples": s.samples, "noise": s.noise, "median_ci": ci,
            "tflops": flops / s.median_s / 1e12}
