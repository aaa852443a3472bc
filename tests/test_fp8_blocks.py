"""Per-row/column and per-block FP8 scales (gemmlab/fp8.py, measure.fp8_scaling=rowcol|block):
the grids, the quantization, the tail rule, the dequantized operands the check compares with,
cuBLASLt's scale layouts and the skips. CPU only (NumPy); each test can fail, and says how."""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from gemmlab import fp8
from gemmlab.measure import check

E4M3 = "float8_e4m3fn"
F8 = ml_dtypes.float8_e4m3fn


def _draw(shape, scale=1000.0, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32) * np.float32(scale)


def _naive_scales(x, br, bc):
    """amax / 448 per block by loops, the tail blocks over what they hold (the test's own rule)."""
    rows, cols = x.shape
    out = np.empty((-(-rows // br), -(-cols // bc)), np.float32)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            amax = np.float32(np.abs(x[i * br:(i + 1) * br, j * bc:(j + 1) * bc]).max())
            out[i, j] = np.float32(1) if amax == 0 else amax / np.float32(448)
    return out


def _quantized(mode, a, b):
    sc = fp8.scales_for(np, mode, a, b)
    qa, qb = fp8.quantize_operands(np, sc, a, b)
    return sc, qa.astype(F8), qb.astype(F8)


# -- grids and the tail rule -----------------------------------------------------------------------------
@pytest.mark.parametrize("m,n,k", [(3, 200, 300), (4, 256, 256), (1, 2112, 7168 // 8)])
def test_grids_have_one_scale_per_block_partial_blocks_included(m, n, k):
    a, b = _draw((m, k)), _draw((k, n), seed=1)
    blk = fp8.scales_for(np, "block", a, b)
    assert blk.a.shape == (m, -(-k // 128)) and blk.b.shape == (-(-k // 128), -(-n // 128))
    assert blk.block_a == (1, 128) and blk.block_b == (128, 128)
    rc = fp8.scales_for(np, "rowcol", a, b)
    assert rc.a.shape == (m, 1) and rc.b.shape == (1, n)
    assert rc.block_a == (1, k) and rc.block_b == (k, 1)
    assert blk.a.dtype == np.float32 and rc.b.dtype == np.float32


@pytest.mark.parametrize("mode", ["rowcol", "block"])
def test_every_scale_is_its_blocks_amax_over_448_in_fp32(mode):
    a, b = _draw((5, 300)), _draw((300, 200), scale=3.0, seed=1)
    sc = fp8.scales_for(np, mode, a, b)
    assert np.array_equal(sc.a, _naive_scales(a, *sc.block_a))
    assert np.array_equal(sc.b, _naive_scales(b, *sc.block_b))
    assert len(np.unique(sc.a)) == sc.a.size  # not one scale for all (random rows differ)


def test_a_partial_tail_block_is_scaled_by_its_own_elements():
    # K = 300: A's third k-block holds 44 columns, B's third k-block 44 rows and its second
    # n-block 72 columns. Large values outside the tails must not reach the tails' scales.
    a, b = _draw((2, 300), scale=1.0), _draw((300, 200), scale=1.0, seed=1)
    a[:, :256] *= 1000
    b[:256, :] *= 1000
    b[:, :128] *= 1000
    sc = fp8.scales_for(np, "block", a, b)
    assert np.array_equal(sc.a[:, 2], np.abs(a[:, 256:]).max(axis=1) / np.float32(448))
    assert sc.b[2, 1] == np.float32(np.abs(b[256:, 128:]).max()) / np.float32(448)
    assert (sc.a[:, 2] < sc.a[:, 0] / 100).all() and sc.b[2, 1] < sc.b[0, 0] / 1e5


def test_an_all_zero_block_gets_scale_one_and_stays_zero():
    a, b = _draw((4, 256)), _draw((256, 256), seed=1)
    a[1, 128:] = 0
    b[:128, 128:] = 0
    sc, qa, qb = _quantized("block", a, b)
    assert sc.a[1, 1] == 1.0 and sc.b[0, 1] == 1.0
    assert (qa[1, 128:].astype(np.float32) == 0).all() and (qb[:128, 128:].astype(np.float32) == 0).all()


# -- quantize / dequantize ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["rowcol", "block"])
def test_each_blocks_amax_lands_on_fp8_max_and_nothing_overflows(mode):
    a, b = _draw((6, 384)), _draw((384, 256), scale=250.0, seed=2)
    sc, qa, qb = _quantized(mode, a, b)
    for q, grid, blk in ((qa, sc.a, sc.block_a), (qb, sc.b, sc.block_b)):
        qf = q.astype(np.float32)
        assert np.isfinite(qf).all() and np.abs(qf).max() <= 448
        # per block: the amax element is exactly 448 after the x / scale, clip and RNE cast
        peaks = fp8.block_amax(np, qf, blk)
        assert peaks.shape == grid.shape and (peaks == 448).all()


@pytest.mark.parametrize("mode", ["rowcol", "block"])
def test_dequantized_operands_are_exact_and_within_e4m3_rounding_of_the_drawn_ones(mode):
    a, b = _draw((5, 300)), _draw((300, 200), scale=3.0, seed=3)
    sc, qa, qb = _quantized(mode, a, b)
    da, db = sc.dequantize(np, qa, qb)
    assert da.dtype == np.float64 and da.shape == a.shape and db.shape == b.shape
    for d, q, x, grid, (br, bc) in ((da, qa, a, sc.a, sc.block_a), (db, qb, b, sc.b, sc.block_b)):
        rows, cols = np.indices(x.shape)
        s = grid[rows // br, cols // bc].astype(np.float64)  # each element's own scale, by index
        assert np.array_equal(d, q.astype(np.float64) * s)  # exact: 4 x 24 significant bits
        err = np.abs(d - x.astype(np.float64))
        assert (err <= 2.0 ** -4 * np.abs(x) + 2.0 ** -10 * s).all() and err.max() > 0


def test_block_scales_keep_small_rows_that_a_tensor_scale_flushes():
    # rows of A 10^6 apart: one scale for the tensor leaves the small rows in e4m3's subnormals
    # (or zero); a scale per row block keeps every element within 2^-4 relative
    a, b = _draw((4, 256), scale=1.0), _draw((256, 128), scale=1.0, seed=1)
    a[0] *= 1e6
    for mode, worst in (("tensor", 0.5), ("block", 2.0 ** -4)):
        sc, qa, qb = _quantized(mode, a, b)
        da, _ = sc.dequantize(np, qa, qb)
        rel = np.abs(da[1:] - a[1:]) / np.abs(a[1:])
        assert (rel.max() > worst) if mode == "tensor" else (rel.max() <= worst), mode


# -- the check against the dequantized inputs -----------------------------------------------------------------
def _block_gemm(sc, qa, qb, sa=None, sb=None):
    """What a block-scaled GEMM computes: per k-block, the FP8 products' FP32 sum times
    sa[i, kb] * sb[kb, j // 128]; the sum of blocks in FP32, written as bfloat16."""
    sa = sc.a if sa is None else sa
    sb = sc.b if sb is None else sb
    k, n = qb.shape
    out = np.zeros((qa.shape[0], n), np.float32)
    sbn = np.repeat(sb, 128, axis=1)[:, :n]  # (kb, n)
    for kb in range(-(-k // 128)):
        part = (qa[:, kb * 128:(kb + 1) * 128].astype(np.float64)
                @ qb[kb * 128:(kb + 1) * 128].astype(np.float64)).astype(np.float32)
        out += (sa[:, kb:kb + 1] * sbn[kb:kb + 1]) * part
    return out.astype(ml_dtypes.bfloat16)


def _block_case(m=64, n=200, k=300):
    a, b = _draw((m, k), seed=4), _draw((k, n), scale=250.0, seed=5)
    a[: m // 2, :128] *= 100  # blocks of very different scales, so a misplaced scale shows
    sc, qa, qb = _quantized("block", a, b)
    da, db = sc.dequantize(np, qa, qb)
    ref = check.Reference.gemm(np, da, db, check.error_model("fp8", "bfloat16"), 3e-2, "bfloat16")
    return sc, qa, qb, ref


def test_a_correct_block_scaled_product_passes_the_element_wise_check():
    sc, qa, qb, ref = _block_case()
    res = ref.verify(_block_gemm(sc, qa, qb))
    assert res.passed, res.failure()


@pytest.mark.parametrize("wrong", ["a_scales_of_the_next_k_block", "b_scales_transposed", "per_tensor"])
def test_misplaced_block_scales_fail_the_check(wrong):
    sc, qa, qb, ref = _block_case()
    sa, sb = sc.a, sc.b
    if wrong == "a_scales_of_the_next_k_block":
        sa = np.roll(sc.a, 1, axis=1)
    elif wrong == "b_scales_transposed":  # (nb, kb) read as (kb, nb): here 2 x 3 -> 3 x 2 reshaped
        sb = np.ascontiguousarray(sc.b.T).reshape(sc.b.shape)
    else:
        sa, sb = np.full_like(sc.a, sc.a.max()), np.full_like(sc.b, sc.b.max())
    assert not np.array_equal(sa, sc.a) or not np.array_equal(sb, sc.b)
    res = ref.verify(_block_gemm(sc, qa, qb, sa, sb))
    assert not res.passed and res.elem_fail > 0, wrong


def test_rowcol_scaled_product_passes_and_swapped_vectors_fail():
    a, b = _draw((96, 256), seed=6), _draw((256, 96), scale=3.0, seed=7)
    a[:48] *= 50
    sc, qa, qb = _quantized("rowcol", a, b)
    ref = check.Reference.gemm(np, *sc.dequantize(np, qa, qb), check.error_model("fp8", "bfloat16"), 3e-2,
                               "bfloat16")
    acc = (qa.astype(np.float64) @ qb.astype(np.float64)).astype(np.float32)

    def out(sa, sb):
        return ((sa * sb) * acc).astype(ml_dtypes.bfloat16)

    assert ref.verify(out(sc.a, sc.b)).passed
    assert not ref.verify(out(sc.b.reshape(-1, 1), sc.a.reshape(1, -1))).passed  # A's and B's swapped


# -- what the row records ----------------------------------------------------------------------------------------
def test_the_rows_record_names_the_grids_and_summarises_the_amaxes():
    a, b = _draw((5, 300)), _draw((300, 200), scale=3.0, seed=1)
    ex = fp8.scales_for(np, "block", a, b).extra()
    json.dumps(ex)  # a row's extra is JSON
    assert ex["mode"] == "block" and ex["block_a"] == [1, 128] and ex["block_b"] == [128, 128]
    assert ex["scale_a_shape"] == [5, 3] and ex["scale_b_shape"] == [3, 2]
    assert ex["amax_a"] == float(np.abs(a).max()) and ex["amax_b"] == float(np.abs(b).max())
    assert ex["block_amax_a"]["min"] < ex["block_amax_a"]["median"] <= ex["amax_a"]
    assert ex["scale_a_range"][1] == pytest.approx(ex["amax_a"] / 448, rel=1e-7)


# -- cuBLASLt's layouts -------------------------------------------------------------------------------------------
def test_cublaslt_vec128_layout_is_m_major_with_a_16_byte_padded_column():
    m, kb = 5, 3
    grid = np.arange(m * kb, dtype=np.float32).reshape(m, kb) + 1  # distinct values
    lay = fp8.cublaslt_scale_layout(grid)
    ld = 8  # roundup(5, 4)
    assert lay.shape == (kb, ld) and lay.flags.c_contiguous
    flat = lay.reshape(-1)
    for i in range(m):
        for j in range(kb):
            assert flat[i + j * ld] == grid[i, j]  # cuBLAS: sc + sr * roundup(cols, 4)
    assert not np.array_equal(flat[: m * kb], grid.reshape(-1))  # not the grid's row-major order


def test_cublaslt_blk128x128_layout_is_k_block_major_with_a_16_byte_padded_column():
    kb, nb = 3, 2
    grid = np.arange(kb * nb, dtype=np.float32).reshape(kb, nb) + 1
    lay = fp8.cublaslt_scale_layout(grid)
    ld = 4  # roundup(3, 4)
    assert lay.shape == (nb, ld)
    flat = lay.reshape(-1)
    for j in range(kb):
        for n in range(nb):
            assert flat[j + n * ld] == grid[j, n]  # cuBLAS: sr + sc * roundup(rows / 128, 4)


def test_cublaslt_block_layout_of_one_row_or_one_k_block_is_still_padded():
    """A block grid of one row of A (m = 1: (1, kb)) or one k-block of B (k <= 128: (1, nb)) looks like a
    rowcol vector; handed the mode, the layout pads it as cuBLASLt's VEC128 / BLK128x128 read it."""
    a = np.arange(1, 4, dtype=np.float32).reshape(1, 3)  # m = 1, kb = 3
    lay = fp8.cublaslt_scale_layout(a, "block")
    assert lay.shape == (3, 4) and np.array_equal(lay[:, 0], a[0]) and not lay[:, 1:].any()
    b = np.arange(1, 3, dtype=np.float32).reshape(1, 2)  # kb = 1, nb = 2
    lay = fp8.cublaslt_scale_layout(b, "block")
    assert lay.shape == (2, 4) and np.array_equal(lay[:, 0], b[0])
    assert np.array_equal(lay.reshape(-1)[[0, 4]], b[0])  # element (kb 0, nb 1) at 0 + 1 * roundup(1, 4)
    assert fp8.cublaslt_scale_layout(b).shape == (2,)  # without the mode: read as a vector
    with pytest.raises(ValueError, match="not 'tensor'"):
        fp8.cublaslt_scale_layout(b, "tensor")


def test_cublaslt_outer_vector_layout_is_the_plain_vector():
    col = np.arange(1, 6, dtype=np.float32).reshape(5, 1)
    assert np.array_equal(fp8.cublaslt_scale_layout(col), col.reshape(-1))
    assert np.array_equal(fp8.cublaslt_scale_layout(col.T), col.reshape(-1))
    assert np.array_equal(fp8.cublaslt_scale_layout(col, "rowcol"), col.reshape(-1))


# -- skips -------------------------------------------------------------------------------------------------------
def test_rowcol_and_block_run_on_hopper_with_cublaslt_12_9_and_skip_elsewhere_with_the_reason():
    for mode in fp8.MODES:
        assert fp8.skip_reason(mode, 90, lt_version=130200) is None
    assert "OUTER_VEC_32F" in fp8.skip_reason("rowcol", 89) and "sm_89" in fp8.skip_reason("rowcol", 89)
    assert "Hopper" in fp8.skip_reason("block", 89)
    assert "MXFP8" in fp8.skip_reason("block", 100) and "sm_100" in fp8.skip_reason("block", 100)
    assert "Hopper" in fp8.skip_reason("rowcol", 100)
    assert "12.9" in fp8.skip_reason("block", 90, lt_version=120800)
    assert fp8.skip_reason("tensor", 90, lt_version=120800) is None


def test_a_backend_that_implements_only_per_tensor_skips_the_block_modes_by_name():
    why = fp8.skip_reason("block", 90, implemented=("none", "tensor"), who="the cuda backend")
    assert why == "fp8_scaling=block is not implemented by the cuda backend (it runs none, tensor)"
    assert fp8.skip_reason("tensor", 90, implemented=("none", "tensor")) is None
    with pytest.raises(ValueError):
        fp8.skip_reason("rowwise", 90)


@pytest.mark.parametrize("mode", ["rowcol", "block"])
def test_the_hand_written_fp8_stages_skip_the_scaled_modes_they_do_not_implement(mode, monkeypatch):
    import sys
    import types

    from conftest import compose_cfg

    from gemmlab.backends.cuda_kernels import CudaKernels
    from gemmlab.points import expand

    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))  # past the PyTorch check
    cfg = compose_cfg(["variant=wgmma_fp8", "precision=fp8", "layouts=[nt]", "sizes.square=[1024]",
                       "sizes.shapes=[]", f"measure.fp8_scaling={mode}"])
    (p,) = expand(cfg)
    if mode == "rowcol":  # no hand-written stage reads per-row / per-column scales
        assert CudaKernels(cfg).skip_reason(p) == ("fp8_scaling=rowcol is not implemented by the cuda backend's "
                                                  "FP8 stages (it runs none, tensor, block)")
    else:  # block is stage 15's (wgmma_fp8_block); stage 13's requires keeps it to per-tensor scales
        assert p.skip_reason and "per-block scales are stage 15's" in p.skip_reason, p.skip_reason
    tensor = compose_cfg(["variant=wgmma_fp8", "precision=fp8", "layouts=[nt]", "sizes.square=[1024]",
                          "sizes.shapes=[]", "measure.fp8_scaling=tensor"])
    (q,) = expand(tensor)
    assert "fp8_scaling" not in (CudaKernels(tensor).skip_reason(q) or "")
