"""The element-wise check (gemmlab/measure/check.py), reliability and impossible results (gemmlab/measure/validity.py),
and what every CPU run records about them. All of it must be able to say no."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import ROOT, compose_cfg, right_only_once, run_points

from gemmlab.measure import check, independent, validity

QUICK = ["measure=quick", "run.progress=false"]


def _round(x, dtype):
    return x.astype(np.float32).astype(dtype).astype(np.float64)


def _fp16_gemm(a, b):
    """What a correct tensor-core FP16 GEMM writes: exact products, FP32-level accumulation,
    one rounding to FP16."""
    return _round(a.astype(np.float64) @ b.astype(np.float64), np.float16)


def _inputs(n, k=None, dtype=np.float16, seed=0):
    rng = np.random.default_rng(seed)
    k = k or n
    return (rng.standard_normal((n, k), dtype=np.float32).astype(dtype),
            rng.standard_normal((k, n), dtype=np.float32).astype(dtype))


def _ref(a, b, compute="fp16", out="float16", tol=1e-2):
    return check.Reference.gemm(np, a, b, check.error_model(compute, out), tol, out)


# -- the bound ------------------------------------------------------------------------------------
def test_gamma_is_the_worst_case_for_small_k_and_probabilistic_beyond():
    u = 2.0 ** -24
    assert check.ErrorModel.gamma(4, u) == pytest.approx(4 * u / (1 - 4 * u))
    assert check.ErrorModel.gamma(4096, u) == pytest.approx(check.LAMBDA * 64 * u)
    assert check.ErrorModel.gamma(0, u) == 0.0


def test_a_correct_fp16_gemm_passes_and_every_kind_of_local_error_fails():
    a, b = _inputs(512)
    ref = _ref(a, b)
    good = _fp16_gemm(a, b)
    res = ref.verify(good.astype(np.float16))
    assert res.passed, res.failure()
    assert res.elem_max < 1

    tile = good.copy()  # one 16 x 16 tile transposed: the relative Frobenius error stays tiny
    tile[256:272, 256:272] = tile[256:272, 256:272].T.copy()
    r = ref.verify(tile.astype(np.float16))
    assert not r.passed and r.elem_fail > 100 and r.nonfinite == 0
    assert 256 <= r.first[0] < 272 and 256 <= r.first[1] < 272

    row = good.copy()  # the last row from the row above
    row[-1] = row[-2]
    r = ref.verify(row.astype(np.float16))
    assert not r.passed and r.first[0] == 511

    tail = _round(a[:, :-16].astype(np.float64) @ b[:-16].astype(np.float64), np.float16)  # K tail dropped
    r = ref.verify(tail.astype(np.float16))
    assert not r.passed and r.elem_max > 1

    acc16 = np.zeros((512, 512), dtype=np.float16)  # accumulating in FP16
    for k0 in range(512):
        acc16 = (acc16.astype(np.float32) + a[:, k0:k0 + 1].astype(np.float32) * b[k0].astype(np.float32)).astype(np.float16)
    r = ref.verify(acc16)
    assert not r.passed and r.elem_max > 1, r.elem_max


@pytest.mark.slow
def test_the_old_global_check_alone_let_the_wrong_tile_pass():
    """Why element-wise: in a 4096 x 4096 C a transposed tile is invisible to ||C - R|| / ||R||."""
    a, b = _inputs(4096, k=64)
    good = _fp16_gemm(a, b)
    bad = good.copy()
    bad[2048:2064, 2048:2064] = bad[2048:2064, 2048:2064].T.copy()
    res = _ref(a, b).verify(bad.astype(np.float16))
    assert res.rel_error < 1e-2  # the precision's tolerance: the Frobenius check says ok
    assert not res.passed and "exceed their error bound" in res.failure()


@pytest.mark.parametrize("k", [1, 3, 16, 300, 4096])
def test_fp32_sequential_summation_stays_inside_the_bound(k):
    rng = np.random.default_rng(k)
    a = rng.standard_normal((48, k), dtype=np.float32)
    b = rng.standard_normal((k, 40), dtype=np.float32)
    c = np.zeros((48, 40), dtype=np.float32)
    for i in range(k):  # left to right in FP32: the worst order
        c = (c + np.outer(a[:, i], b[i]).astype(np.float32)).astype(np.float32)
    res = check.Reference.gemm(np, a, b, check.error_model("fp32", "float32"), 1e-5, "float32").verify(c)
    assert res.passed, res.failure()


def test_nan_and_overflow_are_named():
    a, b = _inputs(64)
    ref = _ref(a, b)
    out = _fp16_gemm(a, b).astype(np.float16)
    out[3, 5] = np.nan
    res = ref.verify(out)
    assert not res.passed and res.nonfinite == 1 and res.first[:2] == (3, 5) and "NaN" in res.failure()

    big_a, big_b = a.astype(np.float32) * 300, b.astype(np.float32) * 300  # |C| far past 65504
    ref = _ref(big_a.astype(np.float16), big_b.astype(np.float16))
    c = (big_a.astype(np.float64) @ big_b.astype(np.float64)).astype(np.float16)
    res = ref.verify(c)
    assert not res.passed and res.overflow > 0 and res.failure().startswith("overflow")

    with pytest.raises(check.InputError, match="overflow"):
        _ref((a.astype(np.float32) * 1e6).astype(np.float16), b)  # inputs are Inf after the cast


def test_exact_inputs_demand_equality():
    rng = np.random.default_rng(1)
    a = check.random_matrix(np, rng, (200, 300), "exact").astype(np.float16)
    b = check.random_matrix(np, rng, (300, 100), "exact").astype(np.float16)
    assert set(np.unique(a)) <= set(range(-4, 5)) and len(np.unique(a)) == 9
    ref = check.Reference.gemm(np, a, b, check.error_model("fp16", "float16"), 1e-2, "float16", exact=True)
    exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)
    assert ref.verify(exact).passed
    off = exact.copy()
    off[7, 9] = np.nextafter(off[7, 9], np.float16(np.inf))  # one unit in the last place
    res = ref.verify(off)
    assert not res.passed and res.elem_fail == 1 and res.first[:2] == (7, 9) and "exact" in res.failure()


def test_the_split_product_is_more_accurate_than_the_blas_and_independent_of_it():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((64, 3000)), rng.standard_normal((3000, 48))
    exact = np.array([[math.fsum(x * y for x, y in zip(a[i], b[:, j])) for j in range(48)] for i in range(8)])
    split = independent.split_product(np, a, b)[:8]
    assert np.abs(split - exact).max() <= 4 * np.finfo(np.float64).eps * np.abs(exact).max()
    assert not np.array_equal(split, (a @ b)[:8])  # another computation, not the same call


def test_an_independent_product_of_a_batch_takes_a_shared_operand_as_matmul_broadcasts_it():
    rng = np.random.default_rng(4)
    a3, b3 = rng.standard_normal((3, 5, 7)), rng.standard_normal((3, 7, 4))
    a2, b2 = a3[0], b3[0]
    product = independent.split_product
    for a, b in ((a3, b3), (a3, b2), (a2, b3), (a2, b2)):
        got = independent.batched(np, product, a, b)
        assert got.shape == np.matmul(a, b).shape and np.allclose(got, np.matmul(a, b), rtol=1e-14), (a.shape, b.shape)
    with pytest.raises(ValueError, match="batches of 3 and 2 GEMMs"):
        independent.batched(np, product, a3, b3[:2])


def test_a_batch_reference_is_built_a_group_at_a_time_and_is_the_same(monkeypatch):
    """A batch's FP64 operands are built REFERENCE_GROUP_BYTES at a time (128 DeepSeek-V3 experts at once took 60 GB
    and an 80 GB card ran out of memory): R and S as from the whole batch at once, a fault still named with its batch
    index, an overflow still caught in a later group, and the footprint counts one group."""
    from types import SimpleNamespace

    from gemmlab.measure import footprint

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((7, 3, 40)), rng.standard_normal((7, 40, 5))
    model = check.error_model("fp32", "float32")
    whole = check.Reference.gemm(np, a, b, model, 1e-5, "float32")
    seen = []

    def product(a64, b64):
        seen.append(a64.shape[0])
        return np.matmul(a64, b64)

    monkeypatch.setattr(check, "REFERENCE_GROUP_BYTES", 16 * (3 * 40 + 40 * 5) * 2)  # two GEMMs a group
    grouped = check.Reference.gemm(np, a, b, model, 1e-5, "float32", reference=product)
    assert seen == [2, 2, 2, 1] and grouped.rows_per_batch == whole.rows_per_batch == 3
    assert np.array_equal(grouped.r, whole.r) and np.array_equal(grouped.bound, whole.bound)
    c = np.matmul(a, b).astype(np.float32)
    assert grouped.verify(c).passed
    c[5, 1, 2] += 1.0
    res = grouped.verify(c)
    assert not res.passed and "batch 5, row 1, col 2" in res.failure()
    bad = a.copy()
    bad[6, 0, 0] = np.inf
    with pytest.raises(check.InputError, match="overflow"):
        check.Reference.gemm(np, bad, b, model, 1e-5, "float32")
    # exact inputs: no bound, R the same; B one matrix for every GEMM of the batch
    exact = check.Reference.gemm(np, a, b, model, 1e-5, "float32", exact=True)
    assert exact.bound is None and np.array_equal(exact.r, whole.r)
    shared = check.Reference.gemm(np, a, b[2], model, 1e-5, "float32")
    assert np.array_equal(shared.r, np.matmul(a, b[2]).reshape(-1, 5))
    p = SimpleNamespace(batch=7, m=3, n=5, k=40)
    assert footprint.check_bytes(p) == 2 * 16 * (3 * 40 + 40 * 5 + 3 * 5) + 7 * 40 * 3 * 5
    monkeypatch.setattr(check, "REFERENCE_GROUP_BYTES", 1 << 30)
    # 128 experts of 4096 x 7168 at 1 token: two at a time, ~1 GB of FP64 operands instead of 60 GB
    big = SimpleNamespace(batch=128, m=1, n=4096, k=7168)
    assert check.reference_group(128, 1, 4096, 7168) == 2 and footprint.check_bytes(big) < 2**30 + 2**22


def test_which_reference_is_independent():
    assert independent.independent_reference("gpu", "cublas", "fp64")[0].startswith("NumPy")
    assert independent.independent_reference("gpu", "cuda", "fp64") is None  # cuBLAS checks a hand-written kernel
    assert independent.independent_reference("gpu", "cublas", "fp32") is None
    assert "split" in independent.independent_reference("cpu", "cpu_blas", "fp64")[0]


# -- through a run ---------------------------------------------------------------------------------
def _cpu(tmp_path, *extra):
    return compose_cfg(["variant=cpu_blas", "precision=[fp64,fp32]", "sizes.shapes=[]",
                        "sizes.square=[96]", *QUICK, *extra], tmp_path)


def test_rows_name_their_reference_and_fp64_is_not_checked_against_itself(tmp_path):
    _, rows = run_points(_cpu(tmp_path), tmp_path / "run")
    by = {r["precision"]: r for r in rows}
    assert all(r["status"] == "ok" for r in rows), rows
    assert "split" in by["fp64"]["check_reference"] and by["fp32"]["check_reference"].startswith("NumPy")
    assert 0 < float(by["fp64"]["rel_error"]) < 1e-14  # against itself it was exactly 0
    for r in rows:
        assert 0 <= float(r["check_elem_max"]) < 1 and r["check_elem_fail"] == "0"
        assert r["distribution"] == "normal" and float(r["input_scale"]) == 1.0


def test_exact_distribution_makes_cpu_blas_match_exactly(tmp_path):
    _, rows = run_points(_cpu(tmp_path, "measure.distribution=exact"), tmp_path / "run")
    assert all(r["status"] == "ok" and float(r["rel_error"]) == 0.0 and float(r["check_elem_max"]) == 0.0
               for r in rows), rows


def test_input_overflow_is_a_failed_row_that_says_overflow(tmp_path):
    _, rows = run_points(_cpu(tmp_path, "precision=fp32", "measure.input_scale=1e20"), tmp_path / "run")
    assert rows[0]["status"] == "failed" and "overflow" in rows[0]["reason"], rows[0]["reason"]


def test_distribution_and_scale_are_in_the_point_key(tmp_path):
    from gemmlab.points import expand

    keys = {expand(_cpu(tmp_path, *o))[0].key for o in
            ([], ["measure.distribution=exact"], ["measure.input_scale=2.0"])}
    assert len(keys) == 3


def test_a_kernel_wrong_only_when_repeated_fails_after_timing(tmp_path, monkeypatch):
    from gemmlab.backends import cpu_blas

    def corrupt(c):
        c[5, 7] *= 2

    right_only_once(monkeypatch, cpu_blas.CpuBlas, corrupt)
    _, rows = run_points(_cpu(tmp_path, "precision=fp32"), tmp_path / "run")
    r = rows[0]
    assert r["status"] == "failed" and r["reason"].startswith("after timing:") and "(row 5, col 7)" in r["reason"]
    assert r["time_median_s"] != ""  # it was timed, then caught


def test_reliability_is_recorded_and_can_say_no(tmp_path):
    # any noise allowed: on a loaded 2-core runner a 96^3 host GEMM (tens of microseconds) can
    # spread by more than 100% (CI saw it), and this part is about a row that meets every bar being
    # recorded as reliable; the noise bar's own "no" is test_reliability_rule's
    _, rows = run_points(_cpu(tmp_path, "precision=fp32", "measure.max_noise=1e9"), tmp_path / "ok")
    assert rows[0]["reliable"] == "true" and rows[0]["unreliable_reason"] == "", rows[0]["unreliable_reason"]
    # 100 us for samples of a 96^3 GEMM (tens of us each): a handful, never 50 (2 ms let a fast
    # quiet machine reach 50 and made this flaky)
    few = ["measure.min_samples=50", "measure.max_samples=100", "measure.min_time_s=0", "measure.max_time_s=0.0001"]
    _, rows = run_points(_cpu(tmp_path, "precision=fp32", *few), tmp_path / "few")
    assert rows[0]["status"] == "ok" and rows[0]["reliable"] == "false"
    assert "< min_samples 50" in rows[0]["unreliable_reason"]


RELIABILITY = SimpleNamespace(min_samples=10, max_noise=0.02, clock_stable_fraction=0.02, max_median_ci=0.005,
                              max_noise_hard=0.10)


def test_reliability_rule():
    m = RELIABILITY
    # quiet: reliable by its noise, whatever its median's interval (rows before median_ci too)
    ok = {"status": "ok", "samples": 40, "noise": 0.01, "extra": {"timer": {"sm_clock_drift": -0.005}}}
    assert validity.reliability(ok, m) == {"reliable": True, "unreliable_reason": None}
    assert validity.reliability({**ok, "median_ci": 0.03}, m) == {"reliable": True, "unreliable_reason": None}
    for change, words in (({"samples": 2}, "min_samples"), ({"noise": 5.0}, "max_noise"),
                          ({"extra": {"timer": {"sm_clock_drift": -0.2}}}, "drifted")):
        r = validity.reliability({**ok, **change}, m)
        assert r["reliable"] is False and words in r["unreliable_reason"]
    assert validity.reliability({"status": "failed"}, m) == {}


def test_a_noisy_row_is_reliable_when_its_median_is_pinned_down():
    m = RELIABILITY
    timer = {"timer": {"sm_clock_drift": 0.001}, "kernel": "k"}
    short = {"status": "ok", "samples": 900, "noise": 0.045, "median_ci": 0.004, "extra": timer}
    r = validity.reliability(short, m)
    assert r["reliable"] is True and r["unreliable_reason"] is None
    assert r["extra"] == {**timer, "reliability": {"by": "median_ci", "median_ci": 0.004, "max_median_ci": 0.005,
                                                   "noise": 0.045, "max_noise": 0.02}}
    assert validity.reliability({**short, "extra": json.dumps(timer)}, m)["extra"]["kernel"] == "k"  # as read
    # each way it fails says so, naming both criteria
    for change, words in (({"noise": 0.12}, "> max_noise 2.0% and > max_noise_hard 10.0%"),
                          ({"median_ci": 0.008}, "> max_noise 2.0% and median_ci ±0.80% > max_median_ci ±0.50%"),
                          ({"median_ci": None}, "> max_noise 2.0% and no median_ci"),
                          ({"extra": {"timer": {"sm_clock_drift": 0.05}}}, "drifted")):
        r = validity.reliability({**short, **change}, m)
        assert r["reliable"] is False and words in r["unreliable_reason"] and "extra" not in r, (change, r)
    r = validity.reliability({**short, "median_ci": 0.008, "samples": 5}, m)
    assert validity.criteria(r["unreliable_reason"]) == "min_samples + max_noise + max_median_ci"
    assert validity.criteria("noise 12% > max_noise 2% and > max_noise_hard 10% (...)") == "max_noise + max_noise_hard"


def test_the_run_summary_counts_rows_by_the_rule_that_decided_them(capsys):
    from gemmlab.runner import print_summary

    m = RELIABILITY
    base = {"variant": "v", "precision": "fp16", "m": 512, "n": 512, "k": 512, "status": "ok", "samples": 900}
    rows = [{**base, "noise": 0.04, "median_ci": ci, "extra": {}} for ci in (0.003, 0.008, 0.009)]
    rows += [{**base, "noise": 0.3, "median_ci": 0.001, "extra": {}}, {**base, "noise": 0.01, "extra": {}}]
    rows = [{**r, **validity.reliability(r, m)} for r in rows]
    counts = {k: 0 for k in ("ok", "failed", "skipped", "resumed", "remeasured", "worker_restarts", "interrupted")}
    print_summary(SimpleNamespace(summary_rows=rows, counts=counts, worker_faults=[]), "results.csv")
    out = " ".join(capsys.readouterr().out.split())
    assert "reliable by median_ci 1 ok points" in out
    assert "unreliable 3 ok points" in out and "max_noise + max_median_ci (2), max_noise + max_noise_hard (1)" in out


def test_impossible_results_fail():
    row = {"status": "ok", "op": "gemm", "precision": "fp16", "flops": 2 * 8192 ** 3,
           "tflops": 1500.0, "time_median_s": 2 * 8192 ** 3 / 1500e12, "bytes_min": 3 * 2 * 8192 ** 2}
    why = validity.impossible(row, 4096, 132, 1980.0, 4800, 62914560)
    assert why and "impossible" in why and "1071" in why  # 4096 x 132 x 1980 MHz = 1071 TFLOP/s
    assert validity.impossible({**row, "tflops": 700.0}, 4096, 132, 1980.0, 4800, 62914560) is None
    copy = {"status": "ok", "op": "copy", "flops": 0, "bytes_min": 2 * 2 ** 30, "time_median_s": 2 * 2 ** 30 / 9e12}
    assert "bandwidth" in validity.impossible(copy, None, None, None, 4800, 62914560)
    assert validity.impossible({**copy, "time_median_s": 2 * 2 ** 30 / 4.2e12}, None, None, None, 4800, 62914560) is None
    small = {**copy, "bytes_min": 2 ** 20, "time_median_s": 2 ** 20 / 9e12}  # fits the L2: not DRAM
    assert validity.impossible(small, None, None, None, 4800, 62914560) is None


def test_the_device_config_has_the_hopper_rates():
    d = compose_cfg(["device=h200"]).device
    peak = validity.peak_tflops(d.sm_flops_per_clock["fp16"], 132, 1830)
    assert peak == pytest.approx(d.peak_tflops["fp16"], rel=0.01)  # the datasheet's 989 at 1830 MHz
    assert validity.peak_tflops(d.sm_flops_per_clock["fp32"], 132, 1980) == pytest.approx(d.peak_tflops["fp32"], rel=0.01)


# -- one run per folder, one run per GPU -------------------------------------------------------------
def test_run_ids_are_unique_per_process(tmp_path):
    from gemmlab.runner import Runner

    cfg = _cpu(tmp_path)
    assert Runner(cfg, tmp_path / "x").run_id != Runner(cfg, tmp_path / "x").run_id


HOLD = textwrap.dedent("""
    import sys, time
    from gemmlab.sweep.locks import lock_folder
    lock_folder(sys.argv[1], sys.argv[2], "test holder")
    print("held", flush=True)
    time.sleep(30)
