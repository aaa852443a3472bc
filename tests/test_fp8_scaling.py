"""Scaled FP8 (gemmlab/fp8.py, measure.fp8_scaling): the scales, the quantization, the check
against the dequantized inputs, the setting and the skips. CPU only; each test can fail."""
from __future__ import annotations

import json
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
from conftest import compose_cfg

from gemmlab import fp8, rows
from gemmlab import validate as V
from gemmlab.measure import check
from gemmlab.points import expand

E4M3 = "float8_e4m3fn"


def _draw(shape, scale=1000.0, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape, dtype=np.float32) * np.float32(scale))


# -- scales ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,fmax", [(E4M3, 448.0), ("float8_e5m2", 57344.0)])
def test_the_tensor_scale_is_amax_over_the_fp8_max_in_fp32(dtype, fmax):
    x = _draw((64, 96))
    s = fp8.tensor_scale(np, x, dtype)
    amax = np.float32(np.abs(x).max())
    assert s == float(amax / np.float32(fmax))  # exactly the FP32 value handed to the library
    assert float(np.float32(s)) == s
    assert s != 1.0  # never 1 for inputs not already at FP8's max
    assert (s > 1.0) == (float(amax) > fmax)  # beyond the range: scaled down


def test_small_inputs_get_a_scale_below_one_and_zeros_a_scale_of_one():
    assert fp8.tensor_scale(np, _draw((32, 32), scale=1e-3), E4M3) < 1e-4
    assert fp8.tensor_scale(np, np.zeros((4, 4), np.float32), E4M3) == 1.0


def test_scales_for_records_both_operands_and_none_is_one_and_one():
    a, b = _draw((16, 32), seed=1), _draw((32, 8), scale=3.0, seed=2)
    sc = fp8.scales_for(np, "tensor", a, b)
    assert sc.a == fp8.tensor_scale(np, a) and sc.b == fp8.tensor_scale(np, b) and sc.a != sc.b
    assert sc.extra()["amax_a"] == float(np.abs(a).max()) and sc.extra()["fp8_max"] == 448.0
    assert (fp8.scales_for(np, "none", a, b).a, fp8.scales_for(np, "none", a, b).b) == (1.0, 1.0)
    with pytest.raises(ValueError, match="unknown fp8_scaling"):
        fp8.scales_for(np, "rowwise", a, b)


# -- quantize / dequantize -----------------------------------------------------------------------------
def test_quantize_dequantize_round_trip_is_within_e4m3_rounding():
    x = _draw((128, 128))
    s = fp8.tensor_scale(np, x)
    q = fp8.quantize_host(x, s)
    assert q.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    qf = q.astype(np.float32)
    assert np.isfinite(qf).all() and np.abs(qf).max() == 448.0  # the amax element lands on FP8_MAX
    back = fp8.dequantize(np, q, s)
    assert back.dtype == np.float64
    # round to nearest, 4 significant bits: |error| <= 2^-4 |x| (normal range), or half the
    # smallest subnormal (2^-10) times the scale below it
    err = np.abs(back - x.astype(np.float64))
    assert (err <= 2.0 ** -4 * np.abs(x) + 2.0 ** -10 * s).all()
    assert err.max() > 0  # it did round
    # the dequantized value is exact in FP64: q * s with no further rounding
    assert np.array_equal(back, qf.astype(np.float64) * s)


def test_unscaled_inputs_beyond_the_range_overflow_and_scaled_ones_do_not():
    x = _draw((64, 64))
    raw = x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)  # what the cast does with scale 1
    assert np.isnan(raw).any()
    with pytest.raises(check.InputError, match="overflow"):
        check.Reference.gemm(np, raw, raw, check.error_model("fp8", "bfloat16"), 3e-2, "bfloat16")
    assert np.isfinite(fp8.quantize_host(x, fp8.tensor_scale(np, x)).astype(np.float32)).all()


