"""Worker isolation, guard zones, the watchdog and the sanitizer on a GPU (issue 29).

The conduct controls (conf/variant/wrong_{fault,oob_row,writes_b,hang}.yaml) misbehave where their
headers say and are right elsewhere; a correct variant after them in the same run is ok. The CPU
side of the machinery is tests/test_worker.py and tests/test_guards.py.

Run on the GPU host: python -m pytest -m gpu tests/test_gpu_isolation.py
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, compose_cfg, run_points

pytestmark = pytest.mark.gpu
QUICK = ["measure=quick", "measure.baseline=[]", "run.progress=false", "run.fail_on_error=false", "sizes.shapes=[]"]


def _rows(tmp_path, name, *overrides):
    cfg = compose_cfg([*QUICK, *overrides], tmp_path)
    runner, rows = run_points(cfg, tmp_path / name)
    return runner, {(r["variant"], r["precision"], int(r["m"])): r for r in rows}


def test_a_fault_fails_its_point_alone_and_the_points_after_it_are_ok(tmp_path):
    runner, rows = _rows(tmp_path, "fault", "variant=[wrong_fault,smem_tiled,cublas]", "precision=fp32",
                         "sizes.square=[1024,4096]")
    bad = rows[("wrong_fault", "fp32", 4096)]
    assert bad["status"] == "failed" and "CUDA fault in wrong_fault: illegal memory access" in bad["reason"], bad
    for k, r in rows.items():
        if k != ("wrong_fault", "fp32", 4096):
            assert r["status"] == "ok", (k, r["reason"])
            assert r["worker"] and r["guard_check"] == "clean", (k, r["guard_check"])
    assert runner.counts["worker_restarts"] == 1
    assert rows[("smem_tiled", "fp32", 1024)]["worker"] != rows[("wrong_fault", "fp32", 1024)]["worker"]


def test_a_multirun_job_after_a_faulting_job_is_ok(tmp_path):
    sweep = tmp_path / "sweep"
    # the worker shared by the jobs (run.fresh_worker=false): the fault must not reach the next job's points
    cmd = [sys.executable, "run.py", "-m", "variant=wrong_fault,smem_tiled", f"hydra.sweep.dir={sweep}",
           "precision=fp32", "sizes.square=[4096]", "run.fresh_worker=false", *QUICK]
    # a lock folder of its own: this pytest process holds the GPU's claim from the tests before
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "GEMMLAB_GPU_LOCK_DIR": str(tmp_path / "locks")}
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    with open(sweep / "results.csv") as fh:
        import csv

        rows = {r["variant"]: r for r in csv.DictReader(fh)}
    assert rows["wrong_fault"]["status"] == "failed" and "CUDA fault" in rows["wrong_fault"]["reason"]
    assert rows["smem_tiled"]["status"] == "ok", (rows["smem_tiled"]["reason"], p.stderr[-3000:])
    assert "Error in sys.excepthook" not in p.stderr


def test_guards_catch_a_row_past_c_and_a_write_into_b_where_the_controls_misbehave(tmp_path):
    _, rows = _rows(tmp_path, "guards", "variant=[wrong_oob_row,wrong_writes_b,smem_tiled]", "precision=[fp32,bf16]",
                    "sizes.square=[1000,1024]")
    for prec in ("fp32", "bf16"):
        oob, fine = rows[("wrong_oob_row", prec, 1000)], rows[("wrong_oob_row", prec, 1024)]
        assert oob["status"] == "failed" and re.match(r"wrote \d+ bytes after C's end \(first at offset \+\d+\)",
                                                      oob["reason"]), oob["reason"]
        assert int(oob["check_elem_fail"]) == 0  # C itself is right
        assert fine["status"] == "ok" and fine["guard_check"] == "clean"
        wb, fine = rows[("wrong_writes_b", prec, 1000)], rows[("wrong_writes_b", prec, 1024)]
        assert wb["status"] == "failed" and wb["reason"].startswith("changed B (first at row 999, col 999"), wb["reason"]
        assert fine["status"] == "ok"
    assert rows[("smem_tiled", "fp32", 1000)]["status"] == "ok"  # the correct kernel after them (fp32 only)


def test_the_watchdog_ends_a_hang_at_its_limit_and_the_run_goes_on(tmp_path):
    import time

    t0 = time.monotonic()
    runner, rows = _rows(tmp_path, "hang", "variant=[wrong_hang,smem_tiled]", "precision=fp32",
                         "sizes.square=[1024,2048]", "measure.point_timeout_floor_s=5")
    took = time.monotonic() - t0
    hung = rows[("wrong_hang", "fp32", 2048)]
    assert hung["status"] == "failed" and "timed out after" in hung["reason"] and "in checked call" in hung["reason"]
    assert rows[("wrong_hang", "fp32", 1024)]["status"] == "ok"
    assert all(rows[("smem_tiled", "fp32", m)]["status"] == "ok" for m in (1024, 2048))
    assert took < 180, took


def test_guard_zones_work_on_device_arrays_of_every_storage_type():
    import cupy as cp

    from gemmlab.gpu import arrays
    from gemmlab.measure.guards import Guards

    g = Guards(cp, 4096)
    for dtype in ("float32", "float16", "bfloat16", "float64"):
        x = arrays.cast(cp, cp.random.standard_normal((7, 9), dtype=cp.float32), dtype)
        y = g.input(x, f"A_{dtype}")
        assert y.dtype == x.dtype and bool((y.view(cp.uint8) == x.view(cp.uint8)).all())
        assert y.data.ptr % 256 == 0
    c = g.output((5, 3), cp.float32)
    assert g.violation() is None
    write = cp.RawKernel(r'extern "C" __global__ void w(float* c, int at) { c[at] = 1.0f; }', "w")
    write((1,), (1,), (c, cp.int32(15)))  # the element right after C's 15
    assert re.match(r"wrote \d bytes after C's end \(first at offset \+[0-3]\)", g.violation() or ""), g.violation()


@pytest.mark.parametrize("chunk", [6, 1 << 28])
def test_an_input_changed_on_the_device_is_named_whatever_the_compare_chunk(monkeypatch, chunk):
    """CuPy's compare of an input with its kept bytes, in one chunk and in 6-byte chunks (three bf16 elements: the
    changed elements straddle chunk ends); the first change and the count are the same."""
    import cupy as cp

    from gemmlab.gpu import arrays
    from gemmlab.measure import guards

    monkeypatch.setattr(guards._changed, "__defaults__", (chunk,))
    g = guards.Guards(cp, 4096)
    b = g.input(arrays.cast(cp, cp.random.standard_normal((6, 10), dtype=cp.float32), "bfloat16"), "B")
    write = cp.RawKernel(r'extern "C" __global__ void w(unsigned short* b, int at) { b[at] ^= 0x8000; }', "w")
    for at in (13, 14, 29, 59):  # row 1 col 3, row 1 col 4, row 2 col 9, the last element
        write((1,), (1,), (b, cp.int32(at)))
    assert g.violation() == "changed B (first at row 1, col 3; 4 elements)"


@pytest.mark.skipif(shutil.which("compute-sanitizer") is None, reason="compute-sanitizer is not on the PATH")
def test_memcheck_names_the_write_past_c_and_passes_a_correct_kernel(tmp_path):
    _, rows = _rows(tmp_path, "memcheck", "variant=[wrong_oob_row,wrong_writes_b,smem_tiled]", "precision=fp32",
                    "sizes.square=[1000]", "measure.sanitize=memcheck")
    bad, good = rows[("wrong_oob_row", "fp32", 1000)], rows[("smem_tiled", "fp32", 1000)]
    # a write into B is in bounds: memcheck passes it, the guard zones fail it
    into_b = rows[("wrong_writes_b", "fp32", 1000)]
    assert into_b["sanitize_errors"] == "0" and into_b["reason"].startswith("changed B"), into_b["reason"]
    assert bad["status"] == "failed" and bad["sanitize_tool"] == "memcheck" and int(bad["sanitize_errors"]) > 0
    assert "Invalid __global__ write" in bad["sanitize_report"], bad["sanitize_report"]
    assert good["status"] == "ok" and good["sanitize_errors"] == "0" and good["reliable"] == "false"
    assert "sanitize" in good["unreliable_reason"]