""")


def _hold(folder, name):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), name], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_into_a_busy_folder_refuses_naming_the_first(tmp_path):
    from gemmlab.runner import RUN_LOCK, Runner
    from gemmlab.sweep.locks import BusyError

    out = tmp_path / "run"
    proc = _hold(out, RUN_LOCK)
    try:
        with pytest.raises(BusyError, match=f"pid {proc.pid}"):
            Runner(_cpu(tmp_path), out).run()
        assert not (out / "results.csv").exists()
    finally:
        proc.kill()
        proc.wait()
    Runner(_cpu(tmp_path), out).run()  # free again once the holder is gone
    assert (out / "results.csv").exists()


def test_the_gpu_claim_waits_then_fails_clearly(tmp_path, monkeypatch):
    from gemmlab.sweep import pinning as gpu_pinning

    monkeypatch.setenv(gpu_pinning.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    monkeypatch.setattr(gpu_pinning, "_claim", None)
    monkeypatch.setattr(gpu_pinning, "resolve", lambda e: {"index": 7, "uuid": None})
    proc = _hold(tmp_path / "locks", "7.lock")
    said = []
    try:
        t0 = __import__("time").monotonic()
        with pytest.raises(gpu_pinning.GpuBusy, match=f"pid {proc.pid}.*run.gpu_wait_s=1"):
            gpu_pinning.claim_for_run(1.0, poll_s=0.1, announce=said.append)
        assert 0.9 < __import__("time").monotonic() - t0 < 5
        assert said and "waiting up to 1 s" in said[0]
    finally:
        proc.kill()
        proc.wait()
    claim = gpu_pinning.claim_for_run(1.0, poll_s=0.1)
    assert claim is not None and claim.entry == "7" and claim.waited_s < 1
    claim.release()


def test_foreign_processes_exclude_this_run_and_its_children():
    import os

    from gemmlab.measure.nvml import drift, foreign_pids

    me = os.getpid()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert foreign_pids([me, child.pid]) == []
        assert foreign_pids([me, child.pid, 999999]) == [999999]
        assert foreign_pids(None) is None
        assert foreign_pids([11, 12]) == [12]  # NVML shows another PID namespace: one of them is us
    finally:
        child.kill()
        child.wait()
    assert drift([1980.0] * 9 + [1500.0] * 9) < -0.2
    assert abs(drift([1500.0, 1600.0] * 9)) < 0.01


def test_foreign_processes_are_told_by_their_own_ancestry_not_a_scan_of_proc(monkeypatch):
    """The sampler classifies the GPU's processes while samples run: a grandchild of this run is
    ours, found without listing /proc (a scan costs the enqueuing thread GIL time, nvml._descends)."""
    import os

    from gemmlab.measure import nvml

    me = os.getpid()
    code = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']);"
            " print(c.pid, flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())

        def no_scan(path):
            raise AssertionError(f"foreign_pids listed {path}")

        monkeypatch.setattr(nvml.os, "listdir", no_scan)
        assert nvml.foreign_pids([me, child.pid, grandchild]) == []
        assert nvml.foreign_pids([me, grandchild, 1]) == [1]  # init is nobody's child of ours
        assert nvml.foreign_pids([me, 999999]) == [999999]  # gone: not ours
        assert nvml._descends(grandchild, {1})  # a run that is a container's init owns every process
        monkeypatch.undo()
        assert {child.pid, grandchild} <= nvml._own_tree()  # the full walk agrees
    finally:
        child.kill()
        child.wait()
        if "grandchild" in locals():
            os.kill(grandchild, 9)


def _run_py(args, cwd, **kw):
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_second_sweep_into_a_busy_sweep_folder_refuses(tmp_path):
    from gemmlab.sweep.callbacks import SWEEP_LOCK

    sweep = tmp_path / "sweep"
    holder = _hold(sweep, SWEEP_LOCK)
    try:
        p = _run_py(["-m", "variant=cpu_blas", "precision=fp32,fp64", "sizes=smoke", *QUICK,
                     f"hydra.sweep.dir={sweep}"], tmp_path)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 2, (out[-1000:], err[-2000:])
        assert f"pid {holder.pid}" in err and "in use by another gemmlab sweep" in err
        assert not list(sweep.rglob("results.csv"))
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_two_sweeps_started_at_once_into_one_folder_one_refuses(tmp_path):
    sweep = tmp_path / "sweep"
    args = ["-m", "variant=cpu_blas", "precision=fp32,fp64", "sizes.shapes=[]", "sizes.square=[256]",
            "measure=quick", "measure.min_time_s=1.5", "measure.max_time_s=2", "run.progress=false",
            "run.report=false", f"hydra.sweep.dir={sweep}"]  # the sweep's page: tests/test_cpu_run.py
    procs = [_run_py(args, tmp_path) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [(p.returncode, e[-800:]) for p, (o, e) in zip(procs, outs)]
    refused = outs[[p.returncode for p in procs].index(2)][1]
    assert "in use by another gemmlab sweep" in refused
    from gemmlab.rows import read

    df = read(sweep / "results.csv")
    assert len(df) == 2 and df.point_key.nunique() == 2  # one sweep's rows, each point once


def test_tiny_results_round_with_an_absolute_error_inside_the_bound():
    """fl(x) = x (1 + d) + e: FP16 results in the subnormal range (input_scale 2^-8, K = 16)."""
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((256, 16), dtype=np.float32) * 2.0 ** -8).astype(np.float16)
    b = (rng.standard_normal((16, 256), dtype=np.float32) * 2.0 ** -8).astype(np.float16)
    c = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)  # FP32 sums, one rounding
    res = _ref(a, b).verify(c)
    assert res.passed, res.failure()