# -- the check against the dequantized inputs -----------------------------------------------------------
def _scaled_case(m=96, n=80, k=64):
    a32, b32 = _draw((m, k), seed=3), _draw((k, n), scale=250.0, seed=4)
    sc = fp8.scales_for(np, "tensor", a32, b32)
    qa, qb = fp8.quantize_host(a32, sc.a), fp8.quantize_host(b32, sc.b)
    ref = check.Reference.gemm(np, fp8.dequantize(np, qa, sc.a), fp8.dequantize(np, qb, sc.b),
                               check.error_model("fp8", "bfloat16"), 3e-2, "bfloat16")
    acc = (qa.astype(np.float64) @ qb.astype(np.float64)).astype(np.float32)  # the FP8 products' sum
    return sc, acc, ref


def _gemm_out(acc, sa, sb):
    """D = scale_a * scale_b * acc in FP32, written as bfloat16 (what cuBLASLt does)."""
    d = (np.float32(sa) * np.float32(sb)) * acc
    return d.astype(np.float32).astype(ml_dtypes.bfloat16)


def test_a_correct_scaled_product_passes_the_element_wise_check():
    sc, acc, ref = _scaled_case()
    res = ref.verify(_gemm_out(acc, sc.a, sc.b))
    assert res.passed, res.failure()
    assert 0 < res.elem_max < 1


def test_forgetting_the_scales_fails():
    sc, acc, ref = _scaled_case()
    res = ref.verify(_gemm_out(acc, 1.0, 1.0))
    assert not res.passed and res.elem_fail > 0


@pytest.mark.parametrize("wrong", ["a_off_5pct", "b_for_both", "power_of_two"])
def test_a_wrong_scale_fails(wrong):
    sc, acc, ref = _scaled_case()
    sa, sb = {"a_off_5pct": (sc.a * 1.05, sc.b), "b_for_both": (sc.b, sc.b),
              "power_of_two": (2.0 ** np.ceil(np.log2(sc.a)), sc.b)}[wrong]
    assert (sa, sb) != (sc.a, sc.b)
    res = ref.verify(_gemm_out(acc, sa, sb))
    assert not res.passed and res.elem_fail > 0, wrong


def test_the_reference_of_the_dequantized_inputs_is_not_the_one_of_the_drawn_inputs():
    # the quantization error is not the GEMM's: checking against the FP32 inputs would charge it
    # to the kernel (the bound covers accumulation and output rounding only)
    a32, b32 = _draw((64, 256), seed=5), _draw((256, 64), seed=6)
    sc = fp8.scales_for(np, "tensor", a32, b32)
    qa, qb = fp8.quantize_host(a32, sc.a), fp8.quantize_host(b32, sc.b)
    out = _gemm_out((qa.astype(np.float64) @ qb.astype(np.float64)).astype(np.float32), sc.a, sc.b)
    model = check.error_model("fp8", "bfloat16")
    drawn = check.Reference.gemm(np, a32, b32, model, 3e-2, "bfloat16").verify(out)
    dequantized = check.Reference.gemm(np, fp8.dequantize(np, qa, sc.a), fp8.dequantize(np, qb, sc.b),
                                       model, 3e-2, "bfloat16").verify(out)
    assert dequantized.passed and dequantized.elem_max < drawn.elem_max


# -- the setting -------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode", fp8.MODES)
def test_every_mode_is_a_valid_setting(mode):
    assert V.problems(compose_cfg([f"measure.fp8_scaling={mode}"])) == []


def test_a_scaling_mode_with_exact_inputs_is_one_line_naming_both():
    assert V.problems(compose_cfg(["measure.distribution=exact", "measure.fp8_scaling=none"])) == []
    (p,) = V.problems(compose_cfg(["measure.distribution=exact", "measure.fp8_scaling=tensor"]))
    line = str(p)
    assert line.startswith("measure.fp8_scaling=tensor is invalid: must be none with measure.distribution=exact")
    assert "\n" not in line


def test_an_unknown_mode_is_refused():
    line = V.argv_problem(["measure.fp8_scaling=rowwise"])
    assert line and "fp8_scaling" in line and "tensor" in line and "\n" not in line


