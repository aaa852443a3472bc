"""Library constraints are `requires` skips with a reason, not failures; a run that measured
nothing says so."""
from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
from conftest import compose_cfg, run_points

from gemmlab.points import expand
from gemmlab.runner import print_summary, warn_if_nothing_measured

FP8_REASON = "cuBLASLt's FP8 kernels need 16-byte aligned dimensions"


@pytest.mark.parametrize("shape,skipped", [
    ((1024, 1024, 1024), False), ((4096, 2048, 512), False), ((1040, 1040, 1040), False),
    ((1023, 1023, 1023), True), ((4097, 4097, 4097), True), ((1000, 1000, 1000), True),  # K % 16
    ((1024, 1024, 1000), True), ((1024, 1001, 1024), True), ((1024, 1032, 1024), True),  # K, N % 16
    ((1001, 1024, 1024), False), ((1, 6144, 4096), False), ((33, 4096, 2048), False),  # M: any (raw bindings)
])
def test_cublaslt_fp8_needs_16_byte_aligned_dimensions(shape, skipped):
    m, n, k = shape
    (p,) = expand(compose_cfg(["variant=cublaslt", "precision=fp8", "sizes.square=[]",
                               f"sizes.shapes=[[{m},{n},{k}]]"]))
    if skipped:
        assert p.skip_reason and p.skip_reason.startswith(FP8_REASON), p.skip_reason
        assert f"m={m}, n={n}, k={k}" in p.skip_reason
    else:
        assert p.skip_reason is None


@pytest.mark.parametrize("precision", ["tf32", "fp16", "bf16"])
def test_cublaslt_other_precisions_run_at_odd_sizes(precision):
    pts = expand(compose_cfg(["variant=cublaslt", f"precision={precision}", "sizes=odd"]))
    assert pts and all(p.skip_reason is None for p in pts)


def test_fp8_points_at_odd_sizes_are_skipped_rows_with_the_reason(tmp_path):
    cfg = compose_cfg(["variant=cublaslt", "precision=fp8", "sizes=odd", "measure=quick",
                       "run.progress=false"], tmp_path)
    runner, rows = run_points(cfg, tmp_path / "run")
    assert len(rows) == 3
    assert all(r["status"] == "skipped" and r["reason"].startswith(FP8_REASON) for r in rows), rows
    assert runner.counts["failed"] == 0


# -- a run that measured nothing -------------------------------------------------------------
def test_a_run_where_every_point_is_skipped_ends_with_a_warning_line(tmp_path, capsys):
    # cpu_blas has no bf16: every point is skipped on any machine
    cfg = compose_cfg(["variant=cpu_blas", "precision=bf16", "sizes=smoke", "run.progress=false"], tmp_path)
    runner, rows = run_points(cfg, tmp_path / "run")
    assert rows and {r["status"] for r in rows} == {"skipped"}
    capsys.readouterr()
    print_summary(runner, tmp_path / "run" / "results.csv")
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert last.startswith(f"warning: nothing was measured: all {len(rows)} points were skipped (each: "
                           "cpu_blas does not support bf16")


def _runner(statuses, resumed=0):
    rows = [{"status": s, "reason": "no CUDA device" if s == "skipped" else ""} for s in statuses]
    return SimpleNamespace(summary_rows=rows, counts=Counter(resumed=resumed))


@pytest.mark.parametrize("statuses,resumed,warns", [
    (["skipped"] * 12, 0, True),
    (["skipped", "ok"], 0, False),
    (["skipped", "failed"], 0, False),  # a failed point ran: its red line says why
    (["skipped"] * 3, 5, False),  # the rest were already measured (resume)
    ([], 0, False),  # nothing to run (all resumed), or interrupted before the first row
])
def test_the_warning_is_only_for_runs_that_measured_nothing(statuses, resumed, warns, capsys):
    line = warn_if_nothing_measured(_runner(statuses, resumed))
    out = capsys.readouterr().out
    if warns:
        assert line == out.strip() and line.startswith(
            f"warning: nothing was measured: all {len(statuses)} points were skipped (each: no CUDA device)")
    else:
        assert line is None and out == ""


def test_the_warning_names_the_most_common_reason_and_its_share(capsys):
    r = _runner(["skipped"] * 3)
    r.summary_rows[0]["reason"] = "cpu_blas does not support bf16"
    line = warn_if_nothing_measured(r)
    assert "all 3 points were skipped (2 of them: no CUDA device)" in line


@pytest.mark.slow
def test_cli_run_of_gpu_variants_without_a_gpu_warns_that_nothing_was_measured(tmp_path):
    import os
    import subprocess
    import sys

    from conftest import ROOT, cuda_device_reason

    if cuda_device_reason() is None:
        pytest.skip("this machine has a CUDA device: the GPU variants are measured")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, str(ROOT / "run.py"), "variant=[cublas,naive]", "precision=fp32",
                        "sizes=smoke", "run.progress=false", f"hydra.run.dir={tmp_path / 'run'}"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.rstrip("\n").splitlines()
    assert lines[-1].startswith("gemmlab: report: ")  # the run's page comes last (analysis.report)
    last = lines[-2]  # the warning is the summary's last line
    assert last.startswith("warning: nothing was measured: all 6 points were skipped (each: no CUDA device")
