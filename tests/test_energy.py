"""Energy per call (measure.energy, issue 21) on a simulated device: the counter's unit (mJ), the
per-call arithmetic, the throttle reasons, and the settings. The GPU run is in the `gpu` tests."""
from __future__ import annotations

import pytest

from conftest import compose_cfg

from gemmlab.measure import energy
from gemmlab.measure.nvml import ClockStats


class Device:
    """A device that draws ``power_w`` while busy: a call takes ``call_s`` of simulated time."""

    def __init__(self, power_w=700.0, call_s=0.002, mask=0x4, counter=True):
        self.t, self.power_w, self.call_s, self.mask, self.counter = 0.0, power_w, call_s, mask, counter
        self.energy_reason = "no counter here"
        self.calls = 0

    # the timed call and the host clock
    def fn(self):
        self.t += self.call_s
        self.calls += 1

    def clock(self):
        return self.t

    # the NVML surface energy.measure uses
    def energy_mj(self):
        return self.t * self.power_w * 1000.0 if self.counter else None

    def power_limit_w(self):
        return 700.0

    def throttle_mask(self):
        return self.mask


class Sampler:
    def __init__(self, dev, lag=0.8):
        self.dev, self.lag = dev, lag
        self.readings = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def window(self, spans):
        (t0, t1), = spans
        self.readings = [(t0 + (t1 - t0) * i / 10, 1470.0, self.dev.power_w * self.lag, 50.0) for i in range(11)]
        return ClockStats(1470.0, 1470.0, self.dev.power_w * self.lag, 50.0, 11)


def test_energy_per_call_from_the_counter_in_millijoules():
    dev = Device(power_w=700.0, call_s=0.002)
    w = energy.measure(dev.fn, lambda: None, dev, call_s=0.002, energy_s=1.0,
                       sampler_factory=lambda: Sampler(dev), clock=dev.clock)
    assert w.window_s >= 1.0 and w.calls >= 500
    assert w.energy_j == pytest.approx(700.0 * w.window_s)  # mJ / 1000, not mJ
    f = w.fields(flops=2 * 8192 ** 3)
    assert f["energy_j"] == pytest.approx(700.0 * 0.002)  # 1.4 J per call
    assert f["gflops_per_joule"] == pytest.approx(2 * 8192 ** 3 / 1.4 / 1e9)
    assert f["power_avg_w"] == pytest.approx(700.0)
    assert f["power_limit_w"] == 700.0 and f["sm_clock_avg_mhz"] == pytest.approx(1470.0)
    assert f["throttle_reasons"] == "sw_power_cap"
    # the polled power lags (80% of the counter's here): the row says how far they agree
    assert f["_energy_extra"]["energy_vs_power_x_time"] == pytest.approx(1 / 0.8, rel=1e-3)


def test_the_window_starts_after_a_lead_in_at_the_same_work():
    dev = Device(call_s=0.001)
    w = energy.measure(dev.fn, lambda: None, dev, call_s=0.001, energy_s=0.5,
                       sampler_factory=lambda: Sampler(dev), clock=dev.clock)
    assert dev.calls > w.calls  # the lead-in's calls are not in the window
    assert (dev.calls - w.calls) * 0.001 >= energy.LEAD_IN_FRACTION * 0.5 - 1e-9


def test_no_counter_says_why():
    dev = Device(counter=False)
    with pytest.raises(RuntimeError, match="no counter here"):
        energy.measure(dev.fn, lambda: None, dev, 0.001, 0.1, lambda: Sampler(dev), clock=dev.clock)


@pytest.mark.parametrize("mask, names", [(0, ""), (0x4, "sw_power_cap"), (0x4 | 0x8, "sw_power_cap,hw_slowdown"),
                                         (0x40 | 0x1000, "hw_thermal_slowdown,0x1000")])
def test_throttle_reason_names(mask, names):
    assert energy.reason_names(mask) == names


def test_energy_settings_compose_and_are_checked(tmp_path):
    from gemmlab import validate

    cfg = compose_cfg(["measure.energy=true", "measure.energy_s=2"], tmp_path)
    assert cfg.measure.energy is True and cfg.measure.energy_s == 2.0
    problems = validate.problems(compose_cfg(["measure.energy_s=0"], tmp_path))
    assert any(p.path == "measure.energy_s" for p in problems), problems