def test_the_mode_enters_the_key_of_fp8_points_only_and_only_away_from_none():
    base = ["variant=cublaslt", "precision=[bf16,fp8]", "sizes.square=[1024]", "sizes.shapes=[]"]
    default = {p.precision: p.key for p in expand(compose_cfg(base))}
    none = {p.precision: p.key for p in expand(compose_cfg(base + ["measure.fp8_scaling=none"]))}
    tensor = {p.precision: p.key for p in expand(compose_cfg(base + ["measure.fp8_scaling=tensor"]))}
    assert default == none  # keys from before the setting hold
    assert tensor["bf16"] == default["bf16"] and tensor["fp8"] != default["fp8"]


# -- skips -------------------------------------------------------------------------------------------------
def test_per_tensor_runs_on_hopper_and_on_ada_and_the_scaled_modes_on_hopper_only():
    # (tests/test_fp8_blocks.py has the reasons of the rowcol and block skips)
    for cc in (89, 90, 100):
        assert fp8.skip_reason("none", cc) is None and fp8.skip_reason("tensor", cc) is None
    assert fp8.skip_reason("rowcol", 90) is None and fp8.skip_reason("block", 90) is None
    assert fp8.skip_reason("rowcol", 89) and fp8.skip_reason("block", 100)
    with pytest.raises(ValueError):
        fp8.skip_reason("rowwise", 90)


def test_cutlass_variants_without_fp8_say_which_one_has_it():
    pts = expand(compose_cfg(["variant=cutlass_auto", "precision=fp8", "sizes.square=[1024]", "sizes.shapes=[]",
                              "measure.fp8_scaling=tensor"]))
    assert pts and all(p.skip_reason and fp8.CUTLASS_REASON in p.skip_reason for p in pts)
    bf16 = expand(compose_cfg(["variant=cutlass_auto", "precision=bf16", "sizes.square=[1024]", "sizes.shapes=[]"]))
    assert all(p.skip_reason is None for p in bf16)


def test_the_cutlass_catalog_refuses_fp8_off_layout_nt():
    from gemmlab.backends.cutlass.catalog import FP8_LAYOUT_REASON, Catalog, Unsupported
    from gemmlab.backends.cutlass.options import kernel_options

    (p,) = expand(compose_cfg(["variant=cutlass_fp8", "precision=fp8", "sizes.square=[1024]", "sizes.shapes=[]"]))
    assert p.layout == "nn"
    with pytest.raises(Unsupported, match="K-major"):
        Catalog(None, 90).kernels(p, kernel_options("cutlass_fp8", p.variant_cfg.cutlass))
    assert "layout nt" in FP8_LAYOUT_REASON


# -- rows ----------------------------------------------------------------------------------------------------
def test_rows_read_the_mode_from_extra_and_old_rows_as_none():
    assert rows.fp8_scaling({"precision": "fp8", "extra": ""}) == "none"
    assert rows.fp8_scaling({"precision": "fp8"}) == "none"
    assert rows.fp8_scaling({"extra": json.dumps({"algorithm": {}})}) == "none"
    assert rows.fp8_scaling({"extra": json.dumps({"fp8_scaling": {"mode": "tensor", "scale_a": 11.2}})}) == "tensor"
    assert rows.fp8_scaling({"extra": {"fp8_scaling": {"mode": "tensor"}}}) == "tensor"


def test_cublaslt_skips_an_e5m2_precision_saying_it_has_no_e5m2_x_e5m2_gemm():
    from gemmlab.backends.cublaslt import CublasLt

    (p,) = expand(compose_cfg(["variant=cublaslt", "precision=fp8", "sizes.square=[1024]", "sizes.shapes=[]"]))
    e5m2 = SimpleNamespace(**{**p.__dict__, "in_dtype": "float8_e5m2"})
    assert CublasLt(compose_cfg()).skip_reason(e5m2) == fp8.E5M2_REASON


