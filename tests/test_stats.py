"""The median's 95% interval and the stopping rule that buys samples for it
(gemmlab/measure/stats.py), on the host's loop (gemmlab/measure/cpu.py) with a fake clock; the GPU
loop's half is in tests/test_timer_loop.py, the reliability rule's in tests/test_check.py."""
from __future__ import annotations

import math
import types
from math import comb

import numpy as np
import pytest

from conftest import ROOT

from gemmlab.measure import cpu, stats, validity
from gemmlab.measure.stats import median_ci, median_ci_ranks, stop_reason, summarize


def _measure(**kw):
    """The default run's stopping rule (conf/measure/default.yaml), changed by ``kw``."""
    m = dict(min_samples=10, max_samples=200, min_time_s=0.0, max_time_s=5.0, max_noise=0.02,
             max_samples_ci=4000, max_median_ci=0.005, max_noise_hard=0.10, warmup_s=0.0, warmup_min_iters=1)
    m.update(kw)
    return types.SimpleNamespace(**m)


def _coverage(n: int) -> float:
    """P(the true median lies in [x_lo, x_hi]) for n independent samples: the count B of samples
    below the median is Binomial(n, 1/2), and the interval covers it when lo < B <= hi (0-based)."""
    lo, hi = median_ci_ranks(n)
    return sum(comb(n, b) for b in range(lo + 1, hi + 1)) / 2 ** n


def test_the_interval_covers_the_median_at_95_percent_and_not_much_more():
    for n in list(range(6, 161)) + [199, 200, 201, 500, 1001, 4000]:
        c = _coverage(n)
        assert 0.95 <= c <= 0.999, (n, median_ci_ranks(n), c)
    # rounded outward, symmetric: [x_(j), x_(n+1-j)] with j = floor(n/2 - 1.96 sqrt(n)/2)
    assert median_ci_ranks(200) == (85, 114) and median_ci_ranks(100) == (39, 60)
    assert median_ci_ranks(30) == (8, 21)  # 15 - 5.37 = 9.63: rank 9, not 10


def test_the_interval_of_known_samples():
    # 1..100: median 50.5, the interval [x_(40), x_(61)] = [40, 61]
    assert median_ci(np.arange(1.0, 101.0)) == pytest.approx((61 - 40) / (2 * 50.5))
    # order does not matter
    assert median_ci(np.arange(100.0, 0.0, -1.0)) == pytest.approx((61 - 40) / (2 * 50.5))
    # half the samples at 1, half at 2: the median (1.5) is not pinned anywhere between them
    bimodal = [1.0] * 100 + [2.0] * 100
    assert median_ci(bimodal) == pytest.approx(1 / 3) and summarize(bimodal).median_ci == pytest.approx(1 / 3)
    # all alike: pinned exactly
    assert median_ci([3e-6] * 50) == 0.0
    # too few for a 95% interval at all
    assert median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) == math.inf
    assert stats.timing_fields(summarize([1.0, 2.0, 3.0]), 1)["median_ci"] is None


def test_more_samples_pin_the_median_but_not_the_spread():
    rng = np.random.default_rng(1)
    few, many = rng.normal(1.0, 0.05, 200), rng.normal(1.0, 0.05, 4000)
    s_few, s_many = summarize(few), summarize(many)
    assert s_few.noise == pytest.approx(s_many.noise, rel=0.15)  # the spread stays ~6.7%
    assert s_many.median_ci < s_few.median_ci / 3  # the interval shrinks as 1/sqrt(n): ~4.5x


def _loop(draw, m, elapsed_per_sample=0.0):
    """host_timed's loop without a host: samples from ``draw`` until the rule stops."""
    times = []
    while True:
        why = stop_reason(times, len(times) * elapsed_per_sample, m)
        if why:
            return times, why
        times.append(draw())


def _uniform(width, seed=0):
    """10 us calls spread uniformly over +-width/2: noise = 0.6 width."""
    rng = np.random.default_rng(seed)
    return lambda: 10e-6 * (1 + width * (rng.random() - 0.5))


