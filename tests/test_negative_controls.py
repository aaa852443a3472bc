"""The negative controls (conf/variant/wrong_*.yaml, kernels/cuda/9[5-8]_wrong_*.cu, one body in
kernels/cuda/common/wrong_gemm.cuh) fail the element-wise check, for their bug and nothing else.

In the host emulation (tests/test_cuda_kernels.py), at shapes where each bug shows, for every
precision of every control:

- the check (gemmlab/measure/check.py, the precision's own error model) fails it with finite wrong values:
  no NaN/Inf, failed elements, and the largest error/bound above 1;
- the failed elements lie where the bug is (the 16 x 16 tile's off-diagonal, the last row) and at
  least half of that region fails;
- the output is exactly what the bug predicts: it passes the same check once the bug is modelled
  (the tile transposed back, row M - 1 computed from row M - 2, the product over the full
  K-slices only, a bound built from the narrow accumulator's unit roundoff), so every element
  outside the bug passes its bound.

And, without emulation, each control's ``requires`` skips the shapes where its bug cannot show
(rather than report an ``ok`` control), and runs at the powers of two the GPU test uses.
"""
from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import compose_cfg
from omegaconf import OmegaConf
from test_cuda_kernels import NEEDS_GXX, _inputs, emulate, emulator

from gemmlab.backends.cuda_kernels import build_for
from gemmlab.variants import files as variant_files
from gemmlab.measure import check
from gemmlab.points import expand

CONTROLS = ("wrong_tile", "wrong_edge_row", "wrong_k_tail", "wrong_low_acc")
SWAPPED = 16  # side of wrong_tile's transposed tile (kernels/cuda/common/wrong_gemm.cuh)
# M = 65: the last row is alone in the second row of block tiles, row M - 2 in the first.
# K = 40 and 64 with BK = 24: one and two full slices, and a 16-long tail (64: a power of two).
SHAPES = [(65, 33, 40), (64, 96, 64)]
# The accumulator of wrong_low_acc per precision, by unit roundoff.
LOW_ACC = {"fp64": "float32", "fp32": "bfloat16", "fp16": "float16", "bf16": "bfloat16"}


def control_precisions():
    files = variant_files()
    return [(v, p) for v in CONTROLS for p in OmegaConf.load(files[v]).precisions]


CASES = control_precisions()


@functools.lru_cache(maxsize=None)
def points(shapes):
    """{(variant, precision, m, n, k): Point} of every control and precision at ``shapes``, from one
    composed config (composing every cuda variant per shape, as points_at does, takes longer)."""
    cfg = compose_cfg([f"variant=[{','.join(CONTROLS)}]", "precision=[fp64,fp32,fp16,bf16]", "sizes.square=[]",
                       "sizes.shapes=[" + ",".join(f"[{m},{n},{k}]" for m, n, k in shapes) + "]"])
    return {(p.variant, p.precision, p.m, p.n, p.k): p for p in expand(cfg)}


def point(variant, precision, m, n, k, shapes=tuple(SHAPES)):
    return points(shapes)[(variant, precision, m, n, k)]


def test_the_controls_are_cuda_variants_outside_the_default_sweep():
    files = variant_files()
    for v in CONTROLS:
        node = OmegaConf.load(files[v])
        assert node.backend == "cuda" and node.in_default_sweep is False and node.get("stage") is None, v
        assert set(node.precisions) == {"fp64", "fp32", "fp16", "bf16"}, v


POWERS_OF_TWO = [(n, n, n) for n in (1024, 4096, 8192, 16384)]
EDGES = [(64, 64, 48), (64, 64, 24), (15, 64, 64), (64, 15, 64), (16, 16, 64), (32, 32, 64), (1, 64, 64),
         (2, 64, 64), (64, 64, 1), (64, 64, 2)]


def test_each_control_runs_where_its_bug_shows_and_is_skipped_where_it_cannot():
    def skipped(v, m, n, k):
        reason = point(v, "fp32", m, n, k, shapes=tuple(POWERS_OF_TWO + EDGES)).skip_reason
        assert reason is None or "requires" in reason, reason
        return reason is not None

    for shape in POWERS_OF_TWO:  # BK = 24 divides no power of two: the tail is always there
        assert not any(skipped(v, *shape) for v in CONTROLS), shape
    assert skipped("wrong_k_tail", 64, 64, 48) and skipped("wrong_k_tail", 64, 64, 24)
    assert skipped("wrong_tile", 15, 64, 64) and skipped("wrong_tile", 64, 15, 64)
    assert not skipped("wrong_tile", 16, 16, 64) and not skipped("wrong_tile", 32, 32, 64)
    assert skipped("wrong_edge_row", 1, 64, 64) and not skipped("wrong_edge_row", 2, 64, 64)
    assert skipped("wrong_low_acc", 64, 64, 1) and not skipped("wrong_low_acc", 64, 64, 2)


