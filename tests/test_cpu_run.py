"""End to end on the CPU: rows, correctness check, failures, crash safety, the CLI and sweeps."""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import warnings
import time

import pytest
from conftest import ROOT, compose_cfg, run_points

from gemmlab.expr import ExprError, evaluate
from gemmlab.measure.stats import should_stop, summarize
from gemmlab.rows import COLUMN_NAMES, RowError, RowWriter, merge, read

REQUIRED = ("run_id timestamp host device backend variant precision m n k flops bytes_min intensity "
            "time_median_s time_p20_s time_p80_s samples tflops rel_error max_abs_error tolerance "
            "status reason").split()
QUICK = ["measure=quick", "run.progress=false"]


def _cpu_cfg(tmp_path, *extra):
    return compose_cfg(["variant=cpu_blas", "precision=[fp64,fp32]", "sizes=smoke", *QUICK, *extra], tmp_path)


def test_results_file_has_the_documented_columns(tmp_path):
    _, rows = run_points(_cpu_cfg(tmp_path), tmp_path / "run")
    header = list(rows[0].keys())
    assert header == COLUMN_NAMES
    assert set(REQUIRED) <= set(header)


def test_cpu_run_gives_correct_ok_rows(tmp_path):
    _, rows = run_points(_cpu_cfg(tmp_path), tmp_path / "run")
    assert len(rows) == 2 * 3 and all(r["status"] == "ok" for r in rows), rows
    for r in rows:
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        assert int(r["flops"]) == 2 * m * n * k
        item = 8 if r["precision"] == "fp64" else 4
        assert int(r["bytes_min"]) == item * (m * k + k * n + m * n)
        assert float(r["intensity"]) == pytest.approx(int(r["flops"]) / int(r["bytes_min"]))
        assert float(r["time_p20_s"]) <= float(r["time_median_s"]) <= float(r["time_p80_s"])
        assert float(r["tflops"]) == pytest.approx(int(r["flops"]) / float(r["time_median_s"]) / 1e12)
        assert float(r["rel_error"]) <= float(r["tolerance"])
        assert int(r["samples"]) >= 3
        assert r["blas_vendor"] and r["backend"] == "cpu_blas" and r["cache"] == "warm"
    fp32 = [float(r["rel_error"]) for r in rows if r["precision"] == "fp32"]
    assert all(1e-9 < e < 1e-5 for e in fp32), fp32  # FP32 rounding is visible against FP64


