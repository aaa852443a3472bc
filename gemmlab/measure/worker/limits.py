"""The watchdog's time limits: how long a point should take, and when it has taken too long.

Derived from the point's FLOPs and the device's peak, never a bare constant: a kernel call is
expected to take ``flops / peak`` (the precision's datasheet peak) and may take as long as a
kernel at ``SLOW_FRACTION`` of the device's FP32 SIMT peak (the naive stage runs at about 2% of
it) before the watchdog calls it hung; the loops the timing settings bound by time (warm-up,
samples, the energy window) add their budgets, doubled. Each limit is at least
``measure.point_timeout_floor_s``. ``measure.point_timeout_s`` > 0 replaces all of it with one
fixed limit for the whole point.

The phases a point reports, in order: ``checked call``, ``timed samples``, ``energy window``,
``check after timing``; before the first, the inputs and the FP64 reference (and, for a backend
that measures a point its own way, everything) run under the whole point's limit. A backend that
searches its candidates (CUTLASS's kernel search, cuBLASLt's algorithm search) reports ``search``
with the number of trials (each checked once, then timed in ``SEARCH_ROUNDS`` + 1 interleaved
rounds of up to ``reps_for(call)`` back-to-back launches: gemmlab/measure/ranking.py), and
``setup after the search`` when it is done, so a candidate that hangs is named as the search's
and a long search is not cut by a limit sized for one kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from gemmlab.measure.ranking import SEARCH_ROUNDS, SEARCH_SAMPLE_S, reps_for

SLOW_FRACTION = 0.01  # a kernel at 1% of the FP32 SIMT peak is slow, not hung
HOST_FLOPS = 1e10  # host points (run.isolate=all): 10 GFLOP/s, one slow core
SETUP_FLOOR_S = 60.0  # inputs, the FP64 reference, loading a module: once per point
SEARCH_SLOWDOWN = 20  # a searched candidate's ranked launch at 1/20 of the precision's peak is slow, not hung
SEARCH = "search"  # the phase of a backend's search (its trials' count in the report)
AFTER_SEARCH = "setup after the search"  # the rest of the setup: the baselines, the check's reference


@dataclass(frozen=True)
class Limits:
    floor_s: float
    call_s: float  # one call at the precision's peak
    slow_call_s: float  # one call of a slow but working kernel
    n_calls: int  # the point and its baselines, timed interleaved
    warmup_s: float
    warmup_min_iters: int
    min_samples: int
    min_time_s: float
    max_time_s: float
    batch: int
    check_repeats: int
    energy_s: float  # 0 without measure.energy

    @classmethod
    def of(cls, measure, flops: float, peak_flops: float, slow_flops: float, n_baselines: int = 0):
        peak, slow = max(float(peak_flops), 1.0), max(float(slow_flops), 1.0)
        return cls(floor_s=float(measure.point_timeout_floor_s), call_s=flops / peak, slow_call_s=flops / slow,
                   n_calls=1 + int(n_baselines), warmup_s=float(measure.warmup_s),
                   warmup_min_iters=int(measure.warmup_min_iters), min_samples=int(measure.min_samples),
                   min_time_s=float(measure.min_time_s), max_time_s=float(measure.max_time_s),
                   batch=int(measure.batch), check_repeats=max(1, int(measure.check_repeats)),
                   energy_s=float(measure.energy_s) if measure.energy else 0.0)

    def phase(self, name: str) -> Tuple[float, float]:
        """(expected seconds, limit in seconds) of one phase of the point."""
        if name == "checked call":
            calls = self.check_repeats
            return calls * self.call_s, max(self.floor_s, 2 * calls * self.slow_call_s)
        if name == "timed samples":
            per_call_expected = self.warmup_s + max(self.min_time_s, self.min_samples * self.call_s)
            per_call_worst = (self.warmup_s + self.max_time_s
                              + (self.warmup_min_iters + self.min_samples + 2 * self.batch) * self.slow_call_s)
            return self.n_calls * per_call_expected, self.floor_s + 2 * self.n_calls * per_call_worst
        if name == "energy window":
            return self.energy_s, self.floor_s + 2 * self.energy_s + 2 * self.slow_call_s
        if name == "check after timing":
            return 0.0, self.floor_s
        raise ValueError(f"unknown phase {name!r}")

    @property
    def setup_s(self) -> float:
        """The limit of a point's setup (the inputs, the FP64 reference, loading a module)."""
        return SETUP_FLOOR_S + self.floor_s

    def search(self, n_trials: int) -> Tuple[float, float]:
        """(expected, limit) of a search over ``n_trials`` candidates: its reference, then each
        candidate checked once (as slow as a slow but working kernel at worst, as the checked call)
        and timed in the ranking's rounds, at most ``reps_for`` of a call at the peak per sample,
        each launch as slow as ``SEARCH_SLOWDOWN`` calls at the peak: the candidates are the
        libraries' kernels, which passed their check, so a ranking that takes longer is hung."""
        n, rounds = max(1, int(n_trials)), SEARCH_ROUNDS + 1
        expected = n * (self.call_s + rounds * max(SEARCH_SAMPLE_S, self.call_s))
        ranking = rounds * max(reps_for(self.call_s) * SEARCH_SLOWDOWN * self.call_s, SEARCH_SAMPLE_S)
        return expected, self.setup_s + 2 * n * (self.slow_call_s + ranking)

    def after_search(self) -> Tuple[float, float]:
        """(expected, limit) of what is left of the setup once a search is done."""
        return 0.0, self.setup_s

    def whole(self) -> Tuple[float, float]:
        """(expected, limit) of the whole point: the setup, then every phase."""
        phases = [self.phase(p) for p in ("checked call", "timed samples", "check after timing")]
        if self.energy_s:
            phases.append(self.phase("energy window"))
        expected = sum(e for e, _ in phases)
        return expected, self.setup_s + sum(lim for _, lim in phases)
