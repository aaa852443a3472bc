"""Every `ok` earns its ok, on the GPU: an independent FP64 reference, exact inputs, the check after
timing, impossible results, and one measurement per GPU (run for real with `pytest -m gpu`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import ROOT, compose_cfg, right_only_once, run_points

pytestmark = pytest.mark.gpu
QUICK = ["measure=quick", "run.progress=false", "sizes.shapes=[]"]


def _rows(tmp_path, name, *overrides):
    _, rows = run_points(compose_cfg([*QUICK, *overrides], tmp_path), tmp_path / name)
    return rows


def test_fp64_cublas_is_checked_against_the_host_blas(tmp_path):
    (r,) = _rows(tmp_path, "fp64", "variant=cublas", "precision=fp64", "sizes.square=[1024]")
    assert r["status"] == "ok", r["reason"]
    assert r["check_reference"].startswith("NumPy FP64 on the host")
    assert 0 < float(r["rel_error"]) < 1e-14  # against itself it was exactly 0
    assert float(r["check_elem_max"]) < 1 and r["check_elem_fail"] == "0"


def test_hand_written_fp64_is_checked_against_cublas(tmp_path):
    (r,) = _rows(tmp_path, "cutlass", "variant=cutlass_auto", "precision=fp64", "sizes.square=[256]")
    assert r["status"] in ("ok", "skipped"), r["reason"]
    if r["status"] == "ok":
        assert r["check_reference"].startswith("cuBLAS FP64")


def test_exact_inputs_make_library_points_match_exactly(tmp_path):
    rows = _rows(tmp_path, "exact", "variant=[cublas,cublaslt]", "precision=[fp64,fp32,tf32,fp16,bf16,fp8]",
                 "sizes.square=[1024]", "measure.distribution=exact")
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) >= 8, [(r["variant"], r["precision"], r["status"], r["reason"]) for r in rows]
    for r in ok:  # C == round_out(R) bit for bit
        assert float(r["check_elem_max"]) == 0.0 and r["check_elem_fail"] == "0", (r["variant"], r["precision"])
        if r["out_dtype"] in ("float32", "float64"):  # R itself fits: no rounding at all
            assert float(r["rel_error"]) == 0.0, (r["variant"], r["precision"], r["rel_error"])
    assert not [r for r in rows if r["status"] == "failed"]


def test_fp16_overflow_fails_and_says_overflow(tmp_path):
    (r,) = _rows(tmp_path, "ovf", "variant=cublas", "precision=fp16", "sizes.square=[512]",
                 "measure.input_scale=64")
    assert r["status"] == "failed" and "overflow" in r["reason"], r["reason"]


def test_a_kernel_wrong_only_when_repeated_fails_after_timing(tmp_path, monkeypatch):
    from gemmlab.backends import cublas

    def corrupt(c):
        c[5, 7] = c[5, 7] * 2  # on the current (the executor's) stream

    right_only_once(monkeypatch, cublas.Cublas, corrupt)
    (r,) = _rows(tmp_path, "again", "variant=cublas", "precision=fp32", "sizes.square=[512]",
                 "run.isolate=none")  # the patch lives in this process: a worker would not see it
    assert r["status"] == "failed" and r["reason"].startswith("after timing:") and "(row 5, col 7)" in r["reason"]


def test_an_impossible_result_fails(tmp_path):
    (r,) = _rows(tmp_path, "fast", "variant=cublas", "precision=fp16", "sizes.square=[2048]",
                 "device.sm_flops_per_clock.fp16=16")  # a device 256 x slower than this one
    assert r["status"] == "failed" and "impossible result" in r["reason"], r["reason"]
    (r,) = _rows(tmp_path, "real", "variant=cublas", "precision=fp16", "sizes.square=[2048]")
    assert r["status"] == "ok" and 0 < float(r["tflops"]) < float(r["peak_at_clock_tflops"])


FOREIGN = """
import sys, time, cupy
x = cupy.ones(1 << 20)
open(sys.argv[2], "w").write("ready")
t = time.time()
while time.time() - t < float(sys.argv[1]):
    x += 1
    cupy.cuda.Device().synchronize()
    time.sleep(0.001)
