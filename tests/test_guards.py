"""Guard zones (gemmlab/measure/guards.py) and the tightness of the check (issue 29, items 2 and 6).

A kernel that writes past C's end, before its start, or into A or B fails with what it did, even
when C itself is right; the guards' bytes are random per point. And the rules that decide a
point's fate are tested where a mutation would otherwise survive: an error between 1x and 100x its
bound fails, the worst of ``check_repeats`` decides, resume measures failed points again, and a
merge keeps an ok row over a later failed one.
"""
from __future__ import annotations

import csv
import ctypes
import math
import re

import numpy as np
import pytest
from conftest import compose_cfg, right_only_once, run_points
from worker_fakes import misbehave

from gemmlab import rows as result_rows
from gemmlab.measure import check
from gemmlab.measure.guards import ALIGN, Guards, guard_size


# -- the zones ---------------------------------------------------------------------------------------
def test_guards_see_writes_after_and_before_an_output_and_into_an_input():
    g = Guards(np, 1000)
    assert g.guard == ALIGN == guard_size(1) and guard_size(0) == 0
    a = g.input(np.arange(12, dtype=np.float32).reshape(3, 4), "A")
    c = g.output((3, 4), np.float32)
    c[...] = 1.0
    assert g.violation() is None
    zone, guard = g.zones[1], g.guard
    after = ~zone.pattern[guard:guard + 12]  # bytes that differ from the pattern's (a byte written with
    ctypes.memmove(c.ctypes.data + c.nbytes, after.tobytes(), 12)  # the pattern's own value goes unseen)
    assert g.violation() == "wrote 12 bytes after C's end (first at offset +0)"
    ctypes.memmove(c.ctypes.data - 3, (~zone.pattern[guard - 3:guard - 2]).tobytes(), 1)
    a[2, 1] = -a[2, 1] - 1
    text = g.violation()
    assert "changed A (first at row 2, col 1; 1 element)" in text
    assert "before C's start (nearest at offset -3)" in text


