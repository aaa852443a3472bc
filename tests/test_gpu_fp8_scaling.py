"""Scaled FP8 through cuBLASLt on the GPU (gemmlab/fp8.py, measure.fp8_scaling): per-tensor through
nvmath's Matmul, rowcol and block (DeepSeek-V3) through its raw bindings
(gemmlab/backends/cublaslt_scaled.py), with negative controls that misplace the scales. Written for
the H200 (sm_90, nvmath-python 1.0.0, cuBLASLt 13.x); not yet run there."""
from __future__ import annotations

import json
import logging
import re

import pytest
from conftest import compose_cfg, run_points

pytestmark = pytest.mark.gpu

BASE = ["variant=cublaslt", "precision=fp8", "measure=quick", "run.progress=false", "sizes.shapes=[]"]


def _extra(row):
    return json.loads(row["extra"]) if row.get("extra") else {}


def test_cublaslt_fp8_tensor_scaled_at_4096_passes_the_check_with_real_scales(tmp_path):
    cfg = compose_cfg(BASE + ["sizes.square=[4096]", "measure.fp8_scaling=tensor", "measure.input_scale=1000"],
                      tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    (row,) = rows
    assert row["status"] == "ok", row["reason"]
    assert float(row["check_elem_max"]) < 1
    fs = _extra(row)["fp8_scaling"]
    assert fs["mode"] == "tensor" and fs["fp8_max"] == 448.0
    assert fs["scale_a"] != 1.0 and fs["scale_b"] != 1.0
    assert fs["scale_a"] == pytest.approx(fs["amax_a"] / 448.0, rel=1e-6)


@pytest.mark.parametrize("scaling", ["tensor", "none"])
@pytest.mark.parametrize("layout", ["nt", "nn"])
def test_cublaslt_fp8_runs_any_m_its_leading_dimensions_are_k_and_n(tmp_path, layout, scaling):
    # M is no leading dimension of the fp8 path (A row-major, B K-major, a row-major result): 1 token
    # (issue 30's decode) and an odd M run and pass the check, as PyTorch's _scaled_mm runs them.
    # nvmath's Matmul refuses them (M % 16, session42 on an H100): the raw bindings run them,
    # SCALAR_32F scales; at M % 16 == 0 nvmath's Matmul still does
    cfg = compose_cfg(BASE + ["sizes.square=[]", "sizes.shapes=[[1,6144,4096],[1001,1024,1024],[33,4096,2048],"
                              "[64,6144,4096]]", f"layouts=[{layout}]", f"measure.fp8_scaling={scaling}"], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    assert [(int(r["m"]), r["status"]) for r in rows] == [(1, "ok"), (1001, "ok"), (33, "ok"), (64, "ok")], \
        [(r["m"], r["status"], r["reason"]) for r in rows]
    raw = ["cublaslt_scaled" in _extra(r) for r in rows]
    assert raw == [True, True, True, False], [r["kernel_name"] for r in rows]
    assert all("SCALAR_32F x SCALAR_32F" in r["kernel_name"] for r in rows[:3])


def test_cublaslt_fp8_unscaled_inputs_beyond_the_range_fail_as_overflow(tmp_path):
    cfg = compose_cfg(BASE + ["sizes.square=[1024]", "measure.input_scale=1000"], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    (row,) = rows
    assert row["status"] == "failed" and "overflow" in row["reason"], row["reason"]


def test_cublaslt_fp8_search_checks_its_candidates_against_the_dequantized_inputs(tmp_path, caplog):
    cfg = compose_cfg(["variant=cublaslt_search", "precision=fp8", "measure=quick", "run.progress=false",
                       "sizes.shapes=[]", "sizes.square=[1024]", "measure.fp8_scaling=tensor",
                       "measure.input_scale=1000"], tmp_path)
    with caplog.at_level(logging.DEBUG, logger="gemmlab"):
        _, rows = run_points(cfg, tmp_path / "run")
    (row,) = rows
    assert row["status"] == "ok", row["reason"]
    assert _extra(row)["fp8_scaling"]["scale_a"] != 1.0
    # the search ran in the worker under a watchdog phase of its own, then the rest of the setup under its own
    phases = [r.getMessage() for r in caplog.records if r.getMessage().startswith("worker ")]
    search = [i for i, m in enumerate(phases) if re.search(r": search of \d+ trials \(limit ", m)]
    assert search and "setup after the search" in phases[search[0] + 1], phases


# -- rowcol and block (cuBLASLt's Hopper scale modes, gemmlab/backends/cublaslt_scaled.py) ------------------
DEEPSEEK = ("attn_qkv_a", "attn_kv_b", "shared_down")  # n = 2112 (a partial n-block), k = 512, k = 2048
TOKENS = (64, 1024, 4096)


def _deepseek_shapes():
    """(m, n, k) of three DeepSeek-V3 projections (conf/sizes/llm.yaml) at 64, 1024, 4096 tokens."""
    from gemmlab.llm_shapes import projections

    d = compose_cfg(["sizes=llm"]).sizes.models.deepseek_v3
    return [[t, n, k] for name, n, k, *_ in projections("deepseek_v3", d) if name in DEEPSEEK for t in TOKENS]


@pytest.mark.parametrize("mode,modes", [("rowcol", ("OUTER_VEC_32F", "OUTER_VEC_32F")),
                                        ("block", ("BLK128x128_32F", "VEC128_32F"))])
def test_cublaslt_rowcol_and_block_pass_the_check_at_deepseek_v3_shapes(tmp_path, mode, modes):
    shapes = _deepseek_shapes()
    cfg = compose_cfg(BASE + ["layouts=[nt]", "sizes.square=[]", f"measure.fp8_scaling={mode}",
                              "measure.input_scale=1000", "measure.baseline=[]", "run.fail_on_error=false"],
                      tmp_path)
    cfg.sizes.shapes = shapes
    _, rows = run_points(cfg, tmp_path / "run")
    assert len(rows) == len(shapes) == 9
    bad = [(r["m"], r["n"], r["k"], r["status"], r["reason"]) for r in rows if r["status"] != "ok"]
    assert not bad, bad
    for r in rows:
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        ex = _extra(r)
        fs, lt = ex["fp8_scaling"], ex["cublaslt_scaled"]
        assert fs["mode"] == mode and (lt["scale_mode_a"], lt["scale_mode_b"]) == modes
        assert float(r["check_elem_max"]) < 1 and modes[0] in r["kernel_name"]
        kb, nb = -(-k // 128), -(-n // 128)
        want = ([m, 1], [1, n]) if mode == "rowcol" else ([m, kb], [kb, nb])
        assert (fs["scale_a_shape"], fs["scale_b_shape"]) == want
        assert fs["scale_a_range"][0] < fs["scale_a_range"][1]  # scales that differ per row / block


# Inputs whose 128-blocks differ in magnitude by up to 2^12, so a scale applied to the wrong block
# is an error far beyond the check's bound (with the executor's normal inputs every block's amax
# is about the same, and a misplaced scale could pass). K = 1088 and N = 2112 leave partial last
# blocks.
M, N, K = 256, 2112, 1088


def _blocky(cupy, rng, shape, blocks):
    x = rng.standard_normal(shape, dtype=cupy.float32)
    grid = [-(-s // b) for s, b in zip(shape, blocks)]
    mag = cupy.exp2(cupy.floor(rng.random(tuple(grid), dtype=cupy.float32) * 13) - 6)  # 2^-6 .. 2^6
    return (x * cupy.repeat(cupy.repeat(mag, blocks[0], 0), blocks[1], 1)[: shape[0], : shape[1]]).astype(cupy.float32)


def _direct(mode, tmp_path, m=M, n=N, k=K):
    """One nt point's check outside the runner: cuBLASLt's make_inputs and make_launch on blocky
    inputs, the output against the FP64 product of the dequantized inputs."""
    import cupy

    from gemmlab.backends.cublaslt import CublasLt
    from gemmlab.gpu import arrays
    from gemmlab.measure import check
    from gemmlab.points import expand

    cfg = compose_cfg(BASE + ["layouts=[nt]", "sizes.square=[]", f"sizes.shapes=[[{m},{n},{k}]]",
                              f"measure.fp8_scaling={mode}"], tmp_path)
    (p,) = expand(cfg)
    backend = CublasLt(cfg)
    assert backend.skip_reason(p) is None
    rng = cupy.random.default_rng(7)
    blocks_a, blocks_b = ((1, 128), (128, 128)) if mode == "block" else ((1, k), (k, 1))
    a32, b32 = _blocky(cupy, rng, (m, k), blocks_a), _blocky(cupy, rng, (k, n), blocks_b)
    a, b, a_ref, b_ref = backend.make_inputs(p, a32, cupy.ascontiguousarray(b32.T))  # B stored n x k (nt)
    c = arrays.empty(cupy, (m, n), "bfloat16")
    arrays.poison(cupy, c)
    try:
        launch = backend.make_launch(p, a, b, c)
        launch.fn()
        cupy.cuda.get_current_stream().synchronize()
        ref = check.gemm_reference(cupy, p, "gpu", a_ref, b_ref.T, False)
        res = ref.verify(c)
        ref.release()
        return res, launch
    finally:
        backend.release()


@pytest.mark.parametrize("mode", ["rowcol", "block"])
def test_scales_that_differ_per_block_land_on_their_blocks(tmp_path, mode):
    res, launch = _direct(mode, tmp_path)
    assert res.passed, res.failure()
    assert launch.info["extra"]["algorithm"]["heuristic_returned"] >= 1


def _misplaced(kind):
    """cublaslt_scale_layout as a wrong reading of the docs would write it (same sizes: nothing is
    read out of bounds): the grid in its own row-major order, not transposed."""
    import cupy

    from gemmlab import fp8

    right = fp8.cublaslt_scale_layout

    def layout(grid, mode=None):
        out = right(grid, mode)
        if kind == "row_major" and 1 not in grid.shape:
            flat = cupy.zeros(out.size, dtype=cupy.float32)
            flat[: grid.size] = cupy.ascontiguousarray(grid).reshape(-1)
            out = flat.reshape(out.shape)
        elif kind == "reversed":  # rowcol: each row / column gets another's scale
            out = out[::-1].copy()
        elif kind == "max":  # one scale for all: what ignoring the per-block scales would do
            out = cupy.full_like(out, float(grid.max()))
        return out

    return layout


@pytest.mark.parametrize("mode,kind", [("block", "row_major"), ("block", "max"), ("rowcol", "reversed"),
                                       ("rowcol", "max")])
def test_negative_control_misplaced_scales_fail_the_check(tmp_path, monkeypatch, mode, kind):
    from gemmlab import fp8

    monkeypatch.setattr(fp8, "cublaslt_scale_layout", _misplaced(kind))
    res, _ = _direct(mode, tmp_path)
    assert not res.passed and res.elem_fail > 0, (mode, kind, res.elem_max)


def test_negative_control_a_and_b_scales_swapped_fail_the_check(tmp_path, monkeypatch):
    """cuBLAS's A scale is our B's: handing over our A's instead (m = n, so the sizes agree)."""
    import dataclasses

    from gemmlab.backends import cublaslt_scaled as scaled

    right = scaled.plan
    monkeypatch.setattr(scaled, "plan", lambda p, sc: dataclasses.replace(
        right(p, sc), scale_a=right(p, sc).scale_b, scale_b=right(p, sc).scale_a))
    res, _ = _direct("rowcol", tmp_path, m=1024, n=1024)
    assert not res.passed and res.elem_fail > 0


# -- CUTLASS FP8 (variant cutlass_fp8: per-tensor scales as the epilogue's alpha) ------------------------
def _cutlass_fp8(tmp_path, extra=()):
    cfg = compose_cfg(["variant=cutlass_fp8", "precision=fp8", "measure=quick", "run.progress=false", "layouts=[nt]",
                       "sizes.square=[4096]", "sizes.shapes=[[64,2112,7168],[4096,7168,2048]]",
                       "measure.fp8_scaling=tensor", "measure.input_scale=1000", "run.fail_on_error=false", *extra],
                      tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    return rows


def test_cutlass_fp8_passes_the_check_beside_cublaslt(tmp_path):
    import numpy as np

    rows = _cutlass_fp8(tmp_path, ["measure.baseline=[cublaslt]"])
    assert len(rows) == 3
    for r in rows:
        assert r["status"] == "ok", r["reason"]
        ex = _extra(r)
        fs = ex["fp8_scaling"]
        assert fs["mode"] == "tensor" and fs["scale_a"] != 1.0
        assert ex["cutlass"]["alpha"] == float(np.float32(fs["scale_a"]) * np.float32(fs["scale_b"]))
        assert "e4m3_e4m3_f32_void_bf16" in r["kernel_name"] and float(r["spill_bytes"] or 0) == 0
        assert float(r["pct_of_baseline"]) > 0 and r["baseline_variant"] == "cublaslt"


def test_negative_control_cutlass_fp8_without_its_scales_fails(tmp_path, monkeypatch):
    from gemmlab.backends.cutlass.backend import Cutlass

    monkeypatch.setattr(Cutlass, "_alpha", lambda self, point, a, b: 1.0)  # forgets scale_a * scale_b
    rows = _cutlass_fp8(tmp_path, ["measure.baseline=[]", "run.isolate=none"])  # the patch lives in this process
    assert rows and all(r["status"] == "failed" for r in rows), [(r["status"], r["reason"]) for r in rows]


@pytest.mark.parametrize("layout", ["nn", "nt"])
@pytest.mark.parametrize("mode", ["none", "tensor", "block"])
def test_the_operands_references_are_the_values_pytorch_decodes_from_the_fp8_bytes(layout, mode):
    """gemmlab.fp8.gpu_operands decodes its references from the FP8 bytes by table (no PyTorch FP32
    copy, session50b's out of memory): the same values the cast through PyTorch gave, dequantized the
    same way, in the stored layout, C-contiguous, FP32 unscaled and FP64 scaled."""
    import cupy
    import torch

    from gemmlab import fp8

    m, n, k = 96, 320, 384
    rng = cupy.random.default_rng(0)
    draw_scale = 1.0 if mode == "none" else 100.0  # unscaled draws stay inside the range
    a32 = rng.standard_normal((m, k), dtype=cupy.float32) * cupy.float32(draw_scale)
    b_logical = rng.standard_normal((k, n), dtype=cupy.float32) * cupy.float32(draw_scale)
    b32 = cupy.ascontiguousarray(b_logical.T) if layout == "nt" else b_logical
    ta, tb, a_ref, b_ref, sc = fp8.gpu_operands(layout, "float8_e4m3fn", mode, a32, b32)
    want_a = cupy.from_dlpack(ta.to(torch.float32))
    want_b = cupy.from_dlpack(tb.to(torch.float32).contiguous())
    if mode != "none":
        lb = want_b.T if layout == "nt" else want_b
        want_a, lb = sc.dequantize(cupy, want_a, lb)
        want_b = lb.T if layout == "nt" else lb
    assert a_ref.dtype == b_ref.dtype == (cupy.float32 if mode == "none" else cupy.float64)
    assert b_ref.shape == b32.shape and b_ref.flags.c_contiguous
    cupy.testing.assert_array_equal(a_ref, want_a)
    cupy.testing.assert_array_equal(b_ref, want_b)
    assert float(cupy.abs(a_ref).max()) > 0
