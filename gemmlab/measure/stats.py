"""Summary statistics of timing samples and the stopping rule shared by every timer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Sequence

import numpy as np


@dataclass
class Summary:
    median_s: float
    p20_s: float
    p80_s: float
    min_s: float
    samples: int

    @property
    def noise(self) -> float:
        """(p80 - p20) / median: the spread the stopping rule and comparisons care about."""
        return (self.p80_s - self.p20_s) / self.median_s if self.median_s > 0 else float("inf")


def summarize(times_s: Sequence[float]) -> Summary:
    t = np.asarray(times_s, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no timing samples")
    p20, med, p80 = np.quantile(t, [0.2, 0.5, 0.8])
    return Summary(float(med), float(p20), float(p80), float(t.min()), int(t.size))


def should_stop(times_s: Sequence[float], elapsed_s: float, measure) -> bool:
    """Stop at max_samples or max_time; otherwise once min_samples, min_time and max_noise hold."""
    n = len(times_s)
    if n >= measure.max_samples or elapsed_s >= measure.max_time_s:
        return True
    if n < measure.min_samples or elapsed_s < measure.min_time_s:
        return False
    return summarize(times_s).noise <= measure.max_noise


def timing_fields(s: Summary, flops: int) -> Dict[str, Any]:
    """The timing columns of a result row."""
    return {"time_median_s": s.median_s, "time_p20_s": s.p20_s, "time_p80_s": s.p80_s,
            "time_min_s": s.min_s, "samples": s.samples, "noise": s.noise,
            "tflops": flops / s.median_s / 1e12}
