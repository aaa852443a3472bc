"""The numbers of a comparison: the interval of a time ratio, the threshold, the verdict.

Direction, everywhere: ``time_ratio = median time of B / median time of A``; below 1 B is
faster, above 1 B is slower.

Interval: a percentile bootstrap of the ratio of medians over the two points' samples (2000
resamples, a seed fixed per point). It needs no model of the times, which are skewed and
heavy-tailed (clock dips, a late launch), and it is an interval for the very quantity reported,
the ratio of medians; a rank-based (Hodges-Lehmann) interval estimates a shift under an
equal-shape assumption that a clock change between runs breaks. Samples of one run are not
independent draws of every run (the clock settles per run): the interval covers the noise inside
the runs, and the threshold covers the drift between them.
"""
from __future__ import annotations

import math
import zlib
from typing import Optional, Sequence, Tuple

import numpy as np
import pandas as pd

RESAMPLES = 2000
LEVEL = 0.95
SAME, FASTER, SLOWER, UNSURE = "SAME", "FASTER", "SLOWER", "UNSURE"
VERDICTS = (SLOWER, UNSURE, FASTER, SAME)  # worst first: the order of every summary
BOOTSTRAP, QUANTILES = "bootstrap", "p20/p80"
NO_INTERVAL = "none"  # paired mode without samples: the rows keep no p20/p80 of the baseline

# Run-to-run drift of one point on one GPU: the 90th percentile of |ln(t_B / t_A)|, as a
# fraction, over the cuBLAS/cuBLASLt square points that outputs/reference/h200-2026-11-29/
# cublas_square and h200-2026-11-30/cublas_square both measured as evidence with noise <= 5 %
# in each (25 points; :func:`measured_drift` recomputes it, a test checks the two agree).
RUN_TO_RUN_DRIFT = 0.032
DRIFT_SOURCE = "outputs/reference/h200-2026-11-29/cublas_square vs h200-2026-11-30/cublas_square"
# Paired mode (A timed interleaved with B batch by batch in one run, analysis/compare/paired.py):
# both calls share every clock state, so the drift between runs does not apply. What the interval
# does not cover is clock movement inside the run that the two calls feel differently (a
# compute-bound call follows the SM clock, a memory-bound one less): an evidence row's in-band
# clock moved by at most measure.clock_stable_fraction (2%, gemmlab.config.MeasureConf; a row
# that drifted more is unreliable, gemmlab/measure/validity.py), so that bounds it.
WITHIN_RUN_DRIFT = 0.02
WITHIN_RUN_SOURCE = "measure.clock_stable_fraction: an evidence row's in-band SM clock moved less"
# Normalized mode (two runs, each point's time over the baseline timed interleaved with it in its own run,
# analysis/compare/normalized.py): the library shares each run's clock and power states, so what is left
# between runs is how differently the two calls feel them. Measured: the 90th percentile of
# |ln(pct_B / pct_A)| over pairs of runs of unchanged code, same baseline (:func:`measured_normalized_drift`
# over NORMALIZED_RUNS; a test checks the two agree): 1.0% (47 pairs, at most 1.4%), against 2.0% for the raw
# times of the same pairs (runs minutes apart; 3.2% across days, RUN_TO_RUN_DRIFT), though those rows' own
# noise reached 5.9% (8192, under the power cap).
NORMALIZED_DRIFT = 0.010
NORMALIZED_RUNS = (  # groups of runs of the same code: stage 12 (wgmma_ws) BF16 / FP16 at 4096 / 8192, seeds 1-8
    ("h200-2026-12-01/session5c/ws_repeat",),
    ("h200-2026-12-01/session5e/ws_repeat", "h200-2026-12-02/session6b/ws_seeds"),  # 4bc4942, 741893b: same kernel
)
NORMALIZED_SOURCE = ("stage 12's repeated runs with cuBLAS / cuBLASLt interleaved, outputs/reference/"
                     + ", ".join(r for g in NORMALIZED_RUNS for r in g))
