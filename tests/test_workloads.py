"""The workload axes: operand layouts (nn nt tn tt) and strided batches, on the CPU end to end,
with the check failing a backend that mishandles either, and the points' keys and skip reasons."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import compose_cfg, run_points

from gemmlab import operands
from gemmlab.points import expand

QUICK = ["measure=quick", "run.progress=false"]
ALL_LAYOUTS = "layouts=[nn,nt,tn,tt]"


def _cfg(tmp_path, *extra, variant="cpu_blas", precision="[fp64,fp32]"):
    return compose_cfg([f"variant={variant}", f"precision={precision}", "sizes=smoke", *QUICK, *extra], tmp_path)


# -- keys -----------------------------------------------------------------------------------------
def test_a_default_point_keeps_the_key_it_had_before_the_axes():
    """nn, batch 1, unnamed: the key of every point measured before the axes existed (resume and
    the reference rows match on it). Computed on the commit before the axes were added."""
    pts = {(p.variant, p.m, p.n, p.k): p for p in expand(compose_cfg(
        ["variant=[cpu_blas,cublas]", "precision=fp32", "sizes=smoke"]))}
    assert pts[("cpu_blas", 64, 64, 64)].key == "2febcbb1cc817e6f"
    assert pts[("cpu_blas", 33, 65, 17)].key == "39d0d82a0f02d7cd"
    assert pts[("cublas", 96, 96, 96)].key == "48a6f298c71c4f63"


def test_fields_only_analysis_reads_stay_out_of_the_key():
    """A stage's ceiling probe and its cuda.defines_before change no measurement: setting them
    keeps every point's key (stage 10's key is the one it had before either field existed)."""
    base = ["variant=mma_sync", "precision=bf16", "sizes=smoke"]
    keys = {p.key for p in expand(compose_cfg(base)) if (p.m, p.n, p.k) == (64, 64, 64)}
    other = {p.key for p in expand(compose_cfg(base + ["variant.mma_sync.ceiling=null",
                                                       "+variant.mma_sync.cuda.defines_before={STAGES: 3}"]))
             if (p.m, p.n, p.k) == (64, 64, 64)}
    assert keys == other == {"604b70a422bf547a"}
    changed = {p.key for p in expand(compose_cfg(base + ["variant.mma_sync.cuda.defines.STAGES=3"]))
               if (p.m, p.n, p.k) == (64, 64, 64)}
    assert changed != keys


def test_layout_and_batch_are_in_the_key_and_the_work():
    pts = expand(compose_cfg(["variant=cpu_blas", "precision=fp32", "sizes=smoke", ALL_LAYOUTS, "batch=[1,3]"]))
    assert len(pts) == 4 * 2 * 3
    assert len({p.key for p in pts}) == len(pts)
    p3 = next(p for p in pts if p.batch == 3 and p.layout == "tn" and p.m == 33)
    p1 = next(p for p in pts if p.batch == 1 and p.layout == "tn" and p.m == 33)
    assert p3.flops == 2 * 3 * 33 * 65 * 17 == 3 * p1.flops
    assert p3.bytes_min == 3 * 4 * (33 * 17 + 17 * 65 + 33 * 65) == 3 * p1.bytes_min
    nn = next(p for p in pts if p.batch == 1 and p.layout == "nn" and p.m == 33)
    assert p1.bytes_min == nn.bytes_min  # a transposed operand holds as many elements


def test_operands_store_the_transpose_and_give_back_the_logical_view():
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    s = operands.store(np, x, True)
    assert s.shape == (2, 5, 3) and s.flags.c_contiguous
    assert np.array_equal(operands.logical(s, True), x)
    assert operands.store(np, x, False) is x
    assert operands.transposed("nt") == (False, True) and operands.transposed("tn") == (True, False)
    with pytest.raises(ValueError):
        operands.transposed("xx")


# -- the CPU baseline end to end --------------------------------------------------------------------
@pytest.mark.slow
def test_cpu_baseline_runs_every_layout_and_a_batch_and_passes_the_check(tmp_path):
    _, rows = run_points(_cfg(tmp_path, ALL_LAYOUTS, "batch=[1,3]"), tmp_path / "run")
    assert len(rows) == 2 * 4 * 2 * 3
    bad = [(r["layout"], r["batch"], r["m"], r["reason"]) for r in rows if r["status"] != "ok"]
    assert not bad, bad
    assert {r["layout"] for r in rows} == {"nn", "nt", "tn", "tt"} and {r["batch"] for r in rows} == {"1", "3"}
    for r in rows:
        m, n, k, b = (int(r[c]) for c in ("m", "n", "k", "batch"))
        assert int(r["flops"]) == 2 * b * m * n * k
        assert float(r["check_elem_max"]) < 1
        assert r["layout"] in r["kernel_name"]


def _ignore_transposes(monkeypatch):
    """A CPU backend that reads every stored operand as if it were the logical one (reshaped)."""
    from gemmlab.backends import cpu_blas

    def make_launch(self, p, a, b, c):
        lead = (p.batch,) if p.batch > 1 else ()

        def fn():
            np.matmul(a.reshape(lead + (p.m, p.k)), b.reshape(lead + (p.k, p.n)), out=c)
        return cpu_blas.Launch(fn, {})

    monkeypatch.setattr(cpu_blas.CpuBlas, "make_launch", make_launch)


def test_a_backend_that_ignores_the_layout_fails_the_check(tmp_path, monkeypatch):
    _ignore_transposes(monkeypatch)
    _, rows = run_points(_cfg(tmp_path, ALL_LAYOUTS, precision="fp32"), tmp_path / "run")
    for r in rows:
        if r["layout"] == "nn":
            assert r["status"] == "ok", r["reason"]
        else:
            assert r["status"] == "failed" and "exceed their error bound" in r["reason"], r["reason"]


def test_a_backend_that_computes_only_the_first_gemm_of_a_batch_fails_naming_the_batch(tmp_path, monkeypatch):
    from gemmlab.backends import cpu_blas

    def make_launch(self, p, a, b, c):
        def fn():
            np.matmul(a[0], b[0], out=c[0])
            c[1:] = c[0]  # every GEMM of the batch gets the first one's result
        return cpu_blas.Launch(fn, {})

    monkeypatch.setattr(cpu_blas.CpuBlas, "make_launch", make_launch)
    _, rows = run_points(_cfg(tmp_path, "batch=[3]", precision="fp32"), tmp_path / "run")
    assert rows and all(r["status"] == "failed" for r in rows)
    assert all("(batch 1, row 0, col 0)" in r["reason"] for r in rows), [r["reason"] for r in rows]


# -- who runs what --------------------------------------------------------------------------------
def test_hand_written_stages_skip_other_layouts_and_batches_with_the_reason(tmp_path):
    _, rows = run_points(_cfg(tmp_path, "layouts=[nn,nt]", "batch=[1,2]", variant="naive", precision="fp32"),
                         tmp_path / "run")
    for r in rows:
        if r["layout"] == "nt":
            assert r["reason"] == "hand-written stages read row-major A and B (layout nn) (this point: layout nt)"
        elif r["batch"] == "2":
            assert r["reason"] == "hand-written stages compute one GEMM per launch (batch 1) (this point: batch 2)"
        else:  # nn, batch 1: only what this machine lacks (no GPU here) or nothing
            assert "hand-written" not in r["reason"]


def test_a_variant_may_declare_the_layouts_it_supports(tmp_path):
    from gemmlab.backends.cuda_kernels import CudaKernels

    pts = expand(_cfg(tmp_path, ALL_LAYOUTS, "+variant.naive.layouts=[nn,tn]", variant="naive", precision="fp32"))
    reasons = {p.layout: CudaKernels.workload_reason(p) for p in pts}
    assert reasons["nn"] is None and reasons["tn"] is None
    assert reasons["tt"] == "naive declares layouts nn, tn (this point: layout tt)"


def test_libraries_and_cutlass_run_every_layout_and_batch():
    from gemmlab.backends.base import backend_class

    pts = expand(compose_cfg(["variant=[cublas,cublaslt,cutlass_auto,cpu_blas]", "precision=fp16",
                              "sizes=smoke", ALL_LAYOUTS, "batch=[1,4]"]))
    assert all(backend_class(p.backend).workload_reason(p) is None for p in pts)


# -- old rows in the analysis -------------------------------------------------------------------------
def test_analysis_reads_rows_without_the_axes_as_one_nn_gemm():
    from analysis.read import normalize

    old = pd.DataFrame([{"run_id": "r", "backend": "cpu_blas", "variant": "cpu_blas", "op": "gemm",
                         "m": 4, "n": 4, "k": 4, "status": "ok", "kind": "cpu"}])
    new = old.assign(layout="tn", batch=3, shape_name="llama3_8b.attn_o.t1")
    a, b = normalize(old).iloc[0], normalize(new).iloc[0]
    assert (a["layout"], a["batch"], a["shape_name"]) == ("nn", 1, "")
    assert (b["layout"], b["batch"], b["shape_name"]) == ("tn", 3, "llama3_8b.attn_o.t1")


# -- the cuBLAS call's arguments, run through a column-major model of cuBLAS ------------------------
def _colmajor(buf, rows, cols, ld, offset=0):
    """The rows x cols column-major matrix at ``buf[offset:]`` with leading dimension ld."""
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return buf[offset + i + j * ld]


def _cublas_model(args, name, mem):
    """What cublasGemmEx / cublasGemmStridedBatchedEx compute, as the cuBLAS documentation defines
    them (column-major C = op(A) op(B)), on flat 'device' buffers ``mem[pointer]``."""
    if name == "gemmEx":
        (_h, opa, opb, m, n, k, _al, pa, _ta, lda, pb, _tb, ldb, _be, pc, _tc, ldc, _ct, _algo) = args
        sa = sb = sc = 0
        batch = 1
    else:
        (_h, opa, opb, m, n, k, _al, pa, _ta, lda, sa, pb, _tb, ldb, sb, _be, pc, _tc, ldc, sc, batch,
         _ct, _algo) = args
    for i in range(batch):
        a = _colmajor(mem[pa], m, k, lda, i * sa) if opa == 0 else _colmajor(mem[pa], k, m, lda, i * sa).T
        b = _colmajor(mem[pb], k, n, ldb, i * sb) if opb == 0 else _colmajor(mem[pb], n, k, ldb, i * sb).T
        c = a @ b
        for j in range(n):
            mem[pc][i * sc + j * ldc: i * sc + j * ldc + m] = c[:, j]


@pytest.mark.parametrize("layout", operands.LAYOUTS)
@pytest.mark.parametrize("batch", [1, 3])
def test_cublas_arguments_compute_the_logical_product_for_every_layout(layout, batch):
    """gemm_arguments' transpose flags, leading dimensions and strides, checked without a GPU:
    the arguments drive a model of cuBLAS's column-major GEMM on the stored operands' memory."""
    from gemmlab.backends.cublas import COMPUTE, gemm_arguments
    from gemmlab.points import Point

    m, n, k = 5, 7, 3
    p = Point("cublas", "cublas", "fp64", m, n, k, "float64", "float64", "fp64", 1e-12,
              layout=layout, batch=batch)
    rng = np.random.default_rng(0)
    sa, sb = operands.logical_shapes(m, n, k, batch)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    ta, tb = operands.transposed(layout)
    mem = {1: operands.store(np, a, ta).ravel().copy(), 2: operands.store(np, b, tb).ravel().copy(),
           3: np.full(batch * m * n, np.nan)}
    args, name = gemm_arguments(p, 0, 0, 0, 1, 2, 3, COMPUTE["fp64"][0])
    assert name == ("gemmEx" if batch == 1 else "gemmStridedBatchedEx")
    _cublas_model(args, name, mem)
    c = mem[3].reshape(operands.output_shape(m, n, batch))  # row-major C
    assert np.allclose(c, a @ b)


# -- the LLM shape sets (conf/sizes/llm.yaml, gemmlab/llm_shapes.py) ---------------------------------
def _llm_points():
    return expand(compose_cfg(["+experiment=llm_shapes"]))


def test_llm_shapes_are_named_and_recomputed_by_hand():
    by = {}
    for p in _llm_points():
        by.setdefault(p.shape_name, (p.m, p.n, p.k, p.batch, p.layout))
    tokens = (1, 16, 64, 1024, 4096, 16384)
    llama = ("attn_qkv", "attn_o", "mlp_gate_up", "mlp_down")
    ds = ("attn_qkv_a", "attn_q_b", "attn_kv_b", "attn_o", "dense_gate_up", "dense_down", "moe_router",
          "shared_gate_up", "shared_down", "expert_gate_up", "expert_down")
    expected = {f"{m}.{p}.t{t}" for m in ("llama3_8b", "llama3_70b", "llama3_405b") for p in llama for t in tokens}
    expected |= {f"deepseek_v3.{p}.t{t}" for p in ds for t in tokens}
    assert set(by) == expected
    # by hand, from the models' configs: m = tokens, n = out_features, k = in_features
    assert by["llama3_8b.attn_qkv.t1"] == (1, (32 + 2 * 8) * 128, 4096, 1, "nt")  # 6144
    assert by["llama3_70b.mlp_down.t4096"] == (4096, 8192, 28672, 1, "nt")
    assert by["llama3_70b.attn_qkv.t16"] == (16, 10240, 8192, 1, "nt")  # (64 + 16) x 128
    assert by["llama3_405b.mlp_gate_up.t16384"] == (16384, 2 * 53248, 16384, 1, "nt")
    assert by["llama3_405b.attn_o.t64"] == (64, 16384, 128 * 128, 1, "nt")
    assert by["deepseek_v3.attn_qkv_a.t1024"] == (1024, 1536 + 512 + 64, 7168, 1, "nt")  # 2112
    assert by["deepseek_v3.attn_q_b.t1024"] == (1024, 128 * (128 + 64), 1536, 1, "nt")  # 24576
    assert by["deepseek_v3.attn_kv_b.t1"] == (1, 128 * (128 + 128), 512, 1, "nt")  # 32768
    assert by["deepseek_v3.attn_o.t16"] == (16, 7168, 128 * 128, 1, "nt")
    assert by["deepseek_v3.dense_down.t64"] == (64, 7168, 18432, 1, "nt")
    assert by["deepseek_v3.shared_gate_up.t4096"] == (4096, 4096, 7168, 1, "nt")
    # routed experts, balanced: T x 8 assignments over min(256, 8T) experts
    assert by["deepseek_v3.expert_gate_up.t1"] == (1, 4096, 7168, 8, "nt")
    assert by["deepseek_v3.expert_down.t16"] == (1, 7168, 2048, 128, "nt")
    assert by["deepseek_v3.expert_down.t4096"] == (128, 7168, 2048, 256, "nt")


def test_llm_experiment_runs_libraries_and_cutlass_in_bf16_and_fp8_and_skips_the_cpu_with_reasons():
    pts = _llm_points()
    assert {p.variant for p in pts} == {"cpu_blas", "cublas", "cublaslt", "cutlass_auto"}
    assert {p.precision for p in pts} == {"bf16", "fp8"}
    cpu = [p for p in pts if p.backend == "cpu_blas"]
    assert cpu and all(p.skip_reason and "does not support" in p.skip_reason for p in cpu)
    expert = next(p for p in pts if p.shape_name == "deepseek_v3.expert_gate_up.t1024" and p.variant == "cublas")
    assert expert.flops == 2 * 256 * 32 * 4096 * 7168
    assert len({p.key for p in pts}) == len(pts)


def test_an_unknown_model_family_is_a_config_error():
    from gemmlab.points import ConfigError

    with pytest.raises(ConfigError, match="unknown model family"):
        expand(compose_cfg(["+experiment=llm_shapes", "sizes.models.llama3_8b.family=gpt"]))


def test_each_layout_and_batch_is_its_own_point_in_analysis():
    """"% of cuBLAS" of a point divides by cuBLAS at the same layout and batch, never by another
    layout's or batch's time at the same m, n, k."""
    import pandas as pd

    from analysis import data

    base = {"status": "ok", "timer": "cuda_event", "kind": "gpu", "run_id": "r", "precision": "fp16", "op": "gemm",
            "m": 4096, "n": 4096, "k": 4096, "samples": 20, "flops": 2 * 4096 ** 3}
    rows = [{**base, "backend": "cublas", "variant": "cublas", "layout": "nn", "batch": 1, "time_median_s": 2e-4},
            {**base, "backend": "cublas", "variant": "cublas", "layout": "nt", "batch": 1, "time_median_s": 1e-4},
            {**base, "backend": "cublas", "variant": "cublas", "layout": "nn", "batch": 4, "time_median_s": 5e-5},
            {**base, "backend": "cutlass", "variant": "cutlass_auto", "layout": "nn", "batch": 1, "time_median_s": 4e-4}]
    df = data.normalize(pd.DataFrame(rows))
    out = data.with_pct_of_cublas(df)
    cut = out[out["backend"] == "cutlass"].iloc[0]
    assert cut["pct_of_cublas"] == pytest.approx(50.0) and cut["pct_of_standalone"] == pytest.approx(50.0)


def test_a_searched_cublaslt_is_never_the_cublas_baseline():
    """cublaslt_search is a tuning result: "% of cuBLAS" divides by the libraries' defaults only."""
    import pandas as pd

    from analysis import data

    base = {"status": "ok", "timer": "cuda_event", "kind": "gpu", "run_id": "r", "precision": "bf16", "op": "gemm",
            "m": 8192, "n": 8192, "k": 8192, "samples": 20, "layout": "nn", "batch": 1}
    rows = [{**base, "backend": "cublaslt", "variant": "cublaslt", "time_median_s": 2e-3},
            {**base, "backend": "cublaslt", "variant": "cublaslt_search", "time_median_s": 1e-3},
            {**base, "backend": "cuda", "variant": "wgmma_ws", "time_median_s": 2e-3}]
    out = data.with_pct_of_cublas(data.normalize(pd.DataFrame(rows)))
    assert out.loc[out["variant"] == "wgmma_ws", "pct_of_cublas"].iloc[0] == pytest.approx(100.0)