"""
# Started through a parent that exits at once, so the GPU process is not a descendant of this
# one (a run's own children, such as its probe subprocesses, do not count as foreign).
DETACH = """
import subprocess, sys
p = subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:]], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(p.pid, flush=True)
"""


def test_a_point_timed_beside_another_process_is_contended(tmp_path):
    import signal

    (r,) = _rows(tmp_path, "alone", "variant=cublas", "precision=fp32", "sizes.square=[1024]")
    assert r["status"] == "ok" and r["contended"] == "false", r
    ready = tmp_path / "ready"
    # the GPU process must not hold our pipe: run() would wait for it to end (and it did, once)
    pid = int(subprocess.run([sys.executable, "-c", DETACH, FOREIGN, "60", str(ready)], capture_output=True,
                             text=True, timeout=30).stdout)
    try:
        deadline = time.time() + 60
        while not ready.exists():
            assert time.time() < deadline
            time.sleep(0.1)
        (r,) = _rows(tmp_path, "beside", "variant=cublas", "precision=fp32", "sizes.square=[1024]")
        from gemmlab.gpu.device import info
        from gemmlab.measure.nvml import Nvml, _own_tree

        nvml = Nvml(info()["pci_bus_id"])
        seen = (nvml.processes(), os.getpid(), pid, sorted(_own_tree()))
        assert r["contended"] == "true", (r["extra"], seen)
        assert pid in json.loads(r["extra"])["foreign_pids"], seen
    finally:
        os.kill(pid, signal.SIGKILL)


def _run_py(out, *args):
    # a lock folder of their own: this pytest process may hold the GPU's claim from earlier tests
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "GEMMLAB_GPU_LOCK_DIR": str(out.parent / "locks")}
    return subprocess.Popen([sys.executable, str(ROOT / "run.py"), "variant=cublas", "precision=fp16",
                             "sizes.square=[2048]", "sizes.shapes=[]", "measure=quick", "measure.min_time_s=3",
                             "measure.max_time_s=4", "measure.max_samples=100000", "run.progress=false",
                             f"hydra.run.dir={out}", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _started(proc, out, timeout_s=120):
    """Wait until ``proc`` holds the GPU: its results file is opened right after the claim."""
    deadline = time.time() + timeout_s
    while not (out / "results.csv").exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-1500:]
        time.sleep(0.1)


def test_a_second_run_on_the_gpu_waits_for_the_first(tmp_path):
    from gemmlab.rows import read

    first = _run_py(tmp_path / "first")
    _started(first, tmp_path / "first")
    second = _run_py(tmp_path / "second")
    out1, err1 = first.communicate(timeout=240)
    out2, err2 = second.communicate(timeout=240)
    assert first.returncode == 0 and second.returncode == 0, (err1[-1500:], err2[-1500:])
    assert "waiting up to" in err2 and "in use by another gemmlab run" in err2
    r1, r2 = read(tmp_path / "first").iloc[0], read(tmp_path / "second").iloc[0]
    assert r1.status == "ok" and r2.status == "ok"
    # neither saw the other on the GPU (this pytest process may hold a context: it is the parent)
    for r, other in ((r1, second.pid), (r2, first.pid)):
        assert other not in json.loads(r.extra or "{}").get("foreign_pids", []), r.extra
    assert abs(r1.tflops / r2.tflops - 1) < 0.1, (r1.tflops, r2.tflops)


def test_the_wait_gives_up_with_a_clear_message(tmp_path):
    first = _run_py(tmp_path / "first")
    _started(first, tmp_path / "first")
    second = _run_py(tmp_path / "second", "run.gpu_wait_s=0.5")
    first.communicate(timeout=240)
    _, err2 = second.communicate(timeout=240)
    assert second.returncode == 1 and "run.gpu_wait_s=0.5" in err2, err2[-1500:]
