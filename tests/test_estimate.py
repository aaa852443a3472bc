"""Before a run: its time and peak memory per device (gemmlab/estimate.py); a point that cannot fit
in the host's memory is skipped with the reason; Ctrl-C says what finished and how to resume."""
from __future__ import annotations

from conftest import compose_cfg, run_points

from gemmlab import estimate
from gemmlab.measure import footprint
from gemmlab.points import expand


def _cfg(tmp_path, *extra):
    return compose_cfg(["variant=cpu_blas", "precision=fp64", "measure=quick", "run.progress=false",
                        "sizes.shapes=[]", *extra], tmp_path)


def test_the_estimate_grows_with_the_work_and_names_the_largest_point(tmp_path):
    small, big = (expand(_cfg(tmp_path, f"sizes.square=[{n}]")) for n in (64, 16384))
    cfg = _cfg(tmp_path)
    e_small = estimate.estimate(small, lambda p: "cpu", cfg).by_kind["cpu"]
    e_big = estimate.estimate(big, lambda p: "cpu", cfg).by_kind["cpu"]
    assert e_small.points == e_big.points == 1
    assert e_big.seconds > 100 * e_small.seconds and e_big.peak_bytes > 2**34  # 16384^2 FP64 A, B, C and the check
    assert e_big.largest == "cpu_blas fp64 16384x16384x16384"
    (line,) = estimate.Estimate({"cpu": e_big}).lines(host_free=2**33)
    assert line.startswith("about ") and " min " in line and "on the host (1 points, peak" in line and "8.0 GiB free" in line
    gpu = estimate.estimate(small, lambda p: "gpu", cfg, lambda p: 2).by_kind["gpu"]
    assert gpu.seconds > estimate.estimate(small, lambda p: "gpu", cfg).by_kind["gpu"].seconds  # baselines cost time


def test_a_run_prints_its_estimate_first(tmp_path, capsys):
    run_points(_cfg(tmp_path, "sizes.square=[32,48]"), tmp_path / "run")
    err = capsys.readouterr().err
    assert "gemmlab: about " in err and "on the host (2 points" in err


def test_a_point_bigger_than_the_host_memory_is_skipped_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(footprint, "host_free_bytes", lambda: 2**20)
    _, (r,) = run_points(_cfg(tmp_path, "sizes.square=[256]", "run.isolate=none"), tmp_path / "big")
    assert r["status"] == "skipped" and r["reason"].startswith("needs ") and "GiB of host memory, 0.0 GiB free" in r["reason"]


def test_ctrl_c_says_what_finished_and_how_to_resume(tmp_path, monkeypatch, capsys):
    from gemmlab.backends import cpu_blas

    orig = cpu_blas.CpuBlas.make_launch

    def make_launch(self, p, a, b, c):
        if p.m == 48:
            raise KeyboardInterrupt
        return orig(self, p, a, b, c)

    monkeypatch.setattr(cpu_blas.CpuBlas, "make_launch", make_launch)
    out = tmp_path / "stopped"
    runner, rows = run_points(_cfg(tmp_path, "sizes.square=[32,48,64]", "run.isolate=none"), out)
    assert runner.counts["interrupted"] == 1 and [r["m"] for r in rows] == ["32"]
    err = capsys.readouterr().err
    assert "interrupted after 1 of 3 points" in err and f"hydra.run.dir={out}" in err


def test_the_readme_example_is_what_the_estimate_says(tmp_path, monkeypatch):
    from readme_said import assert_said

    monkeypatch.setattr(estimate.os, "cpu_count", lambda: 2)
    cfg = compose_cfg(["variant=cpu_blas", "precision=fp64", "sizes.square=[16384]", "sizes.shapes=[]"], tmp_path)
    (line,) = estimate.estimate(expand(cfg), lambda p: "cpu", cfg).lines()
    said, largest = line.split(" of host memory; largest: ")
    assert_said([f"`gemmlab: {said} of host memory, ... free; largest: {largest.rstrip(')')}"], "estimate example")
