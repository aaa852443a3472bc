"""The conduct controls misbehave exactly where their headers say, in the host emulation (issue 29).

kernels/cuda/8[5-8]_wrong_*.cu compute C right and then write one row past C's end (M % BM != 0),
write into B (K % 32 != 0), store through a wild index (M >= FAULT_M) or never return
(K >= HANG_K). The emulation's driver holds A, B and C in exactly-sized buffers under
AddressSanitizer, so a write past C or a wild store ends the run with ASan's report, B can be read
back after the kernel (GEMMLAB_EMU_B_OUT), and a hang outlives its time limit. Where a control does
not misbehave it must be right, so a GPU run can show it ``ok`` there and ``failed`` only where it
misbehaves (tests/test_gpu_isolation.py, and the harness's own catching of it, tests/test_worker.py
and tests/test_guards.py). FP32 only: the misbehaviour is in the shared body, not in the types.
"""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from conftest import compose_cfg
from test_cuda_kernels import NEEDS_GXX, emulator

from gemmlab.backends.cuda_kernels import build_for, launch_shape
from gemmlab.points import expand

pytestmark = [NEEDS_GXX, pytest.mark.slow]
# small limits, so the emulation reaches them at small shapes
DEFINES = ["variant.wrong_fault.cuda.defines.FAULT_M=64", "variant.wrong_hang.cuda.defines.HANG_K=64"]


def _point(variant, m, n, k):
    cfg = compose_cfg([f"variant=[{variant}]", "precision=fp32", "sizes.square=[]", f"sizes.shapes=[[{m},{n},{k}]]",
                       *(d for d in DEFINES if f".{variant}." in d)])
    (p,) = expand(cfg)
    return p


def _run(p, folder, timeout=120):
    """Emulate point ``p`` on random inputs: (completed process or None when it timed out, a, b, B after)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((p.m, p.k), dtype=np.float32)
    b = rng.standard_normal((p.k, p.n), dtype=np.float32)
    a.tofile(folder / "a.bin")
    b.tofile(folder / "b.bin")
    exe = emulator(build_for(p), str(folder.parent))
    shape = launch_shape(p, sm_count=2)
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "GEMMLAB_EMU_B_OUT": str(folder / "b_after.bin")}
    cmd = [str(exe), str(p.m), str(p.n), str(p.k), *map(str, shape.grid), *map(str, shape.block),
           str(shape.smem_bytes), str(folder / "a.bin"), str(folder / "b.bin"), str(folder / "c.bin")]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, a, b, None
    after = np.fromfile(folder / "b_after.bin", dtype=np.float32).reshape(b.shape) if r.returncode == 0 else None
    return r, a, b, after


def _right(r, a, b, folder, p):
    assert r.returncode == 0, r.stderr[-3000:]
    c = np.fromfile(folder / "c.bin", dtype=np.float32).reshape(p.m, p.n).astype(np.float64)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-5


def test_oob_row_writes_past_c_where_m_is_not_a_multiple_of_the_tile(tmp_path):
    p = _point("wrong_oob_row", 65, 33, 40)
    r, *_ = _run(p, tmp_path)
    assert r.returncode != 0 and "heap-buffer-overflow" in r.stderr and "WRITE" in r.stderr, r.stderr[-2000:]
    assert "wrong_oob_row" in r.stderr or "wrong_gemm.cuh" in r.stderr
    p = _point("wrong_oob_row", 64, 33, 40)
    r, a, b, _ = _run(p, tmp_path)
    _right(r, a, b, tmp_path, p)


def test_writes_b_changes_only_b_s_last_element_where_k_has_a_tail(tmp_path):
    p = _point("wrong_writes_b", 33, 20, 40)
    r, a, b, after = _run(p, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    changed = np.argwhere(after != b)
    assert changed.tolist() == [[39, 19]], changed
    p = _point("wrong_writes_b", 33, 20, 64)
    r, a, b, after = _run(p, tmp_path)
    _right(r, a, b, tmp_path, p)
    assert np.array_equal(after, b)


def test_fault_stores_through_a_wild_index_at_fault_m_and_is_right_below(tmp_path):
    p = _point("wrong_fault", 64, 16, 24)
    r, *_ = _run(p, tmp_path)
    assert r.returncode != 0 and ("SEGV" in r.stderr or "wild" in r.stderr or "unknown address" in r.stderr), \
        r.stderr[-2000:]
    p = _point("wrong_fault", 63, 16, 24)
    r, a, b, _ = _run(p, tmp_path)
    _right(r, a, b, tmp_path, p)


def test_hang_never_returns_at_hang_k_and_is_right_below(tmp_path):
    p = _point("wrong_hang", 16, 16, 64)
    # 3 s: the same emulation one column of K shorter (below) returns in a tenth of a second
    r, *_ = _run(p, tmp_path, timeout=3)
    assert r is None, "the kernel returned where it should hang"
    p = _point("wrong_hang", 16, 16, 63)
    r, a, b, _ = _run(p, tmp_path)
    _right(r, a, b, tmp_path, p)