@pytest.mark.parametrize("chunk", [8, 12, 13, 1 << 20])
def test_an_input_is_compared_a_chunk_at_a_time_with_the_same_verdict(monkeypatch, chunk):
    """Chunks of 8 and 12 bytes split the 4-byte elements' runs across chunk ends; 13 is not a
    multiple of the element (rounded down to whole elements); 1 MiB is one pass. Every change is
    counted once, and the first is still the first."""
    from gemmlab.measure import guards as guards_mod
    monkeypatch.setattr(guards_mod._changed, "__defaults__", (chunk,))
    g = Guards(np, 4096)
    b = g.input(np.arange(40, dtype=np.float32).reshape(5, 8), "B")
    for r, c in ((1, 1), (1, 2), (2, 7), (3, 0), (4, 7)):
        b[r, c] = -1.0 - b[r, c]
    assert g.violation() == "changed B (first at row 1, col 1; 5 elements)"
    first, elems = guards_mod._changed(np, g.zones[0].live, g.zones[0].kept, 4)
    assert (first // 4, elems) == (9, 5) and first >= 36  # a byte of element 9 (row 1, col 1)


def test_the_pattern_is_drawn_per_point_and_the_arrays_keep_their_alignment():
    one, two = Guards(np, 64 * 1024), Guards(np, 64 * 1024)
    c1, c2 = one.output((5, 7), np.float64), two.output((5, 7), np.float64)
    assert not np.array_equal(one.zones[0].pattern, two.zones[0].pattern)
    for g, c in ((one, c1), (two, c2)):
        assert c.ctypes.data - g.zones[0].buf.ctypes.data == 64 * 1024  # a multiple of ALIGN into the buffer
        assert c.flags.c_contiguous and c.shape == (5, 7)


def test_a_batched_input_names_the_batch_and_guards_off_leave_plain_arrays():
    g = Guards(np, 4096)
    b = g.input(np.ones((2, 3, 4), dtype=np.float16), "B")
    b[1, 2, 3] = 7
    assert g.violation() == "changed B (first at batch 1, row 2, col 3; 1 element)"
    off = Guards(np, 0)
    x = np.ones(3)
    assert off.input(x, "A") is x and not off.on and off.violation() is None and off.fields() == {"guard_bytes": 0}


# -- through a run -------------------------------------------------------------------------------------
def _cpu(tmp_path, *extra):
    return compose_cfg(["variant=cpu_blas", "precision=fp32", "measure=quick", "run.progress=false",
                        "run.isolate=none", "sizes.square=[]", *extra], tmp_path)


def test_a_run_fails_a_write_past_c_and_a_write_into_b_with_what_they_did(tmp_path, monkeypatch):
    misbehave(monkeypatch, only=["oob", "writes_b"])
    cfg = _cpu(tmp_path, "sizes.shapes=[[8,8,8],[23,23,23],[29,29,29]]")
    _, rows = run_points(cfg, tmp_path / "run")
    by_m = {int(r["m"]): r for r in rows}
    assert by_m[8]["status"] == "ok" and by_m[8]["guard_check"] == "clean" and by_m[8]["guard_bytes"] == "262144"
    # 8 bytes of 0x5A: one of them may equal the random guard byte there (1 in 256 each) and go unseen
    assert by_m[23]["status"] == "failed" and re.fullmatch(r"wrote [5-8] bytes after C's end \(first at offset \+[0-3]\)",
                                                           by_m[23]["reason"]), by_m[23]["reason"]
    assert by_m[29]["status"] == "failed" and by_m[29]["reason"].startswith("changed B (first at row 1, col 2")
    assert by_m[23]["check_elem_fail"] == "0"  # C itself was right: only the guard saw it


def test_a_write_past_c_on_the_timed_calls_only_fails_after_timing(tmp_path, monkeypatch):
    from gemmlab.backends import cpu_blas

    def past_the_end(c):
        ctypes.memset(c.ctypes.data + c.nbytes + 100, 0x33, 4)

    right_only_once(monkeypatch, cpu_blas.CpuBlas, past_the_end)
    _, (r,) = run_points(_cpu(tmp_path, "sizes.shapes=[[16,16,16]]"), tmp_path / "later")
    assert r["status"] == "failed" and re.fullmatch(r"after timing: wrote [1-4] bytes after C's end \(first at offset "
                                                    r"\+10[0-3]\)", r["reason"]), r["reason"]
    assert r["guard_check"] == r["reason"]


# -- how tight the check is --------------------------------------------------------------------------
def _bound(a, b, u_acc, u_out, eta, u_ref=2.0 ** -53, lam=3.0):
    """Higham's bound, written here again (not taken from check.py): gamma(K) |A||B| + u_out |R|."""
    k = a.shape[1]

    def gamma(u):
        return u * min(k / (1 - k * u), lam * math.sqrt(k))

    s = np.abs(a) @ np.abs(b)
    return (gamma(u_acc) + gamma(u_ref)) * s + u_out * np.abs(a @ b) + eta


@pytest.mark.parametrize("compute, out_dtype, u_acc, u_out, eta", [
    ("fp32", "float32", 2.0 ** -24, 2.0 ** -24, 2.0 ** -150),
    ("bf16", "bfloat16", 2.0 ** -24, 2.0 ** -8, 2.0 ** -134),
])
def test_an_error_between_one_and_a_hundred_times_its_bound_fails(compute, out_dtype, u_acc, u_out, eta):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((24, 300)), rng.standard_normal((300, 20))
    r, bound = a @ b, _bound(a, b, u_acc, u_out, eta)
    model = check.error_model(compute, out_dtype)
    ref = check.Reference.gemm(np, a, b, model, tolerance=1.0, out_dtype=out_dtype)
    for factor in (0.9, 1.05, 1.5, 3, 10, 30, 99):
        out = r.copy()
        out[7, 11] += factor * bound[7, 11]
        res = ref.verify(out)
        assert res.passed == (factor < 1), (factor, res.elem_max)
        if factor > 1:
            assert res.elem_fail == 1 and res.first[:2] == (7, 11) and res.elem_max == pytest.approx(factor, rel=1e-6)


def test_the_worst_repeat_decides():
    good = check.CheckResult(rel_error=1e-7, max_abs_error=1e-6, nonfinite=0, tolerance=1e-5, elem_max=0.2)
    bad = check.CheckResult(rel_error=2e-7, max_abs_error=1e-3, nonfinite=0, tolerance=1e-5, elem_max=3.0, elem_fail=2)
    assert check.worst([good, bad]) is bad and check.worst([bad, good]) is bad
    outs = iter([good, bad, good])
    worst, results = check.checked_calls(lambda: None, lambda: None, lambda: next(outs), 3)
    assert worst is bad and len(results) == 3


def test_a_kernel_wrong_on_its_second_checked_call_fails_the_check_itself(tmp_path, monkeypatch):
    from gemmlab.backends import cpu_blas

    def corrupt(c):
        c[3, 4] = c[3, 4] * 2 + 1

    right_only_once(monkeypatch, cpu_blas.CpuBlas, corrupt)
    _, (r,) = run_points(_cpu(tmp_path, "sizes.shapes=[[16,16,16]]", "measure.check_repeats=3"), tmp_path / "rep")
    assert r["status"] == "failed" and "(row 3, col 4)" in r["reason"], r["reason"]
    assert not r["reason"].startswith("after timing"), "the repeats of the check must catch it, not the recheck"


# -- resume and merge ----------------------------------------------------------------------------------
def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_resume_measures_failed_points_again_and_says_so(tmp_path, monkeypatch, capsys):
    out = tmp_path / "resume"
    shapes = "sizes.shapes=[[8,8,8],[23,23,23]]"
    with monkeypatch.context() as m:
        misbehave(m, only=["oob"])
        runner, rows = run_points(_cpu(tmp_path, shapes), out)
    assert [r["status"] for r in rows] == ["ok", "failed"]
    runner, rows = run_points(_cpu(tmp_path, shapes), out)
    assert runner.counts["resumed"] == 1 and runner.counts["remeasured"] == 1 and runner.counts["ok"] == 1
    assert "1 points failed in an earlier run" in capsys.readouterr().err
    assert [(r["m"], r["status"]) for r in rows] == [("8", "ok"), ("23", "failed"), ("23", "ok")]


def test_a_merge_keeps_an_ok_row_over_a_later_failed_row_of_the_same_point(tmp_path):
    def job(name, statuses):
        folder = tmp_path / name
        with result_rows.RowWriter(folder) as w:
            for key, status in statuses:
                w.write({"point_key": key, "status": status, "variant": "x", "run_id": name})
        return folder

    one = job("0", [("k1", "ok"), ("k2", "failed")])
    two = job("1", [("k1", "failed"), ("k2", "ok"), ("k2", "failed")])
    merged = _rows(result_rows.merge([one, two], tmp_path / "results.csv"))
    assert {r["point_key"]: (r["status"], r["run_id"]) for r in merged} == {"k1": ("ok", "0"), "k2": ("ok", "1")}


def test_the_footprint_counts_each_input_three_times_and_one_compare_chunk():
    """The drawn inputs stay as the check's operands, the guarded copies go to the kernel, and the
    kept bytes are compared with them: three copies of A and B (cuBLAS at DeepSeek-V3's 256 bf16
    experts, 15 GB of B, ran out of memory on an 80 GB card where two had been counted)."""
    from types import SimpleNamespace

    from gemmlab.measure import footprint, guards as guards_mod
    p = SimpleNamespace(batch=256, m=2, n=4096, k=7168, out_dtype="bfloat16",
                        bytes_min=2 * 256 * (2 * 7168 + 7168 * 4096 + 2 * 4096))
    inputs = 2 * 256 * (2 * 7168 + 7168 * 4096)
    assert footprint.guard_bytes(p, 0) == 0
    assert footprint.guard_bytes(p, 1) == 2 * inputs + 6 * ALIGN + guards_mod.COMPARE_CHUNK
    assert footprint.guard_bytes(p, 1, n_sets=2) == 2 * (2 * inputs + 6 * ALIGN) + guards_mod.COMPARE_CHUNK


def test_the_check_is_primed_once_per_kind_of_output(monkeypatch):
    """GpuExecutor._prime_check runs the check (verify on the poisoned output, the guard compare) once per process
    and kind of output (storage type, exact or bounded, 32- or 64-bit indexing), so that CuPy's first-use compiles
    fall outside the checked call's watchdog limit; without a reference, the guard compare alone."""
    from types import SimpleNamespace

    from conftest import compose_cfg

    from gemmlab.measure import gpu as gpu_mod

    monkeypatch.setattr(gpu_mod, "_PRIMED", set())
    ex = gpu_mod.GpuExecutor(compose_cfg())
    ex.cp, ex.stream = np, SimpleNamespace(synchronize=lambda: None)
    seen = []

    class Ref:
        bound = np.ones(1)

        def __init__(self, exact=False, r_bytes=8):
            self.exact, self.r = exact, SimpleNamespace(nbytes=r_bytes)

        def verify(self, out):
            seen.append((str(out.dtype), bool(np.isnan(out).all())))

    class Zones:
        zones, compares, on = [], 0, True

        def violation(self):
            Zones.compares += 1

    failure_paths = []
    monkeypatch.setattr(gpu_mod.guards, "prime_failure_path", failure_paths.append)

    c32, c64 = np.ones((2, 3), np.float32), np.ones((2, 3), np.float64)
    for c, ref in ((c32, Ref()), (c32, Ref()), (c64, Ref()), (c32, Ref(exact=True)), (c32, Ref(r_bytes=3 << 30)),
                   (c32, Ref()), (c32, None), (c32, None)):
        ex._prime_check(ref, c, Zones())
    # verified poisoned, once a kind: float32, float64, exact, R past 2 GiB; then the guards alone once
    assert seen == [("float32", True), ("float64", True), ("float32", True), ("float32", True)]
    assert Zones.compares == 5
    assert failure_paths == [np]  # the guards' failure branches: once per process


def test_the_guards_failure_path_is_primed_on_every_branch():
    """guards.prime_failure_path runs each failure branch of the compare (a write before and after an output, an
    input changed), so CuPy compiles their kernels before a checked call's limit, not inside it."""
    from gemmlab.measure import guards as guards_mod
    why = guards_mod.prime_failure_path(np)
    assert "changed A (first at row 1, col 2; 1 element)" in why
    assert "wrote 1 byte after C's end" in why and "wrote 1 byte before C's start" in why


def test_measure_primes_the_check_and_builds_the_baselines_before_the_checked_call(monkeypatch):
    """The order inside GpuExecutor._measure (NumPy standing in for CuPy): the baselines' launches and the check's
    priming come before the checked call's limit starts."""
    from types import SimpleNamespace

    from conftest import compose_cfg

    from gemmlab.backends.base import Launch
    from gemmlab.measure import gpu as gpu_mod
    from gemmlab.points import expand

    class Stop(Exception):
        pass

    cfg = compose_cfg(["variant=cublas", "precision=fp32", "sizes.square=[64]", "sizes.shapes=[]",
                       "measure.baseline=[]"])
    (p,) = expand(cfg)
    ex = gpu_mod.GpuExecutor(cfg)
    ex.cp, ex.stream, ex.dev = np, SimpleNamespace(synchronize=lambda: None), {"l2_bytes": 1 << 20}
    monkeypatch.setattr(gpu_mod, "free_bytes", lambda: 1 << 40)
    monkeypatch.setattr(gpu_mod, "_PRIMED", set())
    events = []
    real = ex._prime_check
    monkeypatch.setattr(ex, "_prime_check", lambda *a: (events.append("prime"), real(*a)))

    def watch(phase, *_):
        events.append(phase)
        raise Stop

    ex.watch = watch
    backend = SimpleNamespace(wants_fp32_inputs=lambda p: True, make_inputs=lambda p, a, b: (a, b, a, b),
                              make_launch=lambda p, a, b, c: Launch(lambda: np.matmul(a, b, out=c), {}))
    base = SimpleNamespace(make_launch=lambda p, a, b, c: (events.append("baseline"),
                                                           Launch(lambda: np.matmul(a, b, out=c), {}))[1])
    with pytest.raises(Stop):
        ex._measure(p, backend, seed=0, baselines=[("cublas", p, base)])
    assert events == ["baseline", "prime", "checked call"]
