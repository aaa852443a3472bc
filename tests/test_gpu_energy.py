"""Energy per call on the GPU (measure.energy, issue 21): NVML's counter over a window of back-to-
back calls, against the polled power x time, and the peak at the clock the point ran."""
from __future__ import annotations

import json

import pytest
from conftest import compose_cfg, run_points

pytestmark = pytest.mark.gpu
QUICK = ["measure=quick", "run.progress=false", "sizes.shapes=[]", "measure.baseline=[]"]


def test_energy_per_call_agrees_with_power_times_time(tmp_path):
    """cuBLAS BF16 at 8192 for 3 s: the counter's energy and the polled mean power x the window
    agree within 5% once the window is steady (the lead-in keeps the first, lagging readings out)."""
    _, rows = run_points(compose_cfg([*QUICK, "variant=cublas", "precision=bf16", "sizes.square=[8192]",
                                      "measure.energy=true", "measure.energy_s=3"], tmp_path), tmp_path / "e")
    (r,) = rows
    assert r["status"] == "ok", r["reason"]
    extra = json.loads(r["extra"])["energy"]
    assert isinstance(extra, dict), extra
    e, flops = float(r["energy_j"]), float(r["flops"])
    assert 0.1 < e < 10, e  # about 1.1 J per call on the H200 (torch, 2026-12-01)
    assert float(r["gflops_per_joule"]) == pytest.approx(flops / e / 1e9)
    limit = float(r["power_limit_w"])
    assert 100 < float(r["power_avg_w"]) <= 1.05 * limit
    assert extra["energy_vs_power_x_time"] == pytest.approx(1.0, abs=0.05), extra
    assert float(r["pct_of_peak_at_clock"]) <= 105


def test_energy_off_by_default_leaves_the_columns_empty(tmp_path):
    _, rows = run_points(compose_cfg([*QUICK, "variant=cublas", "precision=fp32", "sizes.square=[1024]"], tmp_path),
                         tmp_path / "n")
    (r,) = rows
    assert r["status"] == "ok" and r["energy_j"] in ("", None)
