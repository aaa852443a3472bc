"""Stage 15 (wgmma_fp8_block) on a GPU (`pytest -m gpu`): FP8 e4m3 with DeepSeek-V3's block scales
(measure.fp8_scaling=block: A per 1 x 128, B per 128 x 128) against the FP64 product of the
dequantized inputs through the real runner, at every edge (partial tiles and scale blocks in M, N and
K, K of one block, more k-blocks than stages, M = 1, DeepSeek-V3 shapes), in the default
configuration and DeepGEMM's non-overlapped promotion, with 2-CTA clusters (CLUSTER_M 2) at the edges a
cluster adds, and with split-K (SPLIT_K 2-4, and the YAML's rule where it splits) at the edges a split adds,
every call's C the same; the same check failing the stage handed A's
scales one row off; and cuBLASLt's block-scaled kernel timed as the baseline where it runs.

The correctness runs use GEMMLAB_DEBUG=1 (a hung barrier traps with a printf instead of hanging the
GPU); a trap poisons the CUDA context, so run this file in a pytest process of its own, after
tests/test_hopper_fp8_block.py has passed on the CPU (session stage fp8_block does both).
"""
from __future__ import annotations

import json
import re

import pytest
from conftest import compose_cfg, run_points

pytestmark = pytest.mark.gpu

VARIANT = "wgmma_fp8_block"
SQUARE = [128, 1024, 4096]
SHAPES = [
    [8, 8, 16],  # far smaller than one tile; K = 16: one partial scale block
    [1, 2112, 7168],  # M = 1; DeepSeek-V3 attn_qkv_a: N = 2112, a last B scale block of 64 columns
    [130, 264, 1040],  # 2 rows / 8 columns past a tile, 9 k-blocks (more than the 6 stages), the last of 16
    [64, 7168, 2048],  # DeepSeek-V3 shared_down at 64 tokens: half a tile of M, 56 tiles of N
    [4096, 256, 7168],  # DeepSeek-V3 moe_router at 4096 tokens: two tile columns, 56 k-blocks
    [256, 24576, 1536],  # DeepSeek-V3 attn_q_b: one tile row pair, many columns
    [1000, 1000, 1000],  # K % 16 != 0: skipped (TMA row stride of the 1-byte operands)
    [4096, 1, 4096],  # N = 1: skipped (16-byte rows of the bf16 C)
]
DEBUG = f"+variant.{VARIANT}.cuda.defines.GEMMLAB_DEBUG=1"


def _run(tmp, square, shapes, extra=(), baseline="[]"):
    cfg = compose_cfg([f"variant=[{VARIANT}]", "precision=[fp8]", "layouts=[nt]", "measure=quick",
                       "measure.fp8_scaling=block", "run.progress=false", "run.fail_on_error=false",
                       f"measure.baseline={baseline}", *extra], tmp)
    cfg.sizes.square = square
    cfg.sizes.shapes = shapes
    _, out = run_points(cfg, tmp / "run")
    return out


def _shape(r):
    return int(r["m"]), int(r["n"]), int(r["k"])


def _failures(rows):
    return [(_shape(r), r["status"], r["rel_error"], r["reason"]) for r in rows if r["status"] not in ("ok", "skipped")]


# the defaults (SCALE_SMEM 2: the scales bulk-copied into the slots), the overlapped promotion, the
# consumers' own loads (the defaults before session15), the gathering warps, 6 stages without staging tiles,
# the cp.async copies (SCALE_SMEM 3); 2-CTA clusters with B multicast (CLUSTER_M 2; emulated on the CPU since
# session25) at the width the waves choose and at 64; 128 x 192 tiles across two of B's scale blocks (BN 192:
# N = 2112's last tile from a block boundary, 256's second 64 past one with no n-block after it) and 160 (its last 32
# columns of C stored from registers)
@pytest.mark.parametrize("defines", ["{PROMOTE_OVERLAP:0}", "{PROMOTE_OVERLAP:1}", "{SCALE_SMEM:0,STAGES:6,PROMOTE_OVERLAP:1}",
                                     "{SCALE_SMEM:0,EPI_TMA:0,STAGES:4}", "{SCALE_SMEM:1,SCALE_WARPS:3,PROMOTE_OVERLAP:1}",
                                     "{SCALE_SMEM:1,SCALE_WARPS:2}", "{STAGES:6,EPI_TMA:0}", "{SCALE_SMEM:3}",
                                     "{SCALE_SMEM:3,SCALE_WARPS:2,PROMOTE_OVERLAP:1}", "{CLUSTER_M:2}", "{CLUSTER_M:2,BN:64}",
                                     "{WG_ORDER:1}", "{WG_ORDER:1,PROMOTE_OVERLAP:1}", "{SCALE_READ:0}", "{SCALE_READ:2}", "{SCALE_B_TILE:1}",
                                     "{BN:192,STAGES:4}", "{BN:160}", "{SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0}", "{SCALE_READ:1}", "{DESC_STEP:0}", "{BN:256}",
                                     # C staged one box a round, a stage more (at the widths the waves choose; 256)
                                     "{EPI_BOXES:1,STAGES:6}", "{BN:256,EPI_BOXES:1}",
                                     # the tensor maps by value (__grid_constant__ parameters), by waves and at 256
                                     "{MAP_PARAMS:1}", "{BN:256,EPI_BOXES:1,MAP_PARAMS:1}"])