def test_a_scaled_fp8_set_counts_its_dequantized_fp64_operands(tmp_path):
    """The free-memory check sizes a scaled fp8 input set with the FP64 copies the check keeps."""
    from conftest import compose_cfg

    from gemmlab.measure import footprint
    from gemmlab.points import expand

    def per_set(mode):
        cfg = compose_cfg(["variant=cublaslt", "precision=fp8", "sizes.square=[4096]", "sizes.shapes=[]",
                           f"measure.fp8_scaling={mode}"], tmp_path)
        (p,) = [q for q in expand(cfg)]
        return footprint.inputs_bytes(p, footprint.fp8_scaling(p, cfg.measure)), p

    plain, p = per_set("none")
    scaled, _ = per_set("tensor")
    elements = 2 * 4096 * 4096
    assert plain == p.bytes_min + 4 * elements  # unscaled: the FP32 exact values
    assert scaled - p.bytes_min == 8 * elements  # scaled: FP64, dequantized


def test_rotated_fp8_sets_exceed_the_l2_with_the_bytes_the_kernel_touches(tmp_path):
    """measure.cache=rotate cycles input sets whose operands together exceed twice the L2. An fp8
    set's references (FP32 or FP64, for the check) are never read by the kernel: counting them made
    fewer sets, whose operands could stay in the L2 between their calls."""
    from gemmlab.measure.gpu import MAX_ROTATE_SETS, GpuExecutor

    def n_sets(mode):
        cfg = compose_cfg(["variant=cublaslt", "precision=fp8", "sizes.square=[2048]", "sizes.shapes=[]",
                           "measure.cache=rotate", f"measure.fp8_scaling={mode}"], tmp_path)
        (p,) = expand(cfg)
        ex = GpuExecutor(cfg)
        ex.dev = {"l2_bytes": 60 * 2**20}
        return ex._n_sets(p), p

    (plain, p), (scaled, _) = n_sets("none"), n_sets("tensor")
    assert plain == scaled < MAX_ROTATE_SETS
    assert plain * p.bytes_min >= 2 * 60 * 2**20


def _deepseek_expert(name, tmp_path):
    """DeepSeek-V3's batched expert GEMM ``name`` at 64 tokens (256 experts), fp8 tensor-scaled, nt."""
    cfg = compose_cfg(["variant=cutlass_fp8", "precision=fp8", "sizes=llm", "sizes.model_names=[deepseek_v3]",
                       "sizes.tokens=[64]", "layouts=[nt]", "measure.fp8_scaling=tensor"], tmp_path)
    (p,) = [q for q in expand(cfg) if q.shape_name == f"deepseek_v3.{name}.t64"]
    return cfg, p


def test_making_an_fp8_set_is_counted_where_an_80_gb_card_ran_out_before(tmp_path):
    """h100-2026-12-07/session50b: cutlass_fp8 at expert_down (256 x 2 x 7168 x 2048) was let run on
    an H100 (75.2 GiB free) by an estimate of 39 GiB, and failed out of memory making its operands.
    The estimate now holds the FP32 draw (4 bytes an element) beside the set while it is made: 13
    bytes an element of A and B with the FP64 references. expert_gate_up, twice the weights, still
    does not fit the H100 and fits the H200's 135.4 GiB."""
    from gemmlab.measure import footprint

    gib = 2**30
    cfg, down = _deepseek_expert("expert_down", tmp_path)
    elements = down.batch * (down.m * down.k + down.k * down.n)
    need = footprint.point_bytes(down, cfg.measure)
    assert need >= 13 * elements
    assert footprint.fp8_scaling(down, cfg.measure) == "tensor"  # read from measure.fp8_scaling
    assert footprint.too_big(need, int(75.2 * gib), "device") is None
    _, up = _deepseek_expert("expert_gate_up", tmp_path)
    assert footprint.too_big(footprint.point_bytes(up, cfg.measure), int(75.2 * gib), "device")
    assert footprint.too_big(footprint.point_bytes(up, cfg.measure), int(135.4 * gib), "device") is None
    one = SimpleNamespace(batch=1, m=64, n=7168, k=2048, compute="fp8", layout="nt")
    assert footprint.making_bytes(one, "block") - footprint.making_bytes(one, "tensor") == 4 * 2048 * 7168  # scales
    assert footprint.making_bytes(one, "tensor") == 13 * (64 * 2048 + 2048 * 7168)
    assert footprint.making_bytes(one, "none") == 9 * (64 * 2048 + 2048 * 7168)  # FP32 references