DRIFT_MAX_NOISE = 0.05  # points noisier than this move with their noise (see point_threshold)
DRIFT_QUANTILE = 0.9


def measured_drift(a: pd.DataFrame, b: pd.DataFrame, key: Sequence[str],
                   max_noise: float = DRIFT_MAX_NOISE, quantile: float = DRIFT_QUANTILE) -> Tuple[float, int]:
    """The run-to-run drift between two runs of the same points on one device: the ``quantile`` of
    |ln(t_B / t_A)| over the points both measured (one row per key each, evidence already chosen)
    with noise <= ``max_noise`` on both sides, as a fraction (exp(q) - 1); and how many points."""
    m = a.merge(b, on=list(key), suffixes=("_a", "_b"))
    m = m[(m["noise_a"] <= max_noise) & (m["noise_b"] <= max_noise)]
    if m.empty:
        raise ValueError("no quiet point measured in both runs")
    logs = np.abs(np.log(m["time_median_s_b"].to_numpy(float) / m["time_median_s_a"].to_numpy(float)))
    return float(math.expm1(np.quantile(logs, quantile))), len(m)


def measured_normalized_drift(groups: Sequence[pd.DataFrame], quantile: float = DRIFT_QUANTILE) -> Tuple[float, int]:
    """The run-to-run drift of a time over its interleaved baseline: ``groups`` are rows of runs of one code
    (measured rows with pct_of_baseline); over every pair of rows of one point (variant, precision, shape)
    against the same baseline within a group, the ``quantile`` of |ln(pct_B / pct_A)|, as a fraction; and
    how many pairs."""
    logs = []
    for rows in groups:
        rows = rows[(rows["status"] == "ok") & rows["pct_of_baseline"].notna()]
        for _, g in rows.groupby(["variant", "precision", "m", "n", "k", "baseline_variant"]):
            p = g["pct_of_baseline"].to_numpy(float)
            logs += [abs(math.log(p[j] / p[i])) for i in range(len(p)) for j in range(i + 1, len(p))]
    if not logs:
        raise ValueError("no point measured twice against the same baseline")
    return float(math.expm1(np.quantile(logs, quantile))), len(logs)


def point_threshold(noise_a: float, noise_b: float, given: Optional[float],
                    floor: float = RUN_TO_RUN_DRIFT) -> float:
    """The threshold of one point: ``given`` (``--threshold``) as it is; by default the larger of
    ``floor`` (the measured drift between runs; the paired mode passes its own) and the noisier
    side's (p80 - p20) / median. A point whose samples spread
    wider than the drift has a median that moves about that much between runs: on the H200
    reference (DRIFT_SOURCE) 59 of 63 shared points moved less than this, 39 less than the
    drift alone."""
    if given is not None:
        return float(given)
    noise = max((x for x in (noise_a, noise_b) if x is not None and np.isfinite(x)), default=0.0)
    return max(floor, float(noise))


def point_seed(key: str, seed: int = 0) -> int:
    """A seed per point, from its key: the same interval whatever else is compared beside it."""
    return zlib.crc32(key.encode()) ^ seed