def test_block_scaled_stage_matches_the_dequantized_fp64_product(tmp_path, defines):
    rows = _run(tmp_path, SQUARE, SHAPES, [f"variant.{VARIANT}.cuda.defines={defines}", DEBUG])
    assert len(rows) == len(SQUARE) + len(SHAPES)
    assert not _failures(rows), _failures(rows)
    ran = [r for r in rows if r["status"] == "ok"]
    assert ran and all(("CLUSTER_M=2" in r["kernel_name"]) == ("CLUSTER_M:2" in defines) for r in ran), defines
    for r in rows:
        m, n, k = _shape(r)
        should_skip = k % 16 != 0 or n % 8 != 0
        assert (r["status"] == "skipped") == should_skip, ((m, n, k), r["reason"])
        if should_skip:
            assert "TMA" in r["reason"], r["reason"]
        else:
            scaling = json.loads(r["extra"])["fp8_scaling"]
            kb, nb = -(-k // 128), -(-n // 128)
            assert scaling["mode"] == "block" and scaling["scale_a_shape"] == [m, kb], scaling
            assert scaling["scale_b_shape"] == [kb, nb], scaling
            assert float(r["check_elem_max"]) <= 1.0, r


# The edges a 2-CTA cluster adds (stage 12's clustered test): the second CTA's tile wholly past M (M = 1, 128:
# one tile row) or partly (M = 129: one row of it), a second cluster row whose second CTA is past M (300),
# one tile column with about two cluster tiles per cluster (32768 x 128), one cluster row of many columns
# (256 x 8192), many tiles per cluster (4096); with each way the scales reach the consumers (the bulk copy
# that skips a CTA's A scales past M, the consumers' loads, the gathering warps, cp.async) and BM 64
CLUSTER_SHAPES = [[1, 8, 128], [129, 264, 1040], [300, 1032, 4096], [32768, 128, 256], [256, 8192, 256]]
CLUSTER_SQUARE = [128, 4096]


@pytest.mark.parametrize("defines", ["{CLUSTER_M:2}", "{CLUSTER_M:2,BM:64,CONSUMER_REGS:240}",
                                     "{CLUSTER_M:2,SCALE_SMEM:0,STAGES:6,PROMOTE_OVERLAP:1}",
                                     "{CLUSTER_M:2,SCALE_SMEM:1,SCALE_WARPS:3,PROMOTE_OVERLAP:1}",
                                     "{CLUSTER_M:2,SCALE_SMEM:3,PROMOTE_OVERLAP:1}", "{CLUSTER_M:2,BN:192,STAGES:4}",
                                     "{CLUSTER_M:2,BN:256}", "{BN:256,CLUSTER_M:2,EPI_BOXES:1}"])
def test_clusters_match_the_dequantized_fp64_product_at_the_edges_a_cluster_adds(tmp_path, defines):
    rows = _run(tmp_path, CLUSTER_SQUARE, CLUSTER_SHAPES, [f"variant.{VARIANT}.cuda.defines={defines}", DEBUG])
    assert len(rows) == len(CLUSTER_SQUARE) + len(CLUSTER_SHAPES)
    assert not _failures(rows), _failures(rows)
    assert all(r["status"] == "ok" and "CLUSTER_M=2" in r["kernel_name"] for r in rows), [
        (_shape(r), r["status"], r["reason"]) for r in rows]
    assert all(float(r["check_elem_max"]) <= 1.0 for r in rows), [(_shape(r), r["check_elem_max"]) for r in rows]


def test_the_check_fails_the_stage_handed_scales_one_row_off(tmp_path, monkeypatch):
    """Negative control on the GPU: the launcher hands the kernel A's grid rolled by one row (each
    row scaled by its neighbour's k-block scales; the grid is k-block-major, rows along axis 1); every
    such point must fail element-wise."""
    from gemmlab.backends import cuda_kernels

    real = cuda_kernels._block_grids

    def rolled(point, sc):
        ga, gb = real(point, sc)
        import cupy

        return cupy.ascontiguousarray(cupy.roll(ga, 1, axis=1)), gb

    monkeypatch.setattr(cuda_kernels, "_block_grids", rolled)
    # in the runner's process: a worker would not see the patch (the H200 run at cf73b9b, in a
    # worker, measured both points ok: the kernel got the right grids)
    rows = _run(tmp_path, [256], [[130, 264, 1040]], extra=["run.isolate=none"])
    assert len(rows) == 2 and all(r["status"] == "failed" for r in rows), [(r["status"], r["reason"]) for r in rows]
    assert all("exceed their error bound" in r["reason"] for r in rows), [r["reason"] for r in rows]


def test_cublaslt_block_scaled_is_timed_as_the_baseline_on_the_stage_inputs(tmp_path):
    """pct_of_baseline at 4096 (no debug build), against cuBLASLt's VEC128_32F / BLK128x128_32F
    kernel reading the stage's own FP8 set and grids, where gemmlab's cuBLASLt path runs block."""
    from gemmlab.backends.base import backend_class
    from gemmlab.points import expand

    cfg = compose_cfg(["variant=cublaslt", "precision=fp8", "layouts=[nt]", "measure.fp8_scaling=block",
                       "sizes.square=[4096]", "sizes.shapes=[]"], tmp_path)
    (lt_point,) = expand(cfg)
    why = lt_point.skip_reason or backend_class("cublaslt")(cfg).skip_reason(lt_point)
    if why:
        pytest.skip(f"no cuBLASLt block-scaled baseline here: {why}")
    (r,) = _run(tmp_path, [4096], [], baseline="[cublaslt]")
    assert r["status"] == "ok", r["reason"]
    assert r.get("pct_of_baseline") not in (None, ""), r
    print(f"{VARIANT} at 4096: {float(r['tflops']):.0f} TFLOP/s, {float(r['pct_of_baseline']):.1f}% of "
          "cuBLASLt block-scaled fp8")


# Split-K (SPLIT_K; on the CPU the emulation runs the blocks one after another, here a tile's splits race for
# its counter on different SMs): the emulated edges (9 k-blocks with the partial last one in the last split,
# M tails with a slice wholly past M, N's last 8 columns, fewer k-blocks than splits, one k-block), M = 1 with
# 17 tiles of 128, 300 x 1032 x 4096, moe_router at 1024 and 4096 tokens (where the YAML's rule
# splits: the defaults' entry, {}, takes its split) and shared_down at 64 (split by the first rule, 8 k-blocks
# a split, not by the measured one), and 2 squares; each point's checked call made
# 3 times on freshly poisoned C (measure.check_repeats: the second call finds the counters the first left,
# which must be zero again) with the same error each time (the same bits whichever split arrives last)
SPLIT_SHAPES = [[8, 8, 16], [1, 2112, 7168], [64, 136, 256], [130, 264, 1040], [200, 264, 1040], [300, 1032, 4096],
                [1024, 256, 7168], [4096, 256, 7168], [64, 7168, 2048]]
SPLIT_SQUARE = [128, 1024]


@pytest.mark.parametrize("defines", ["{SPLIT_K:2}", "{SPLIT_K:4}", "{SPLIT_K:2,BN:64}", "{SPLIT_K:4,PROMOTE_OVERLAP:1}",
                                     "{SPLIT_K:3,SCALE_SMEM:3}", "{SPLIT_K:2,SCALE_SMEM:0,STAGES:6,PROMOTE_OVERLAP:1}", "{SPLIT_K:2,WG_ORDER:1}", "{SPLIT_K:3,SCALE_B_TILE:1}",
                                     "{SPLIT_K:2,BN:192,STAGES:4}", "{SPLIT_K:2,BN:160}", "{}",
                                     # 128 x 256 tiles split; the summing split keeping its own partial (SPLIT_KEEP: by
                                     # rule where split in 2 since session27, so {SPLIT_K:2} keeps and 0 reads both)
                                     "{SPLIT_K:4,BN:256}", "{SPLIT_K:2,SPLIT_KEEP:0}", "{SPLIT_K:4,SPLIT_KEEP:1}",
                                     "{SPLIT_K:4,BN:256,SPLIT_KEEP:1}",
                                     # 2-CTA clusters split (a cluster's CTAs walk the same units, B multicast):
                                     # cuBLASLt's configuration at moe_router, at 64 wide, at 256
                                     "{CLUSTER_M:2,SPLIT_K:2}", "{CLUSTER_M:2,SPLIT_K:3,BN:64}",
                                     "{CLUSTER_M:2,SPLIT_K:4,BN:256,SPLIT_KEEP:1}",
                                     "{SPLIT_K:2,MAP_PARAMS:1}"])
def test_split_k_matches_the_dequantized_fp64_product_with_the_same_bits_every_call(tmp_path, defines):
    import re

    from test_hopper_fp8_block import H200_SMS, split_k

    rows = _run(tmp_path, SPLIT_SQUARE, SPLIT_SHAPES,
                [f"variant.{VARIANT}.cuda.defines={defines}", DEBUG, "measure.check_repeats=3"])
    assert len(rows) == len(SPLIT_SQUARE) + len(SPLIT_SHAPES)
    assert not _failures(rows), _failures(rows)
    assert all(r["status"] == "ok" for r in rows), [(_shape(r), r["status"], r["reason"]) for r in rows]
    given = re.search(r"SPLIT_K:(\d+)", defines)
    split_seen = False
    for r in rows:
        m, n, k = _shape(r)
        extra = json.loads(r["extra"])
        built = int(re.search(r"SPLIT_K=(\d+)", r["kernel_name"]).group(1))
        bn = int(re.search(r"BN=(\d+)", r["kernel_name"]).group(1))
        bn_given = re.search(r"BN:(\d+)", defines)
        # the defines' split, or the YAML's rule on the device config's SMs (conf/device/h200.yaml)
        want = int(given.group(1)) if given else split_k(m, n, k, H200_SMS, bn=int(bn_given.group(1)) if bn_given else 0)
        assert built == want, ((m, n, k), r["kernel_name"])
        taken = min(built, -(-k // 128))
        split_seen |= taken > 1
        # the units, tiles x the splits taken (at most the k-blocks), on the H200's SMs (clusters: their CTAs' tiles,
        # cdiv(m, 256) x 2 rows of them)
        rows = -(-m // 256) * 2 if "CLUSTER_M:2" in defines else -(-m // 128)
        assert extra["grid"][0] == min(H200_SMS, rows * -(-n // bn) * taken), ((m, n, k), extra["grid"])
        assert extra["check_repeats"] == 3 and extra["rel_error_distinct"] == 1, ((m, n, k), extra)
        assert float(r["check_elem_max"]) <= 1.0, ((m, n, k), r["check_elem_max"])
    assert split_seen, defines  # the defaults split where the rule says (moe_router)


# SPLIT_TAIL (only the last, partial wave's tiles split; CPU: tests/test_hopper_fp8_block.py's emulation on a few
# SMs): on the H200's 132, tails of 2, 3 and 4 runs a tile: 1024 x 7168 x 2048 (BN 128: 448 tiles, a tail of 52
# in 2 runs of 8 k-blocks), 1024 x 7168 x 4096 (BN 192: 304 tiles, 40 in 3), 300 x 1032 x 4096 (27 tiles of 128,
# fewer than the grid: all of them in 4), 4096 x 7168 x 2048 (BN 192: 1216 tiles, 28 in 2); each checked call made
# 3 times on freshly poisoned C with the same error each time (the tail's counters back at zero, its sum in run
# order whichever run arrives last)
TAIL_SHAPES = [[1024, 7168, 2048], [1024, 7168, 4096], [300, 1032, 4096], [4096, 7168, 2048]]
# where the YAML's rule takes the tail split itself (the defaults, {}): 1024 x 7168 x 8192 (304 tiles of 128 x 192,
# 40 in 3 runs), 64 x 7168 x 8192 (38 tiles, all in 3 runs)
TAIL_RULE_SHAPES = [[1024, 7168, 8192], [64, 7168, 8192]]


@pytest.mark.parametrize("defines", ["{SPLIT_K:4,SPLIT_TAIL:1,BN:128}", "{SPLIT_K:4,SPLIT_TAIL:1,BN:192,STAGES:4}",
                                     "{SPLIT_K:4,SPLIT_TAIL:1,BN:160}", "{}"])
def test_split_tail_matches_the_dequantized_fp64_product_with_the_same_bits_every_call(tmp_path, defines):
    from test_hopper_fp8_block import H200_SMS

    shapes = TAIL_RULE_SHAPES if defines == "{}" else TAIL_SHAPES
    rows = _run(tmp_path, [], shapes, [f"variant.{VARIANT}.cuda.defines={defines}", DEBUG, "measure.check_repeats=3"])
    assert len(rows) == len(shapes)
    assert not _failures(rows), _failures(rows)
    assert all(r["status"] == "ok" for r in rows), [(_shape(r), r["status"], r["reason"]) for r in rows]
    for r in rows:
        m, n, k = _shape(r)
        extra = json.loads(r["extra"])
        assert "SPLIT_TAIL=1" in r["kernel_name"], r["kernel_name"]
        bn = int(re.search(r"BN=(\d+)", r["kernel_name"]).group(1))
        assert extra["grid"][0] == min(H200_SMS, -(-m // 128) * -(-n // bn) * min(4, -(-k // 128))), ((m, n, k), extra["grid"])
        assert extra["check_repeats"] == 3 and extra["rel_error_distinct"] == 1, ((m, n, k), extra)
        assert float(r["check_elem_max"]) <= 1.0, ((m, n, k), r["check_elem_max"])
