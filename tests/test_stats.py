"""The median's 95% interval (gemmlab/measure/stats.py); the reliability rule that uses it is
tested in tests/test_check.py."""
from __future__ import annotations

import math
from math import comb

import numpy as np
import pytest

from conftest import ROOT

from gemmlab.measure import stats, validity
from gemmlab.measure.stats import median_ci, median_ci_ranks, summarize


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