def test_a_transposed_operand_is_counted_beside_its_draw_while_it_is_stored(tmp_path):
    """make_sets stores an operand the layout transposes as a copy of the FP32 draw: both are held
    at once. Without the check and the guards (whose FP64 copies are larger) that is the point's
    peak for a bf16 point whose B is the larger operand."""
    from gemmlab.measure import footprint

    def bf16(layout):
        cfg = compose_cfg(["variant=cublas", "precision=bf16", "sizes.square=[]", "sizes.shapes=[[16,8192,8192]]",
                           f"layouts=[{layout}]", "measure.check=false", "measure.guard_bytes=0"], tmp_path)
        (p,) = expand(cfg)
        return footprint.point_bytes(p, cfg.measure), p

    nn, p = bf16("nn")
    nt, _ = bf16("nt")
    e = 16 * 8192 + 8192 * 8192
    assert nn == footprint.making_bytes(p) == 6 * e  # the draw and the bf16 operands cast from it
    assert nt == 4 * e + 4 * 8192 * 8192  # the draw and B's stored copy


# -- the operands' exact values and their memory ------------------------------------------------
@pytest.mark.parametrize("dtype", [E4M3, "float8_e5m2"])
@pytest.mark.parametrize("out", [np.float32, np.float64])
def test_exact_values_decode_every_fp8_code_as_ml_dtypes_does(dtype, out):
    codes = np.arange(256, dtype=np.uint8)
    want = codes.view(getattr(ml_dtypes, dtype)).astype(np.float64)
    got = fp8.exact_values(np, codes, dtype, out)
    assert got.dtype == out
    np.testing.assert_array_equal(got.astype(np.float64), want)  # NaN codes stay NaN
    strided = np.random.default_rng(1).integers(0, 256, (48, 40), dtype=np.uint8).T  # a transposed view
    got = fp8.exact_values(np, strided, dtype, out)
    assert got.flags.c_contiguous and got.shape == (40, 48)
    np.testing.assert_array_equal(got, strided.view(getattr(ml_dtypes, dtype)).astype(out))


@pytest.mark.parametrize("mode", ["tensor", "rowcol", "block"])
def test_scaling_in_place_gives_dequantize_s_values(mode):
    a32, b32 = _draw((130, 260)), _draw((260, 200), seed=1)
    sc = fp8.scales_for(np, mode, a32, b32)
    qa, qb = (x.astype(ml_dtypes.float8_e4m3fn) for x in fp8.quantize_operands(np, sc, a32, b32))
    da, db = sc.dequantize(np, qa, qb)
    ea = fp8.exact_values(np, qa.view(np.uint8), E4M3)
    eb = fp8.exact_values(np, qb.view(np.uint8), E4M3)
    sc.scale_in_place(np, ea, eb)
    np.testing.assert_array_equal(ea, da)
    np.testing.assert_array_equal(eb, db)


@pytest.mark.parametrize("scale", [1.0, 3.7])
def test_the_fp8_range_is_x_over_the_scale_saturated_and_leaves_x_alone(scale):
    x = _draw((64, 64))
    x[0, 0], x[1, 1] = 1e9, -1e9  # past the range at either scale
    kept = x.copy()
    y = fp8.to_fp8_range(np, x, scale)
    want = np.clip((x / np.float32(scale)).astype(np.float32), -448.0, 448.0).astype(np.float32)
    assert y.dtype == np.float32 and y is not x
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(x, kept)
    assert fp8.amax_of(x) == float(np.abs(x).max())