def bootstrap_interval(a: np.ndarray, b: np.ndarray, seed: int, resamples: int = RESAMPLES,
                       level: float = LEVEL) -> Tuple[float, float, float]:
    """median(b) / median(a) and its percentile-bootstrap interval at ``level``."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples)
    chunk = max(1, 200_000 // max(len(a), len(b)))  # bounded memory for long runs
    for start in range(0, resamples, chunk):
        r = min(chunk, resamples - start)
        med_a = np.median(a[rng.integers(0, len(a), (r, len(a)))], axis=1)
        med_b = np.median(b[rng.integers(0, len(b), (r, len(b)))], axis=1)
        ratios[start:start + r] = med_b / med_a
    tail = (1 - level) / 2
    lo, hi = np.quantile(ratios, [tail, 1 - tail])
    ratio = float(np.median(b) / np.median(a))
    return ratio, float(min(lo, ratio)), float(max(hi, ratio))


def bootstrap_normalized(a_own: np.ndarray, a_base: np.ndarray, b_own: np.ndarray, b_base: np.ndarray, seed: int,
                         resamples: int = RESAMPLES, level: float = LEVEL) -> Tuple[float, float, float]:
    """(median(b_own) / median(b_base)) / (median(a_own) / median(a_base)): B's time over its baseline's
    against A's, and its percentile-bootstrap interval at ``level`` (the four sets resampled apart)."""
    sets = [np.asarray(x, float) for x in (a_own, a_base, b_own, b_base)]
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples)
    chunk = max(1, 200_000 // max(len(x) for x in sets))
    for start in range(0, resamples, chunk):
        r = min(chunk, resamples - start)
        med = [np.median(x[rng.integers(0, len(x), (r, len(x)))], axis=1) for x in sets]
        ratios[start:start + r] = (med[2] / med[3]) / (med[0] / med[1])
    tail = (1 - level) / 2
    lo, hi = np.quantile(ratios, [tail, 1 - tail])
    m = [float(np.median(x)) for x in sets]
    ratio = (m[2] / m[3]) / (m[0] / m[1])
    return ratio, float(min(lo, ratio)), float(max(hi, ratio))


QUANTILE_SAFETY = 2.0  # times the normal model's half-width: the rows' p20/p80 are themselves noisy


def quantile_interval(med_a: float, p20_a: float, p80_a: float, n_a: float,
                      med_b: float, p20_b: float, p80_b: float, n_b: float) -> Tuple[float, float, float]:
    """Without samples, from the rows' own p20, p80 and sample count: on a log scale each median
    is uncertain by twice its normal-model 95 % half-width, 2 x 1.96 x 1.253 sigma / sqrt(n) with
    sigma = ln(p80 / p20) / 1.683, the two sides combined in quadrature. Twice, because p20/p80
    of a few samples are noisy themselves: at n = 10 it still covers the true ratio in >= 95 %
    of draws, normal or skewed (tests/test_compare.py). A missing n counts as 10, the fewest an
    evidence row has."""
    def half(lo: float, hi: float, n: float) -> float:
        n = n if n is not None and math.isfinite(n) and n > 0 else 10.0
        return QUANTILE_SAFETY * 1.96 * 1.2533 * (math.log(hi / lo) / 1.683) / math.sqrt(n)

    ratio = med_b / med_a
    w = math.hypot(half(p20_a, p80_a, n_a), half(p20_b, p80_b, n_b))
    return ratio, ratio * math.exp(-w), ratio * math.exp(w)


def verdict(lo: float, hi: float, threshold: float) -> Tuple[str, str]:
    """SAME when the interval lies inside [1 - t, 1 + t]; SLOWER or FASTER when it lies wholly
    beyond it on one side; UNSURE otherwise, saying where it reaches. Never a direction the
    interval does not support."""
    band_lo, band_hi = 1.0 - threshold, 1.0 + threshold
    pct = f"{100 * threshold:.1f}%"
    if lo >= band_lo and hi <= band_hi:
        if lo > 1.0 or hi < 1.0:  # a difference the samples resolve, smaller than the threshold: said
            side, lo_pct, hi_pct = ("slower", lo - 1, hi - 1) if lo > 1.0 else ("faster", 1 - hi, 1 - lo)
            by = f"{100 * lo_pct:.1f}%" if f"{100 * lo_pct:.1f}" == f"{100 * hi_pct:.1f}" else \
                f"{100 * lo_pct:.1f}-{100 * hi_pct:.1f}%"
            return SAME, f"within ±{pct}; B {side} by {by} (resolved: the interval excludes 1)"
        return SAME, f"within ±{pct}"
    if lo > band_hi:
        return SLOWER, f"B slower by more than {pct}"
    if hi < band_lo:
        return FASTER, f"B faster by more than {pct}"
    if lo > 1.0:
        return UNSURE, f"B slower, but the interval reaches inside ±{pct}"
    if hi < 1.0:
        return UNSURE, f"B faster, but the interval reaches inside ±{pct}"
    return UNSURE, f"interval wider than ±{pct}"