# ---- in the host emulation ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def emulators(tmp_path_factory):
    """Build every control's emulator up front, in parallel (the builds are most of the time).
    emulate() finds them in emulator()'s cache: the same folder as the tests' mktemp parent."""
    folder = tmp_path_factory.mktemp("emu-wrong")
    builds = {build_for(point(v, p, *SHAPES[0])) for v, p in CASES}
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        list(pool.map(lambda b: emulator(b, str(folder.parent)), builds))
    return folder


def bug_region(variant, m, n, k):
    """Where the bug may make elements fail (True), from the kernel's own definition."""
    region = np.zeros((m, n), dtype=bool)
    if variant == "wrong_tile":
        r0, c0 = (m // 2) // SWAPPED * SWAPPED, (n // 2) // SWAPPED * SWAPPED
        region[r0:r0 + SWAPPED, c0:c0 + SWAPPED] = ~np.eye(SWAPPED, dtype=bool)  # the diagonal stays
    elif variant == "wrong_edge_row":
        region[m - 1, :] = True
    else:  # wrong_k_tail, wrong_low_acc: every element
        region[:] = True
    return region


def what_the_bug_computes(variant, p, a, b, c):
    """The check of ``c`` against what the bug predicts (it must pass)."""
    model = check.model_of(p)
    if variant == "wrong_tile":  # transposing the tile back undoes the bug
        m, n = c.shape
        r0, c0 = (m // 2) // SWAPPED * SWAPPED, (n // 2) // SWAPPED * SWAPPED
        c = c.copy()
        c[r0:r0 + SWAPPED, c0:c0 + SWAPPED] = c[r0:r0 + SWAPPED, c0:c0 + SWAPPED].T.copy()
    elif variant == "wrong_edge_row":  # the last row is the product of A's row M - 2
        a = a.copy()
        a[-1] = a[-2]
    elif variant == "wrong_k_tail":  # only the full BK-slices
        bk = int(p.variant_cfg.cuda.defines.BK)
        kf = p.k - p.k % bk
        a, b = a[:, :kf], b[:kf, :]
    elif variant == "wrong_low_acc":
        # Worst-case bound (no probabilistic lambda) with the narrow accumulator's unit roundoff,
        # doubled: each step rounds the sum once in the compute type and once into the accumulator.
        # The Frobenius tolerance is the precision's, not the narrow accumulator's: left out.
        model = check.ErrorModel(u_acc=2 * check.UNIT_ROUNDOFF[LOW_ACC[p.precision]], u_conv=0.0,
                                 u_out=model.u_out, lam=math.inf)
        return check.Reference.gemm(np, a, b, model, math.inf, p.out_dtype).verify(c)
    return check.Reference.gemm(np, a, b, model, p.tolerance, p.out_dtype).verify(c)


@NEEDS_GXX
@pytest.mark.slow
@pytest.mark.parametrize("variant,precision", CASES, ids=[f"{v}-{p}" for v, p in CASES])
def test_the_check_fails_each_control_where_its_bug_is(variant, precision, emulators, tmp_path_factory):
    folder = tmp_path_factory.mktemp("emu-wrong-run")
    rng = np.random.default_rng(7)
    for m, n, k in SHAPES:
        p = point(variant, precision, m, n, k)
        assert p.skip_reason is None, p.skip_reason
        where = f"{variant} ({precision}) at {m}x{n}x{k}"
        a, b = _inputs(p, rng)
        c = emulate(build_for(p), p, folder, a, b)
        ref = check.Reference.gemm(np, a, b, check.model_of(p), p.tolerance, p.out_dtype)
        res = ref.verify(c)

        # fails, with finite wrong values
        assert not res.passed, f"{where}: the check passed a control ({check.model_of(p).describe(k)})"
        assert res.nonfinite == 0, f"{where}: {res.failure()}"
        assert res.elem_fail > 0 and res.elem_max > 1, f"{where}: {res.failure()}"

        # ... where the bug is, and over most of it
        c64 = c.astype(np.float64)
        bad = ~(np.abs(c64 - ref.target) <= ref.bound)
        assert int(bad.sum()) == res.elem_fail, where
        region = bug_region(variant, m, n, k)
        outside = np.argwhere(bad & ~region)
        assert outside.size == 0, (f"{where}: {len(outside)} elements fail outside the bug, first at "
                                   f"{tuple(int(x) for x in outside[0])}")
        if variant != "wrong_low_acc":  # its failures are where the rounding happens to be largest
            assert bad[region].mean() > 0.5, f"{where}: only {bad[region].sum()} of {region.sum()} fail"

        # ... and the output is exactly what the bug computes
        model = what_the_bug_computes(variant, p, a, b, c)
        assert model.passed, f"{where}: not the bug's output: {model.failure()}"