def test_energy_s_zero_is_refused_at_the_command_line(tmp_path):
    import subprocess
    import sys

    from conftest import ROOT

    r = subprocess.run([sys.executable, "run.py", "measure.energy_s=0", f"hydra.run.dir={tmp_path}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "measure.energy_s" in r.stderr + r.stdout


# -- sparse inputs: the power study's distribution, checked and never evidence for peaks ----------
def test_sparse_inputs_are_mostly_zero_and_pass_the_check_on_the_cpu(tmp_path):
    import numpy as np

    from conftest import run_points
    from gemmlab.measure import check

    x = check.random_matrix(np, np.random.default_rng(1), (512, 512), "sparse")
    assert abs((x == 0).mean() - check.SPARSE_ZERO_FRACTION) < 0.01 and (x != 0).any()
    cfg = compose_cfg(["variant=cpu_blas", "precision=[fp32,fp64]", "sizes=smoke", "measure=quick",
                       "measure.distribution=sparse", "run.progress=false"], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    assert rows and all(r["status"] == "ok" for r in rows), [r["reason"] for r in rows]
    assert {r["distribution"] for r in rows} == {"sparse"}


def test_sparse_and_exact_rows_set_no_peak():
    import pandas as pd

    from analysis import data

    df = data.normalize(pd.DataFrame([
        {"status": "ok", "timer": "cuda_event", "backend": "cublas", "variant": "cublas", "kind": "gpu",
         "distribution": d, "samples": 20} for d in ("normal", "uniform", "exact", "sparse", "")]))
    assert list(data.evidence_mask(df)) == [True, True, False, False, True]
    assert list(data.not_evidence_reasons(df))[2:4] == ["exact inputs", "sparse inputs"]


def test_rows_timed_with_the_check_off_are_not_evidence(tmp_path):
    """measure.check=false (a diagnostic build, wrong by design): the CPU run's rows say so in extra, and
    the analysis leaves them out with that reason; the same points with the check are not left out so."""
    import json

    import pandas as pd
    from conftest import run_points

    from analysis import data

    rows = {}
    for check in ("true", "false"):
        cfg = compose_cfg(["variant=cpu_blas", "precision=[fp64]", "sizes=smoke", "measure=quick",
                           f"measure.check={check}", "run.progress=false"], tmp_path)
        _, got = run_points(cfg, tmp_path / f"run-{check}")
        assert got and all(r["status"] == "ok" for r in got), [r["reason"] for r in got]
        rows[check] = data.normalize(pd.DataFrame(got))
    assert all(json.loads(e).get("check") == "off" for e in rows["false"]["extra"])
    assert all("check" not in json.loads(e or "{}") for e in rows["true"]["extra"])
    assert not data.evidence_mask(rows["false"]).any()
    assert set(data.not_evidence_reasons(rows["false"])) == {"unchecked (measure.check=false)"}
    assert "unchecked (measure.check=false)" not in set(data.not_evidence_reasons(rows["true"]))


def test_the_inputs_experiment_sweeps_distributions_with_energy(tmp_path):
    cfg = compose_cfg(["+experiment=inputs_power", "measure.distribution=sparse"], tmp_path)
    assert cfg.measure.energy and cfg.measure.distribution.value == "sparse"
    from omegaconf import OmegaConf

    from conftest import ROOT

    params = OmegaConf.load(ROOT / "experiments/inputs_power.yaml").hydra.sweeper.params
    assert set(params["measure.distribution"].split(",")) == {"normal", "uniform", "exact", "sparse"}


# -- the L2 / L1 bandwidth probes' host side, on a simulated executor ----------------------------
def test_cache_probes_count_the_bytes_they_request_and_refuse_a_flushed_cache():
    import types

    import numpy as np

    from gemmlab.backends.probes.cache import VEC4, L1Bandwidth, L2Bandwidth
    from gemmlab.backends.probes.common import ProbeSkip

    launches = []

    class Timer:
        cache = "warm"

        def measure(self, calls):
            calls[0][0]()
            return [types.SimpleNamespace(summary=types.SimpleNamespace(median_s=1e-3))]

    ex = types.SimpleNamespace(cp=np, dev={"sm_count": 132, "l2_bytes": 60 * 2**20}, timer=Timer(),
                               timed_fields=lambda t, flops, cache=None: ({"time_median_s": 1e-3}, {}))
    backend = types.SimpleNamespace(function=lambda ex, p, entry: lambda grid, block, args: launches.append(
        (entry, grid, block, [a.shape if isinstance(a, np.ndarray) else int(a) for a in args])))
    p = types.SimpleNamespace(m=1, n=1, k=1, compute="fp32")
    l2 = L2Bandwidth().run(backend, p, ex, 0, {"l2_fraction": 0.25, "passes": 64})
    n_vec4 = 15 * 2**20 // VEC4
    assert l2["bytes_min"] == n_vec4 * VEC4 * 64 and l2["extra"]["gbs"] == pytest.approx(l2["bytes_min"] / 1e-3 / 1e9)
    assert launches[-1][:3] == ("l2_read", (264,), (1024,)) and launches[-1][3][1:3] == [n_vec4, 64]
    l1 = L1Bandwidth().run(backend, p, ex, 0, {"slice_bytes": 16384, "iters": 2048})
    assert l1["bytes_min"] == 264 * 16384 * 2048 and launches[-1][3][0] == (264 * 1024 * 4,)
    ex.timer.cache = "flush"
    with pytest.raises(ProbeSkip, match="measure.cache=warm"):
        L2Bandwidth().run(backend, p, ex, 0, {})