def test_the_rule_buys_samples_only_for_a_noisy_median():
    m = _measure()
    # quiet (noise 1.2%): stops as soon as min_samples hold, as it always did
    t, why = _loop(_uniform(0.02), m)
    assert why == "max_noise" and len(t) == m.min_samples
    # noise 9% (its median's interval at 200 samples ~ +-1.0%): past max_samples until +-0.5%
    t, why = _loop(_uniform(0.15), m)
    assert why == "max_median_ci" and 300 < len(t) < 2000 and summarize(t).median_ci <= m.max_median_ci
    assert summarize(t[:200]).median_ci > m.max_median_ci  # it did need them
    # noise 30% > max_noise_hard: unreliable whatever the count, no samples bought
    t, why = _loop(_uniform(0.5), m)
    assert why == "max_noise_hard" and len(t) == m.max_samples
    # max_samples_ci caps it; max_samples_ci <= max_samples turns it off; max_time_s bounds it
    t, why = _loop(_uniform(0.15), _measure(max_samples_ci=400))
    assert why == "max_samples_ci" and len(t) == 400
    t, why = _loop(_uniform(0.15), _measure(max_samples_ci=200))
    assert why == "max_samples" and len(t) == 200
    t, why = _loop(_uniform(0.15), m, elapsed_per_sample=5.0 / 250)
    assert why == "max_time_s" and len(t) == 250


class _FakeClock:
    """time for gemmlab.measure.cpu: a call advances it by the call's duration."""

    def __init__(self, draw):
        self.t, self.draw = 0.0, draw

    def perf_counter(self):
        return self.t

    def perf_counter_ns(self):
        return int(round(self.t * 1e9))

    def call(self):
        self.t += self.draw()


@pytest.mark.parametrize("width,max_time_s,samples", [
    (0.02, 5.0, (10, 10)),  # quiet: as before
    (0.15, 5.0, (301, 1999)),  # noisy: more samples, until the median is pinned
    (0.15, 200 * 10e-6 + 0.0015, (201, 360)),  # ... within max_time_s (about 150 more 10 us calls)
    (0.50, 5.0, (200, 200)),  # past max_noise_hard: none bought
])
def test_the_host_timer_buys_samples_within_its_limits(monkeypatch, width, max_time_s, samples):
    clock = _FakeClock(_uniform(width))
    monkeypatch.setattr(cpu, "time", clock)
    t = cpu.host_timed(clock.call, _measure(max_time_s=max_time_s))
    s = t["summary"]
    assert samples[0] <= s.samples <= samples[1] and len(t["_samples"][0]["time_s"]) == s.samples


DEFAULT_RUN = ROOT / "outputs/reference/h200-2026-12-02/session8b/default_run"


@pytest.mark.skipif(not (DEFAULT_RUN / "samples.parquet").exists(), reason="the H200 default run is not here")
def test_the_committed_default_run_under_the_new_rule():
    """Its rows predate median_ci: read as before, they keep their verdicts (58 of 87 reliable).
    Their own 200 samples' median intervals, under the new rule, already pin down 24 of the 29
    noisy ones; the other 5 (+-0.55-0.69%: under 400 samples each, if the interval shrinks as
    1/sqrt(n)) are what the samples past max_samples are for."""

    import pandas as pd

    from analysis.read import normalize
    from gemmlab import rows as result_rows
    from gemmlab import samples
    from gemmlab.config import MeasureConf

    rows = normalize(result_rows.read(DEFAULT_RUN))
    ok = rows[rows["status"] == "ok"]
    assert ok["median_ci"].isna().all() and len(ok) == 87
    m = MeasureConf()
    again = [validity.reliability(r, m)["reliable"] for r in ok.to_dict("records")]
    assert again == list(ok["reliable"]) and sum(again) == 58  # no median_ci: the old rule's verdicts
    s = samples.read(DEFAULT_RUN)
    own = s[s["call"] == s["point_key"].map(dict(zip(ok["point_key"], ok["variant"])))]
    ci = own.groupby("point_key")["time_s"].apply(lambda t: median_ci(t.to_numpy()))
    with_ci = [validity.reliability({**r, "median_ci": ci[r["point_key"]]}, m) for r in ok.to_dict("records")]
    assert sum(r["reliable"] for r in with_ci) == 58 + 24
    left = ok[[not r["reliable"] for r in with_ci]]
    assert set(left["variant"]) == {"cpu_blas", "cublas", "cublaslt", "wmma"} and len(left) == 5
    assert pd.Series([ci[k] for k in left["point_key"]]).between(0.0054, 0.0070).all()