def test_gpu_variants_are_skipped_with_a_reason_without_a_gpu(tmp_path):
    from gemmlab.gpu.device import no_device_reason

    if no_device_reason() is None:
        pytest.skip("this machine has a CUDA device")
    cfg = compose_cfg(["variant=[cpu_blas,cublas]", "precision=fp32", "sizes=smoke", *QUICK], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    gpu = [r for r in rows if r["variant"] == "cublas"]
    assert gpu and all(r["status"] == "skipped" and r["reason"].startswith("no CUDA device") for r in gpu)
    assert all(r["status"] == "ok" for r in rows if r["variant"] == "cpu_blas")


def test_fp64_check_catches_a_wrong_result(tmp_path, monkeypatch):
    from gemmlab.backends import cpu_blas

    orig = cpu_blas.CpuBlas.make_launch

    def off_by_a_bit(self, p, a, b, c):
        launch = orig(self, p, a, b, c)
        inner = launch.fn

        def fn():
            inner()
            c[0, 0] += 1.0  # one wrong element

        launch.fn = fn
        return launch

    monkeypatch.setattr(cpu_blas.CpuBlas, "make_launch", off_by_a_bit)
    _, rows = run_points(_cpu_cfg(tmp_path, "sizes.shapes=[]", "sizes.square=[64]"), tmp_path / "run")
    assert rows and all(r["status"] == "failed" and "exceed their error bound" in r["reason"]
                        and "(row 0, col 0)" in r["reason"] and r["check_elem_fail"] == "1" for r in rows), rows
    assert all(float(r["check_elem_max"]) > 1 for r in rows)
    assert all(r["time_median_s"] == "" for r in rows), "a wrong result must not be timed"


def test_unwritten_output_is_caught_by_the_nan_poison(tmp_path, monkeypatch):
    from gemmlab.backends import cpu_blas

    def writes_nothing(self, p, a, b, c):
        return cpu_blas.Launch(lambda: None, {})

    monkeypatch.setattr(cpu_blas.CpuBlas, "make_launch", writes_nothing)
    _, rows = run_points(_cpu_cfg(tmp_path, "precision=fp32", "sizes.shapes=[]", "sizes.square=[32]"),
                         tmp_path / "run")
    assert rows[0]["status"] == "failed" and "NaN" in rows[0]["reason"]


def test_a_raising_point_becomes_a_failed_row_and_the_run_goes_on(tmp_path, monkeypatch):
    from gemmlab.backends import cpu_blas

    orig = cpu_blas.CpuBlas.make_launch

    def raise_for_64(self, p, a, b, c):
        if p.m == 64:
            raise MemoryError("out of memory (simulated)")
        return orig(self, p, a, b, c)

    monkeypatch.setattr(cpu_blas.CpuBlas, "make_launch", raise_for_64)
    runner, rows = run_points(_cpu_cfg(tmp_path, "precision=fp32"), tmp_path / "run")
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["m"] == "64" and "out of memory" in failed[0]["reason"]
    assert sum(r["status"] == "ok" for r in rows) == 2
    assert runner.counts["failed"] == 1


def test_resume_skips_points_already_ok(tmp_path):
    cfg = _cpu_cfg(tmp_path)
    _, first = run_points(cfg, tmp_path / "run")
    runner, again = run_points(cfg, tmp_path / "run")
    assert len(again) == len(first)  # nothing appended
    assert runner.counts["resumed"] == len(first)


def test_row_writer_refuses_unknown_columns_and_bad_status(tmp_path):
    with RowWriter(tmp_path) as w:
        with pytest.raises(RowError, match="unknown result columns"):
            w.write({"status": "ok", "tflopz": 1.0})
        with pytest.raises(RowError, match="status"):
            w.write({"status": "great"})


def test_merge_keeps_one_row_per_point_and_prefers_ok(tmp_path):
    for job, status in (("0", "failed"), ("1", "ok")):
        with RowWriter(tmp_path / job) as w:
            w.write({"point_key": "p1", "status": status, "variant": "x"})
            w.write({"point_key": f"only{job}", "status": "ok", "variant": "y"})
    out = merge([tmp_path / "0", tmp_path / "1"], tmp_path / "results.csv")
    df = read(out)
    assert sorted(df.point_key) == ["only0", "only1", "p1"]
    assert df.set_index("point_key").loc["p1", "status"] == "ok"


def test_stats_and_stopping_rule():
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s.median_s == 3.0 and s.p20_s == pytest.approx(1.8) and s.p80_s == pytest.approx(4.2)
    assert s.noise == pytest.approx((4.2 - 1.8) / 3.0)
    cfg = compose_cfg(["measure.min_samples=3", "measure.max_samples=5", "measure.min_time_s=0",
                       "measure.max_time_s=10", "measure.max_noise=0.01"])
    m = cfg.measure
    assert not should_stop([1.0, 1.0], 0.1, m)  # too few samples
    assert should_stop([1.0, 1.0, 1.0], 0.1, m)  # quiet enough
    assert not should_stop([1.0, 2.0, 3.0], 0.1, m)  # too noisy: keep sampling
    assert should_stop([1.0, 2.0, 3.0, 4.0, 5.0], 0.1, m)  # max_samples
    assert should_stop([1.0, 2.0, 3.0], 11.0, m)  # max_time


def test_expressions_are_safe_and_say_what_is_wrong():
    env = {"m": 1000, "n": 1023, "BN": 128}
    assert evaluate("cdiv(n, BN)", env) == 8
    assert evaluate("m % 16 == 0", env) is False
    assert evaluate(7, env) == 7
    with pytest.raises(ExprError, match="unknown name 'BM'"):
        evaluate("BM * 2", env)
    with pytest.raises(ExprError, match="unsupported"):
        evaluate("__import__('os')", env)
    with pytest.raises(ExprError, match="cannot parse"):
        evaluate("cdiv(n,", env)


# -- the command line ---------------------------------------------------------------------------
def _run_py(args, cwd, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=kw.get("timeout", 300))


def test_cli_run_writes_rows_and_hydra_config(tmp_path):
    out = tmp_path / "run"
    p = _run_py(["variant=[cpu_blas,cublas]", "precision=fp32", "sizes=smoke", *QUICK,
                 f"hydra.run.dir={out}"], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    df = read(out / "results.csv")
    assert (df[df.variant == "cpu_blas"].status == "ok").all()
    assert (out / ".hydra" / "config.yaml").exists() and (out / ".hydra" / "overrides.yaml").exists()
    assert "ok 3" in p.stdout
    # the run's page (analysis.report), after the summary
    assert p.stdout.rstrip().splitlines()[-1] == f"gemmlab: report: {out / 'report.html'}"
    assert (out / "report.html").exists()


def test_cli_misspelt_override_fails_before_any_work(tmp_path):
    p = _run_py(["measure.warmpu_s=1", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert p.returncode != 0
    assert "warmpu_s" in p.stderr and "not in" in p.stderr
    assert not (tmp_path / "run" / "results.csv").exists()


def test_cli_unknown_variant_lists_the_choices(tmp_path):
    p = _run_py(["variant=cuBLAS", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert p.returncode != 0 and "Available options in 'variant'" in p.stderr and "cublas" in p.stderr


def test_cli_failed_point_gives_nonzero_exit(tmp_path):
    # a tolerance no FP32 product meets: every point fails its check
    p = _run_py(["variant=cpu_blas", "precision=fp32", "precision.fp32.tolerance=1e-30", "sizes=smoke",
                 *QUICK, "run.report=false", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert p.returncode == 1, p.stdout[-1000:]
    assert set(read(tmp_path / "run" / "results.csv").status) == {"failed"}
    assert "gemmlab: report" not in p.stdout and not (tmp_path / "run" / "report.html").exists()  # run.report=false


@pytest.mark.slow
def test_cli_multirun_merges_the_jobs_into_one_file(tmp_path):
    sweep = tmp_path / "sweep"
    p = _run_py(["-m", "variant=cpu_blas", "precision=fp32,fp64", "sizes=smoke", *QUICK,
                 f"hydra.sweep.dir={sweep}"], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    df = read(sweep / "results.csv")
    assert sorted(set(df.precision)) == ["fp32", "fp64"] and len(df) == 6
    assert (sweep / "0" / "results.csv").exists() and (sweep / "1" / "results.csv").exists()
    # one page for the sweep, once its jobs have ended; none per job
    assert p.stdout.rstrip().splitlines()[-1] == f"gemmlab: report: {sweep / 'report.html'}"
    assert (sweep / "report.html").exists() and not list(sweep.glob("*/report.html"))


POINTS = 240


def _slow_cpu_args(out):
    # many distinct shapes, each a measurable fraction of a second: a minute of work if nothing stops
    # it, so a loaded runner cannot finish before the signal arrives
    sizes = ",".join(str(300 + i) for i in range(POINTS))
    return ["variant=cpu_blas", "precision=fp64", f"sizes.square=[{sizes}]", "measure=quick",
            "measure.min_time_s=0.2", "measure.max_noise=1", "run.progress=false", f"hydra.run.dir={out}"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_run_keeps_its_finished_rows(tmp_path, sig):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # SIGINT as a terminal delivers it: a pytest-xdist worker ignores SIGINT and its children would
    # inherit that (Python then installs no KeyboardInterrupt handler), so the child restores it
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), *_slow_cpu_args(out)], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    results = out / "results.csv"
    deadline = time.time() + 120
    while time.time() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 4:  # header + 3 rows
            break
        time.sleep(0.1)
    proc.send_signal(sig)
    try:
        stdout, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        # seen on a loaded 2-core CI runner under pytest-xdist (3 of ~10 runs): the first SIGINT did
        # not stop the run; not reproduced alone or at -n 2 on an idle machine. A second Ctrl-C, as
        # a user would press it, must then stop it with its rows intact; the warning keeps it visible
        warnings.warn(f"signal {sig} did not stop the run within 20 s; sent again")
        proc.send_signal(sig)
        stdout, _ = proc.communicate(timeout=60)
    rows = list(csv.DictReader(open(results)))
    assert 3 <= len(rows) < POINTS
    # no torn rows (and, if one is not ok, what it says: seen once under load, 2026-12-03)
    assert all(r["status"] == "ok" and float(r["time_median_s"]) > 0 for r in rows), \
        [(r.get("m"), r.get("status"), r.get("time_median_s"), (r.get("reason") or "")[:300]) for r in rows]
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "INTERRUPTED" in stdout


def test_a_torn_last_line_is_dropped_before_appending(tmp_path):
    with RowWriter(tmp_path) as w:
        w.write({"point_key": "a", "status": "ok"})
    with open(tmp_path / "results.csv", "a") as fh:
        fh.write("20261129T000000Z,2026-11-29T00:00")  # a row cut off by a kill
    with RowWriter(tmp_path) as w:
        w.write({"point_key": "b", "status": "ok"})
    df = read(tmp_path / "results.csv")
    assert list(df.point_key) == ["a", "b"]
