"""Stage 15 (wgmma_fp8_block) without a GPU: its rules (block scaling only, layout nt, TMA strides),
its tile width by waves (the YAML's BN 0: 64 where 128-wide tiles fill the persistent grid's waves poorly,
an override's width kept), every sweep configuration built for sm_90a without spills and with the SASS it
claims at the widths the tune shapes choose, and its own
code through the host emulation (TMA, mbarriers, deferred wgmma, stmatrix: hopper_emu.h) on
block-scaled inputs whose scales differ from block to block, checked element-wise against the FP64
product of the dequantized inputs; a kernel that scales per tile instead of per k-block fails there.
On a GPU: tests/test_gpu_hopper_fp8_block.py.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import ROOT, compose_cfg, configs, past_the_first, session_folder
from test_hopper_kernels import SMEM_PER_BLOCK_MAX, build, opcodes, ptxas_numbers, remote_arrives_fenced, sass

VARIANT = "wgmma_fp8_block"
BASE = [f"variant={VARIANT}", "precision=fp8", "layouts=[nt]", "measure.fp8_scaling=block"]
SCALE_BLOCK = 128  # DeepSeek-V3's (gemmlab.fp8.BLOCK): A per 1 x 128 along K, B per 128 x 128

# The configurations one H200 tuning run compares (deltas from the YAML's defines; the first is the
# default); tune_fp8_block in .ci/h200-session.sh runs the same list. Defines measured and not taken stay
# in the kernel, documented in its header with their numbers, and emulated below (EMULATED_CONFIGS), but
# leave this list: SCALE_AHEAD 2 (session14d), SCALE_COPY_FIRST 1 (session15c), SCALE_SMEM 3 with the
# non-overlapped promotion and SCALE_SMEM 1 with 2 warps (session15d, session15), WG_ORDER 1, SCALE_READ 2 and
# SCALE_B_TILE 1 (session20, 20b, 20c).
FP8_BLOCK_SWEEP = [
    "{PROMOTE_OVERLAP:0}",  # the defaults (SCALE_SMEM 2, 5 stages, since session15; SCALE_READ 1 since session20b)
    "{PROMOTE_OVERLAP:1}",
    "{STAGES:4}",
    "{STAGES:6,EPI_TMA:0}",  # 6 stages with the scales fit without the TMA-store epilogue's staging tiles
    "{BM:64,CONSUMER_REGS:240}",  # one consumer: 232 spill 32 bytes, 240 none
    "{GROUP_M:16}",
    "{BN:64}",  # twice the tiles at every point (the defaults take 64 by waves where 128's waves are poorly
                # filled: of the tune shapes, attn_qkv_a at 1024 tokens alone)
    # the consumers' own scale loads from global memory (the defaults before session15)
    "{SCALE_SMEM:0,STAGES:6,PROMOTE_OVERLAP:1}",
    # the scales gathered into the slots by 3 of the producer's warps, two loads of a lane in flight at a
    # time (session14e's runs with PRODUCER_REGS 48 hung in setmaxnreg: see
    # test_register_counts_past_the_launch_do_not_build)
    "{SCALE_SMEM:1,SCALE_WARPS:3,PROMOTE_OVERLAP:1}",
    # the scales copied by a producer warp's cp.async (16 bytes a lane), off the TMA engine's queue: on
    # par with the defaults when the promotion overlaps (session15d)
    "{SCALE_SMEM:3,PROMOTE_OVERLAP:1}",
    # 2-CTA clusters along M, B multicast to both (stage 12's CLUSTER_M): 3-30 points under the defaults
    # (session16b), kept in the sweep for the SASS checks below ({CLUSTER_M:2,BN:64}, 49-61%, left it)
    "{CLUSTER_M:2}",
    # split-K (measured where the rule splits, session17; these entries not yet run): at the tune shapes, where
    # the YAML's rule does not split (their tiles fill
    # the waves), the entries show what the split's fixup costs a full grid (the workspace: up to 2.4 GB at
    # 4096 x 36864 x 7168 with 4 splits); where it does split (moe_router) ds3_fp8_block measures the defaults.
    # Width by the waves of the units (tiles x S): 128 at every tune shape; {SPLIT_K:2,BN:64} the other width
    "{SPLIT_K:2}",
    "{SPLIT_K:4}",
    "{SPLIT_K:2,BN:64}",
    # the scales read from the slot after issuing the k-block's wgmmas: the defaults up to session20b (the
    # defaults since read them before, SCALE_READ 1); its SASS is still the code session16 measured
    "{SCALE_READ:0}",
    # the defaults' width at the three large tune shapes up to session21 (the waves take 192 there since: 128 x 192
    # tiles across two of B's 128-column scale blocks, measured as {BN:192,STAGES:4} in session21)
    "{BN:128}",
    # 128 x 160 tiles (across two of B's scale blocks, split at 32, 64, 96 or 128 columns): fuller waves than 192
    # where N = 7168 (45 tile columns against 38 and 56); two 64-column boxes of C by TMA store, the last 32
    # columns from registers (session21d measured {BN:160,EPI_TMA:0}, all of C from registers: 75.6-81.6% of
    # cuBLASLt at the three large tune shapes, as {BN:128,EPI_TMA:0} beside it)
    "{BN:160}",
    # the defaults without the tail split (the defaults up to session22: at 4096 x 7168 x 16384 the last of 10 waves
    # of 192-wide tiles a fifth full; session22f / 22g measured the pair on DeepSeek-V3's projections)
    "{SPLIT_TAIL:0}",
    # the defaults up to session23 (SCALE_READ 1, A's descriptors from per-thread registers: 149 instructions a
    # k-block of 128 x 128, 8 R2UR, against the defaults' 143 and none), and each of the two changes alone
    "{SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0}",
    "{UNIFORM_A:0,DESC_STEP:0}",
    "{SCALE_READ:1,DESC_STEP:0}",
    # each k32 step's descriptors the k-block's first + 2 (DESC_STEP 1), and the next k-block's built under this
    # one's wgmmas (2, the default since session23e): the issue no longer behind the descriptor arithmetic
    "{DESC_STEP:0}",
    "{DESC_STEP:1}",
    # 128 x 256 tiles, each k-block in two 128-column halves through one 64-register partial (3 stages with the
    # TMA-store epilogue): a quarter fewer operand bytes per FLOP than 128 x 128 (session24: ahead of 128 x 192 at
    # shared_gate_up and shared_down; taken by waves since); its loop with the next k-block's wait and scale reads
    # under the second half's wgmmas (SCALE_READ 3, the default) and at the k-block's top (1: session24's build)
    "{BN:256}",
    "{BN:256,SCALE_READ:1}",
    # 128 x 256 in 2-CTA clusters, each multicasting a 128-row half of B's tile: a third fewer operand bytes a FLOP
    # than 128 x 256 alone, where shared_gate_up at 1024 tokens moves ~7 TB/s from L2 (cuBLASLt as much); lost
    # (session24c: 93.9 / 99.3% of cuBLASLt at shared_gate_up's 1024 / 4096 tokens against 97.6 / 103.4)
    "{BN:256,CLUSTER_M:2}",
]
# The entries built at both widths (BUILD_SHAPES[1], where the waves choose 64, too): the defaults (their
# measured SASS at each width) and the clusters (other code at each width); the others at the first shape only
# (192 there by waves where the build takes it, else 128)
WIDTHS_BUILT = ("{PROMOTE_OVERLAP:0}", "{CLUSTER_M:2}", "{SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0}", "{DESC_STEP:0}")


# The tune's shapes (tune_fp8_block): by waves the defaults take 192 at the first (the tail split at the second,
# 256 at the third since session24), 1024 x 2112 x 7168 (136 tiles of 128 x 128 on 132 SMs: a second wave of 4)
# BN 64; the sweep is built at a shape where the waves choose 192 (where an entry's build has it; 4096 x 7168 x
# 7168 until session24, where they choose 256 now) and at 1024 x 2112 x 7168
TUNE_SHAPES = [(4096, 36864, 7168), (4096, 7168, 16384), (4096, 7168, 2048), (1024, 2112, 7168)]
BUILD_SHAPES = [(4096, 36864, 7168), (1024, 2112, 7168)]
H200_SMS = 132  # conf/device/h200.yaml's device.sm_count (the default device)
EMU_SMS = 2  # the emulated device: its grid and its choice of BN


def _overrides(defines, shape=BUILD_SHAPES[0]):
    return [*BASE[2:], "sizes.square=[]", f"sizes.shapes=[[{shape[0]},{shape[1]},{shape[2]}]]",
            f"variant.{VARIANT}.cuda.defines={defines}"]


def _point(m, n, k, defines="{}", extra=()):
    from gemmlab.points import expand

    (p,) = expand(compose_cfg([*BASE, "sizes.square=[]", f"sizes.shapes=[[{m},{n},{k}]]",
                               f"variant.{VARIANT}.cuda.defines={defines}", *extra]))
    return p


def _emu_point(m, n, k, defines="{}"):
    """The point as the emulation runs it: on EMU_SMS SMs, for its grid and for its tile width by waves."""
    return _point(m, n, k, defines, extra=(f"device.sm_count={EMU_SMS}",))


def _bn(p):
    return p.expr_env()["BN"]


def _split(p):
    return p.expr_env()["SPLIT_K"]


def _wide(p):
    """Whether the point's build may take BN 192 by waves (the kernel writes it for the bulk-copied scales and
    the non-overlapped promotion, without SCALE_B_TILE)."""
    d = p.variant_cfg.cuda.defines
    return d.PROMOTE_OVERLAP == 0 and d.SCALE_SMEM == 2 and d.SCALE_B_TILE == 0


def _wide256(p):
    """Whether the point's build may take BN 256 by waves: as 192, and the plain persistent loop BN 256 is written
    for (one CTA a cluster, no ordered turns, no diagnostics) with two consumer warpgroups (BM 128)."""
    d = p.variant_cfg.cuda.defines
    return _wide(p) and d.CLUSTER_M == 1 and d.WG_ORDER == 0 and d.DIAG == 0 and d.BM == 128


def waves_bn(m, n, sms, bm=128, split=1, wide=True, wide256=None):
    """The rule in words: a persistent grid takes ceil(units / SMs) waves (units: tiles x the split), a
    64-wide tile ~0.8 of a 128-wide one's time, a 192-wide one ~4/3 (session21: 1.31-1.37 where the waves
    of both were full); the width whose waves cost least (ties: 128), 192 only unsplit from one full row of
    tiles on and where its tiles take more than one wave (88 of them on 132 SMs lost to 264 of 64: session21),
    and only where the kernel builds it (``wide``: the bulk-copied scales, the non-overlapped promotion).
    A 256-wide tile ~37/20 of a 128-wide one's time (session24: {BN:256} won where its waves cost less by that
    and lost where they did not), taken unsplit from one full row of tiles on where it costs less than every
    other width and the kernel builds it (``wide256``, by default ``wide`` at BM 128).
    Below one row of tiles (m < bm) unsplit, where B's stream sets the time, BN 64 iff the 128-wide tiles
    busy at most a quarter of the SMs."""
    if m < bm and split == 1:
        return 64 if 4 * math.ceil(n / 128) <= sms else 128
    tiles = {bn: math.ceil(m / bm) * math.ceil(n / bn) for bn in (64, 128, 192, 256)}
    waves = {bn: math.ceil(t * split / sms) for bn, t in tiles.items()}
    cost = {64: Fraction(4, 5) * waves[64], 128: waves[128], 192: Fraction(4, 3) * waves[192],
            256: Fraction(37, 20) * waves[256]}
    if wide256 is None:
        wide256 = wide and bm == 128
    if wide256 and split == 1 and m >= bm and cost[256] < min(cost[64], cost[128], cost[192]):
        return 256
    if wide and split == 1 and tiles[192] > sms and cost[192] < min(cost[64], cost[128]):
        return 192
    return 64 if cost[64] < cost[128] else 128


def split_k(m, n, k, sms, bm=128, bn=0, cluster_m=1):
    """The split rule in words: split a tile's k-blocks only where its tiles (BM x 128, or the override's
    width) leave SMs idle in one wave, into the most of 4, 3, 2 runs that keep every unit in that one wave
    with 12 k-blocks a run at least (session17: 8 a run lost at shared_down, 14 and more won or tied);
    never with clusters."""
    tiles = math.ceil(m / bm) * math.ceil(n / (bn or 128))
    fits = [s for s in (2, 3, 4) if tiles * s <= sms and math.ceil(k / 128) >= 12 * s]
    return max(fits) if fits and cluster_m == 1 else 1


def tail_split(m, n, k, sms, bm=128, wide=True, wide256=None):
    """The SPLIT_TAIL rule in words: 128 x 192 tiles with their last, partial wave split (r = T192 % SMs tiles,
    each into A = min(4, SMs // r) >= 2 runs of 16 k-blocks at least) where that costs less than the better
    unsplit width: a 192-wide tile 4/3 of a 128-wide one's time, a run 1/A of it, 0.45 of a 128-wide tile
    for the runs' sum and the split build (fitted to session22e's four long-K wins), and than 256-wide tiles where
    those are built (``wide256``: 37/20 of a 128-wide tile); only where the kernel builds 192 (``wide``)."""
    t192 = math.ceil(m / bm) * math.ceil(n / 192)
    r = t192 % sms
    if not wide or r == 0:
        return False
    a = min(4, sms // r)
    if a < 2 or math.ceil(k / 128) // 16 < a:
        return False
    w128, w192 = math.ceil(math.ceil(m / bm) * math.ceil(n / 128) / sms), math.ceil(t192 / sms)
    if wide256 is None:
        wide256 = bm == 128
    w256 = math.ceil(math.ceil(m / bm) * math.ceil(n / 256) / sms)
    unsplit = min(w128, Fraction(4, 3) * w192, Fraction(37, 20) * w256 if wide256 and m >= bm else w128)
    return Fraction(4, 3) * (t192 // sms + Fraction(1, a)) + Fraction(9, 20) < unsplit


def rules(m, n, k, sms=None, bm=128, wide=True):
    """The point defines the YAML's rules give an entry that sets none of them: the tail split first (then
    SPLIT_K 4 and BN 192), else the split (and whether its summing split keeps its own partial), then the width by
    waves (and how many boxes of C a round), then the stages; the scales' read position as given (3 without WG_ORDER)."""
    sms = sms or H200_SMS
    if tail_split(m, n, k, sms, bm, wide):
        return {"SPLIT_TAIL": 1, "SPLIT_K": 4, "SPLIT_KEEP": 0, "BN": 192, "EPI_BOXES": 0, "STAGES": 4, "SCALE_READ": 3}
    s = split_k(m, n, k, sms, bm)
    bn = waves_bn(m, n, sms, bm, s, wide)
    # the summing split keeps its own partial where a tile is split in 2; at 128 x 256 C staged a box a round, which
    # makes room for a fourth stage (session27)
    return {"SPLIT_TAIL": 0, "SPLIT_K": s, "SPLIT_KEEP": int(s == 2), "BN": bn, "EPI_BOXES": int(bn == 256),
            "STAGES": {192: 4, 256: 4}.get(bn, 5), "SCALE_READ": 3}


# ---- rules -------------------------------------------------------------------------------------------
def test_runs_only_under_block_scaling_at_layout_nt_and_tma_strides():
    from gemmlab.backends.base import backend_class
    from gemmlab.points import expand

    cuda = backend_class("cuda")
    for mode in ("none", "tensor", "block"):
        cfg = compose_cfg([*BASE[:3], "layouts=[nn,nt]", f"measure.fp8_scaling={mode}", "sizes.square=[]"])
        cfg.sizes.shapes = [[4096, 7168, 2048], [64, 2112, 7168], [1000, 1000, 1000], [4096, 1, 4096]]
        for p in expand(cfg):
            if mode != "block":
                assert p.skip_reason and "fp8_scaling=block" in p.skip_reason, (mode, p.skip_reason)
                continue
            if p.layout != "nt":
                assert "declares layouts nt" in (cuda.workload_reason(p) or ""), p.layout
            ok = p.k % 16 == 0 and p.n % 8 == 0
            assert (p.skip_reason is None) == ok, (p.m, p.n, p.k, p.skip_reason)
            if not ok:
                assert "TMA" in p.skip_reason


def test_deepseek_v3_projections_run_at_the_token_counts_of_the_session():
    """The fp8_block stage's sweep: every unbatched DeepSeek-V3 projection is a point the stage takes;
    the routed experts (a strided batch) are the hand-written stages' batch skip."""
    from gemmlab.backends.base import backend_class
    from gemmlab.points import expand

    cuda = backend_class("cuda")
    pts = expand(compose_cfg([*BASE, "sizes=llm", "sizes.model_names=[deepseek_v3]", "sizes.tokens=[64,1024,4096]"]))
    ran = [p for p in pts if p.skip_reason is None and cuda.workload_reason(p) is None]
    assert {p.m for p in ran} == {64, 1024, 4096}
    assert len(ran) == 3 * 9, sorted({p.shape_name for p in ran})
    assert all(p.k % SCALE_BLOCK == 0 for p in ran)  # DeepSeek-V3's K are whole scale blocks
    assert all(p.batch > 1 for p in pts if p not in ran)


def test_the_session_tunes_the_sweep_this_file_builds():
    """.ci/h200-session.sh's tune_fp8_block runs FP8_BLOCK_SWEEP, and its fp8_block stage runs the GPU
    tests and the DeepSeek-V3 sweep beside cuBLASLt under block scaling."""
    text = (ROOT / ".ci" / "h200-session.sh").read_text()
    tune = re.search(r"\nFP8_BLOCK_SWEEP='([^']*)'", text)
    assert tune and tune.group(1).split("},") == ",".join(FP8_BLOCK_SWEEP).split("},"), tune and tune.group(1)
    stage = re.search(r"\n  fp8_block\)(.*?);;", text, re.S).group(1)
    for name in re.findall(r"[a-z0-9_]+", stage):  # the shell functions it calls (its tests, its sweep)
        body = re.search(rf"\n{name}\(\) \{{(.*?)\n?\}}\n", text, re.S)
        stage += body.group(1) if body else ""
    for words in ("tests/test_gpu_hopper_fp8_block.py", "measure.fp8_scaling=block", "sizes.model_names=[deepseek_v3]",
                  "sizes.tokens=[64,1024,4096]", "measure.baseline=[cublaslt]", '"layouts=[nt]"'):
        assert words in stage, words
    # the shapes it tunes at (unless FP8_BLOCK_SHAPES says others) are the ones this file reads the widths at (TUNE_SHAPES)
    shapes = ",".join(f"[{m},{n},{k}]" for m, n, k in TUNE_SHAPES)
    tune_stage = re.search(r"\n  tune_fp8_block\)(.*?);;", text, re.S).group(1)
    assert f'"${{FP8_BLOCK_SHAPES:-[{shapes}]}}"' in tune_stage, shapes
    assert '"${FP8_BLOCK_TUNE:-$FP8_BLOCK_SWEEP}"' in tune_stage and tune_stage.split()[0] == "fp8_block_tune"
    helper = re.search(r"\nfp8_block_tune\(\) \{(.*?)\n\}\n", text, re.S).group(1)
    for words in ('"sizes.shapes=$3"', "measure.fp8_scaling=block", "measure.baseline=[cublaslt]",
                  '"variant.wgmma_fp8_block.cuda.defines=$2"'):
        assert words in helper, words


def test_the_session_measures_the_moe_router_candidates_beside_the_defaults():
    """.ci/h200-session.sh's fp8_block_split runs the defaults and MOE_ROUTER_CANDIDATES (the same list) at moe_router's
    4096 and 1024 tokens with cuBLASLt interleaved, then the DeepSeek-V3 projections with the defaults and with
    the previous defaults between two runs of the defaults."""
    text = (ROOT / ".ci" / "h200-session.sh").read_text()
    listed = re.search(r"\nFP8_BLOCK_SPLIT_DEFAULT='([^']*)'", text).group(1)
    assert listed.split("},") == ",".join([FP8_BLOCK_SWEEP[0], *MOE_ROUTER_CANDIDATES]).split("},"), listed
    stage = re.search(r"\n  fp8_block_split\)(.*?);;", text, re.S).group(1)
    m, n, k = MOE_ROUTER_T4096
    for words in (f"[[{m},{n},{k}],[1024,{n},{k}]]", "measure.baseline=[cublaslt]", "measure.fp8_scaling=block"):
        assert words in stage, words
    # and at shared_gate_up's 1024 tokens: the defaults and SHARED_GATE_UP_CANDIDATES
    m, n, k = SHARED_GATE_UP_T1024
    wide = ",".join([FP8_BLOCK_SWEEP[0], *SHARED_GATE_UP_CANDIDATES])
    assert f'"sizes.shapes=[[{m},{n},{k}]]"' in stage and f"'variant.wgmma_fp8_block.cuda.defines={wide}'" in stage
    # the DeepSeek-V3 projections with the defaults, the previous defaults (both rules off) and the defaults again, one
    # run after the other
    stage = re.search(r"\n  fp8_block_ds3_candidates\)(.*?);;", text, re.S).group(1)
    v = "variant.wgmma_fp8_block.cuda.defines"
    for words in ("DS3_NAME=ds3_default FP8_BLOCK_OVERRIDES= ds3_fp8_block",
                  f'DS3_NAME=ds3_previous FP8_BLOCK_OVERRIDES="{v}.SPLIT_KEEP=0 {v}.EPI_BOXES=0" ds3_fp8_block',
                  "DS3_NAME=ds3_default_again FP8_BLOCK_OVERRIDES= ds3_fp8_block"):
        assert words in stage, words
    head = text.split("\n\n")[0].replace("\n# ", " ")
    assert " fp8_block_split " in head and " fp8_block_ds3_candidates " in head  # listed among the stages


def test_the_launcher_passes_the_recorded_grids_and_refuses_others(monkeypatch):
    """CudaKernels._fp8_args under block: the grids gemmlab.fp8 recorded for the set's addresses, in the
    layouts cuBLASLt reads (float32 C-contiguous: A (kb, roundup(m, 4)) k-block-major, B (nb, roundup(kb, 4))),
    after the tensor maps; a grid of another shape or another block is an error, never a launch; the
    kernel declares two float pointers there."""
    import sys
    import types

    import numpy as np

    from gemmlab import fp8
    from gemmlab.backends.cuda_kernels import CudaKernels
    from test_hopper_kernels import _FakeArray

    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))  # imported, not used, for CuPy sets
    m, n, k = 200, 264, 1040
    p = _point(m, n, k)
    a, b = _FakeArray(m, k, "uint8", ptr=1 << 21), _FakeArray(n, k, "uint8", ptr=1 << 22)
    rng = np.random.default_rng(0)
    sc = fp8.scales_for(np, "block", rng.standard_normal((m, k), dtype=np.float32),
                        rng.standard_normal((k, n), dtype=np.float32))
    backend = CudaKernels(compose_cfg([*BASE, "sizes.square=[256]", "sizes.shapes=[]"]))
    fp8.forget_recorded()
    with pytest.raises(RuntimeError, match="no fp8 scales"):
        backend._fp8_args(p, a, b)
    fp8.record(a.data.ptr, b.data.ptr, sc)
    _, _, (ga, gb), extra = backend._fp8_args(p, a, b)
    assert ga.shape == (9, 200) and gb.shape == (3, 12) and extra["mode"] == "block"
    assert ga.dtype == gb.dtype == np.float32 and ga.flags.c_contiguous and gb.flags.c_contiguous
    assert np.array_equal(ga, sc.a.T) and np.array_equal(gb[:, :9], sc.b.T) and not gb[:, 9:].any()
    fp8.record(a.data.ptr, b.data.ptr, dataclasses.replace(sc, b=np.ascontiguousarray(sc.b.T)))
    with pytest.raises(ValueError, match="scale_b grid"):
        backend._fp8_args(p, a, b)
    fp8.record(a.data.ptr, b.data.ptr, dataclasses.replace(sc, block_a=(1, 64)))
    with pytest.raises(ValueError, match="block scales of 1 x 128"):
        backend._fp8_args(p, a, b)
    backend.release()
    # ... and the launcher's workspace last (cuda.workspace_bytes: read by split-K only)
    # (the tensor maps however MAP_PARAMS passes them: a buffer's address, or each by value: hopper/ptx.cuh)
    assert re.search(r"int K, HOPPER_MAPS_ABC_PARAMS,\s+const float\* __restrict__ scale_a,\s+"
                     r"const float\* __restrict__ scale_b, int\* __restrict__ workspace\)",
                     (ROOT / p.variant_cfg.cuda.source).read_text())


# ---- the tile width by waves -------------------------------------------------------------------------
# BN by waves on the H200's 132 SMs (device.sm_count of conf/device/h200.yaml), of the units: tiles x the split
WAVES_CASES = {
    (1024, 2112, 7168): 64,  # attn_qkv_a at 1024 tokens: 136 tiles of 128 (2 waves, the second of 4); 264 of 64: 2
    # moe_router at 4096 tokens: 64 tiles of 128 (half the SMs idle) split in 2 (the split rule): 128 units, 1 wave;
    # 64 wide 256 units, 2 waves (unsplit, session16's build: 128 tiles of 64, 1 wave, against 64 of 128)
    (4096, 256, 7168): 128,
    # 1792 tiles: 14 waves; 64: 28 x 0.8 = 22.4; 192: 1216 tiles, 10 x 4/3 = 13.3; its last wave's 28 tiles in 4
    # runs (the tail split): 4/3 x (9 + 1/4) + 0.45 = 12.8
    (4096, 7168, 16384): 192,
    (4096, 36864, 7168): 192,  # 9216 tiles: 70 waves; 64: 140 x 0.8 = 112; 192: 47 x 4/3 = 62.7 (tail of 72: 1 run)
    # 448 tiles: 4 waves (the last 0.4 full); 64: 7 x 0.8 = 5.6; 192: 3 x 4/3 = 4 (a tie); 192 with the last
    # wave's 40 tiles in 3 runs: 4/3 x (2 + 1/3) + 0.45 = 3.56
    (1024, 7168, 16384): 192,
    # 1024 tiles: 8 waves; 192: 704 tiles, 6 x 4/3 = 8 (a tie); 44 in 3 runs: 7.56; 256: 512 tiles, 4 x 37/20 = 7.4
    (4096, 4096, 7168): 256,
    (4096, 7168, 2048): 256,  # 1792 tiles: 14 waves; 192: 10 x 4/3 = 13.3 (16 k-blocks: no tail split); 256: 7 x 37/20 = 12.95
    (4096, 2112, 7168): 192,  # 544 tiles: 5 waves (the last 0.1 full); 192: 352 tiles, 3 x 4/3 = 4 (88 left: 1 run)
}
WAVES_SPLITS = {(4096, 256, 7168): 2}  # the split rule's S where it is not 1
WAVES_TAILS = {(4096, 7168, 16384), (1024, 7168, 16384)}  # split tails (then SPLIT_K 4)


def test_the_tile_width_follows_the_waves_on_the_device_configs_sms():
    from gemmlab import variants

    # the YAML's SPLIT_TAIL -1, SPLIT_K 0, SPLIT_KEEP -1, BN 0 and EPI_BOXES -1: chosen per point, the tail split first
    # (it sets the split and the width), then the split (the width reads it) and whether its summing split keeps its
    # partial, then the width and the boxes of C a round, then the stages (4 at most at BN 192 and 256); the scales'
    # read position last (1 where WG_ORDER takes the waits in turn)
    assert variants.info(VARIANT).per_point == ("SPLIT_TAIL", "SPLIT_K", "SPLIT_KEEP", "BN", "EPI_BOXES", "STAGES",
                                                "SCALE_READ")
    assert _point(4096, 7168, 2048, "{WG_ORDER:1}").point_defines()["SCALE_READ"] == 1
    for (m, n, k), bn in WAVES_CASES.items():
        p = _point(m, n, k)
        tail = (m, n, k) in WAVES_TAILS
        s = 4 if tail else WAVES_SPLITS.get((m, n, k), 1)
        d = p.variant_cfg.cuda.defines
        assert p.sm_count == H200_SMS and d.BN == 0 and d.SPLIT_K == 0 and d.SPLIT_TAIL == -1
        assert tail == tail_split(m, n, k, H200_SMS) and (tail or s == split_k(m, n, k, H200_SMS)), (m, n, k)
        stages = {192: 4, 256: 4}.get(bn, 5)
        assert p.point_defines() == {"SPLIT_TAIL": int(tail), "SPLIT_K": s, "SPLIT_KEEP": int(s == 2), "BN": bn,
                                     "EPI_BOXES": int(bn == 256), "STAGES": stages, "SCALE_READ": 3} == rules(m, n, k)
        assert _bn(p) == bn and (tail or bn == waves_bn(m, n, H200_SMS, split=s)), (m, n, k)
    # another device's count, another choice: 136 tiles of 128 on 114 SMs are 2 waves, 264 of 64 are 3
    p114 = _point(1024, 2112, 7168, extra=("device.sm_count=114",))
    assert _bn(p114) == 128 and p114.key != _point(1024, 2112, 7168).key


def test_deepseek_v3_projections_take_bn_64_where_128_wide_tiles_fill_the_waves_poorly():
    """The session's DeepSeek-V3 sweep at 1024 and 4096 tokens on 132 SMs: BN 64 at attn_qkv_a at 1024 tokens
    (136 tiles of 128: 52% of 2 waves) and moe_router at 1024 tokens (16 tiles of 128, split in 4: 64 units, 48%
    of one wave; 128 units of 64), 128 at every other projection (its 128-wide tiles fill 82-100% of their
    waves) and at moe_router at 4096 tokens (64 tiles of 128 split in 2: 128 units, one wave; 64 wide: two)."""
    from gemmlab.points import expand

    pts = expand(compose_cfg([*BASE, "sizes=llm", "sizes.model_names=[deepseek_v3]", "sizes.tokens=[1024,4096]"]))
    ran = [p for p in pts if p.skip_reason is None and p.batch == 1]  # the routed experts are a batch: skipped
    assert len(ran) == 2 * 9 and all(p.point_defines() == rules(p.m, p.n, p.k) for p in ran)
    assert {(p.shape_name.split(".")[1], p.m) for p in ran if _bn(p) == 64} == {
        ("attn_qkv_a", 1024), ("moe_router", 1024)}


def test_at_64_tokens_bn_64_only_where_128_wide_tiles_busy_a_quarter_of_the_sms():
    """Below one row of tiles (64 tokens: m < BM) the width of an unsplit grid follows how many SMs the
    128-wide tiles keep busy, not waves: session16 measured 64 winning at 2-32 tiles (attn_qkv_a, moe_router,
    shared_gate_up) and losing at 56 (attn_o, dense_down, shared_down) against session15b's 128. Those
    split now where K holds 24 k-blocks (the split rule: at most 66 tiles of 128; shared_down's 16 do not), and a split grid's width follows its units' waves:
    64 where the 64-wide units still fit one wave (attn_qkv_a: 33 x 4 = 132, moe_router: 4 x 4), 128 where
    they would not (shared_gate_up: 64 x 4 = 256; 32 x 4 of 128)."""
    from gemmlab.points import expand

    pts = expand(compose_cfg([*BASE, "sizes=llm", "sizes.model_names=[deepseek_v3]", "sizes.tokens=[64]"]))
    ran = [p for p in pts if p.skip_reason is None and p.batch == 1]
    assert len(ran) == 9 and all(p.point_defines() == rules(p.m, p.n, p.k) for p in ran)
    assert {p.shape_name.split(".")[1] for p in ran if _bn(p) == 64} == {"attn_qkv_a", "moe_router"}
    # unsplit, the measured rule's widths (shared_gate_up's 64 among them)
    assert {p.shape_name.split(".")[1] for p in ran if waves_bn(p.m, p.n, H200_SMS) == 64} == {
        "attn_qkv_a", "moe_router", "shared_gate_up"}


def test_the_yaml_rule_is_the_cost_model_in_words():
    """The YAML's integer rule is waves_bn (0.8 x waves(64), waves(128), 4/3 x waves(192), of the units) at every
    M, N, SM count, BM and split, and where the kernel does not build 192 (the overlapped promotion) the
    64-or-128 rule."""
    from gemmlab.expr import evaluate

    p = _point(1024, 2112, 7168)
    rule, env = p.variant_cfg.cuda.point_defines.BN, p._defines_env()
    ms = [1, 64, 65, 128, 200, 512, 1000, 1024, 2048, 4096, 8192, 16384]
    ns = [8, 64, 128, 136, 256, 512, 1536, 2112, 3072, 4096, 7168, 16384, 24576, 36864]
    for sms in (2, 78, 114, 132):
        for bm in (64, 128):
            for split in (1, 2, 3, 4):
                for m in ms:
                    for n in ns:
                        for overlap in (0, 1):
                            got = evaluate(rule, {**env, "m": m, "n": n, "sm_count": sms, "BM": bm, "SPLIT_K": split,
                                                  "PROMOTE_OVERLAP": overlap})
                            assert got == waves_bn(m, n, sms, bm, split, wide=not overlap), (m, n, sms, bm, split, overlap)


def test_the_yaml_split_rule_is_the_prediction_in_words():
    """The YAML's SPLIT_K rule is split_k at every M, N, K, SM count, BM, width override and cluster size;
    an explicit split is kept."""
    from gemmlab.expr import evaluate

    p = _point(1024, 2112, 7168)
    rule, env = p.variant_cfg.cuda.point_defines.SPLIT_K, p._defines_env()
    assert env["SPLIT_K"] == 0
    ms = [1, 64, 128, 129, 512, 1024, 2048, 4096, 8192]
    ns = [8, 64, 128, 256, 264, 1024, 2112, 4096, 7168]
    # either side of each split's minimum (12 k-blocks a run: 24, 36, 48) and of one k-block
    ks = [16, 128, 2944, 3072, 4480, 4608, 6016, 6144, 7168]
    for sms in (2, 132):
        for bm in (64, 128):
            for bn in (0, 64, 128):
                for cluster_m in (1, 2):
                    for m in ms:
                        for n in ns:
                            for k in ks:
                                e = {**env, "m": m, "n": n, "k": k, "sm_count": sms, "BM": bm, "BN": bn,
                                     "CLUSTER_M": cluster_m}
                                assert evaluate(rule, e) == split_k(m, n, k, sms, bm, bn, cluster_m), (e,)
                                assert evaluate(rule, {**e, "SPLIT_K": 2}) == 2


def test_the_yaml_tail_rule_is_the_cost_model_in_words():
    """The YAML's SPLIT_TAIL rule is tail_split at every M, N, K, SM count and BM on the build that has 192;
    never where the entry sets BN or SPLIT_K, with clusters, or on a build without 192; an explicit 0 or 1
    is kept."""
    from gemmlab.expr import evaluate

    p = _point(1024, 2112, 7168)
    rule, env = p.variant_cfg.cuda.point_defines.SPLIT_TAIL, p._defines_env()
    assert env["SPLIT_TAIL"] == -1
    ms = [1, 64, 128, 512, 1000, 1024, 2048, 4096, 8192]
    ns = [256, 1536, 2112, 4096, 7168, 16384, 24576, 36864]
    ks = [512, 2048, 3968, 4096, 6144, 7168, 8192, 16384]  # either side of 16 k-blocks a run x 2, 3, 4
    fired = 0
    for sms in (2, 78, 114, 132):
        for bm in (64, 128):
            for m in ms:
                for n in ns:
                    for k in ks:
                        e = {**env, "m": m, "n": n, "k": k, "sm_count": sms, "BM": bm}
                        want = tail_split(m, n, k, sms, bm)
                        assert evaluate(rule, e) == int(want), (m, n, k, sms, bm)
                        fired += want
                        if want:
                            for other in ({"BN": 192}, {"SPLIT_K": 2}, {"CLUSTER_M": 2}, {"PROMOTE_OVERLAP": 1},
                                          {"SCALE_SMEM": 1}, {"SCALE_B_TILE": 1}, {"SPLIT_TAIL": 0}):
                                assert evaluate(rule, {**e, **other}) == 0, (m, n, k, sms, bm, other)
                        assert evaluate(rule, {**e, "SPLIT_TAIL": 1}) == 1
    assert fired > 100  # the grid reaches the rule's both sides


def test_the_split_rule_splits_moe_router_alone_at_1024_and_4096_tokens():
    """On the H200's 132 SMs: moe_router (N = 256: 8 x 2 / 32 x 2 tiles of 128 x 128 for 132 SMs, each
    walking all 56 k-blocks) splits at 1024 and 4096 tokens, no other DeepSeek-V3 projection there and none
    of the four tune shapes (their defaults stay the measured build). At 64 tokens (one row of tiles) every
    projection whose 128-wide tiles leave at least half the SMs idle and whose K holds 24 k-blocks splits. The build carries the split
    (-DSPLIT_K, the kernel name, the row's defines) and the launch counts its units and sizes the workspace."""
    from gemmlab.backends.cuda_kernels import build_for, launch_shape
    from gemmlab.points import expand
    from gemmlab.runner import variant_fields

    pts = expand(compose_cfg([*BASE, "sizes=llm", "sizes.model_names=[deepseek_v3]", "sizes.tokens=[64,1024,4096]"]))
    ran = [p for p in pts if p.skip_reason is None and p.batch == 1]
    tails = {(p.shape_name.split(".")[1], p.m) for p in ran if p.point_defines()["SPLIT_TAIL"]}
    # session22e's wins (and shared_gate_up at 4096 tokens until session24: 256-wide tiles cost less there)
    assert tails == {("attn_o", 64), ("attn_o", 1024), ("attn_o", 4096), ("dense_down", 64), ("dense_down", 1024),
                     ("dense_down", 4096), ("dense_gate_up", 64)}
    # 256 wide (session24's wins as an override) at shared_gate_up and shared_down at 1024 and 4096 tokens
    assert {(p.shape_name.split(".")[1], p.m) for p in ran if _bn(p) == 256} == {
        ("shared_gate_up", 1024), ("shared_gate_up", 4096), ("shared_down", 1024), ("shared_down", 4096)}
    assert len(ran) == 3 * 9 and all(p.point_defines() == rules(p.m, p.n, p.k) for p in ran)
    ran_whole = [p for p in ran if (p.shape_name.split(".")[1], p.m) not in tails]
    assert all(_split(p) == split_k(p.m, p.n, p.k, H200_SMS) for p in ran_whole)
    split = {(p.shape_name.split(".")[1], p.m): (_split(p), _bn(p)) for p in ran_whole if _split(p) > 1}
    assert {key: s for key, s in split.items() if key[1] > 64} == {("moe_router", 1024): (4, 64),
                                                                   ("moe_router", 4096): (2, 128)}
    assert {key: s for key, s in split.items() if key[1] == 64} == {
        ("attn_qkv_a", 64): (4, 64), ("moe_router", 64): (4, 64), ("shared_gate_up", 64): (4, 128)}
    for m, n, k in TUNE_SHAPES:  # the tail split at 4096 x 7168 x 16384 alone
        p = _point(m, n, k)
        tail = (m, n, k) == (4096, 7168, 16384)
        assert _split(p) == (4 if tail else 1) and f"-DSPLIT_TAIL={int(tail)}" in build_for(p).flags, (m, n, k)
    for p in ran:
        s, bn, tail = _split(p), _bn(p), p.point_defines()["SPLIT_TAIL"]
        b = build_for(p)
        assert [f for f in b.flags if f.startswith("-DSPLIT_K=")] == [f"-DSPLIT_K={s}"]
        assert f"SPLIT_K={s}" in b.kernel_name and variant_fields(p)["defines"]["SPLIT_K"] == s
        assert f"SPLIT_TAIL={tail}" in b.kernel_name and variant_fields(p)["defines"]["SPLIT_TAIL"] == tail
        tiles = -(-p.m // 128) * -(-p.n // bn)
        shape = launch_shape(p, sm_count=H200_SMS)
        grid = min(H200_SMS, tiles * s)
        assert shape.grid == (grid, 1, 1) and (s == 1 or tail or tiles * s <= H200_SMS), p.shape_name
        if tail:  # the grid's tiles' counters and partials (the tail's are fewer); its runs as the kernel counts
            assert shape.workspace_bytes == 256 * -(-grid * 2 // 64) + grid * s * 128 * bn * 4
            kb = -(-p.k // 128)
            assert _tail(tiles, grid, kb, s)[1] == min(4, grid // (tiles % grid)) >= 2 and kb >= 16 * _tail(tiles, grid, kb, s)[1]
            continue
        # counters (one a tile and consumer warpgroup) to 256 bytes + S partials of 128 x BN floats a tile
        assert shape.workspace_bytes == (256 * -(-tiles * 2 // 64) + tiles * s * 128 * bn * 4 if s > 1 else 0)
        if s > 1:
            assert -(-p.k // 128) >= 12 * s  # 12 k-blocks a split at least


def test_an_explicit_width_wins_at_every_point():
    from gemmlab.backends.cuda_kernels import build_for

    for m, n, k in WAVES_CASES:
        for bn in (64, 128):
            p = _point(m, n, k, f"{{BN:{bn}}}")
            assert p.point_defines()["BN"] == bn and _bn(p) == bn, (m, n, k, bn)
            b = build_for(p)
            assert [f for f in b.flags if f.startswith("-DBN=")] == [f"-DBN={bn}"]
            assert f",BN={bn}," in b.kernel_name


def test_the_build_the_kernel_name_and_the_row_carry_the_width_built():
    from gemmlab.backends.cuda_kernels import build_for, launch_shape
    from gemmlab.expr import evaluate
    from gemmlab.runner import variant_fields

    builds = {}
    for (m, n, k), bn in WAVES_CASES.items():
        p = _point(m, n, k)
        b = builds[m, n, k] = build_for(p)
        assert [f for f in b.flags if f.startswith("-DBN=")] == [f"-DBN={bn}"], b.flags
        assert b.kernel_name.startswith(f"wgmma_fp8_block_gemm<BM=128,BN={bn},BK=128,"), b.kernel_name
        tail = (m, n, k) in WAVES_TAILS
        assert dict(b.yaml_defines)["BN"] == 0 and dict(b.point_defines) == rules(m, n, k)
        assert variant_fields(p)["defines"]["BN"] == bn  # the row's defines column
        # every launch rule reads the width built: the persistent grid, shared memory, B's TMA box
        s = launch_shape(p, sm_count=H200_SMS)
        assert s.grid == (min(H200_SMS, -(-m // 128) * -(-n // bn) * (4 if tail else WAVES_SPLITS.get((m, n, k), 1))), 1, 1)
        stages = {192: 4, 256: 4}.get(bn, 5)
        # (BN 192: 4 stages, 256: 4 with one box of C staged a round, both two 16-byte groups of B's scales a slot)
        staged = 64 if bn == 256 else bn
        assert s.smem_bytes == (stages * (128 + bn) * 128 + 2 * 64 * staged * 2 + 1024 + 16 * stages
                                + stages * (128 + 4 * (1 + (bn > 128))) * 4)
        env = p.expr_env()
        assert [evaluate(x, env) for x in p.variant_cfg.cuda.tensor_maps[1].box] == [bn, 128]
    # one build per width and split: the unsplit BN-128 points share theirs, the one the YAML's BN 128 made
    # before (same flags: its cubin stays cached) and {BN:128}'s; the split one (moe_router) its own
    assert builds[1024, 2112, 7168] != builds[4096, 7168, 16384] != builds[4096, 256, 7168] != builds[1024, 2112, 7168]
    # the tail-split ones share theirs, {SPLIT_K:4,SPLIT_TAIL:1,BN:192}'s (the build session22e measured)
    assert builds[1024, 7168, 16384] == builds[4096, 7168, 16384]
    assert builds[1024, 7168, 16384].flags == build_for(_point(4096, 7168, 16384, "{SPLIT_K:4,SPLIT_TAIL:1,BN:192}")).flags
    # the unsplit 192-wide ones share theirs, {BN:192,STAGES:4}'s (the build session21 measured)
    assert builds[4096, 36864, 7168] == builds[4096, 2112, 7168] != builds[4096, 7168, 16384]
    assert builds[4096, 36864, 7168].flags == build_for(_point(4096, 7168, 7168, "{BN:192,STAGES:4}")).flags
    # the 256-wide ones share theirs, {BN:256}'s (4 stages and one box of C a round by the YAML's rules)
    assert builds[4096, 4096, 7168] == builds[4096, 7168, 2048] != builds[4096, 36864, 7168]
    assert builds[4096, 4096, 7168].flags == build_for(_point(4096, 7168, 7168, "{BN:256}")).flags


def test_the_sweep_entries_build_at_the_tune_shapes_what_they_did_or_by_waves():
    """An entry that fixes BN builds it at every tune shape; every other entry takes BN by waves, as the
    defaults do: 192 at the three large shapes since session21 (128 before, and still where the build has no
    192: the overlapped promotion, the other scale modes, a split; 256 at 4096 x 7168 x 2048 since session24), 64 at 1024 x 2112 x 7168 (the case {BN:64}
    was measured for), except with BM 64 (176 tiles of 64 x 192: 2 waves x 4/3, against 3 of 64 x 128 and 4 x 0.8
    of 64 x 64) and with a split (the waves of its units: 128 there)."""
    for defines in FP8_BLOCK_SWEEP:
        for m, n, k in TUNE_SHAPES:
            p = _point(m, n, k, defines)
            bm, split = p.expr_env()["BM"], _split(p)
            # the split rule splits none of them: only an entry's own split, or the tail rule's (an entry that
            # sets no width, split or cluster, on the build that has 192: at 4096 x 7168 x 16384)
            tail = not re.search(r"BN:|SPLIT_K:|CLUSTER_M:2|SPLIT_TAIL:0", defines) and tail_split(m, n, k, H200_SMS, bm, _wide(p), _wide256(p))
            assert p.point_defines()["SPLIT_TAIL"] == int(tail), (defines, (m, n, k))
            assert bm == 64 or tail == (_wide(p) and "CLUSTER_M:2" not in defines and "BN:" not in defines
                                        and "SPLIT_TAIL:0" not in defines
                            and "SPLIT_K:" not in defines and (m, n, k) == (4096, 7168, 16384)), (defines, (m, n, k))
            assert split == (int(re.search(r"SPLIT_K:(\d+)", defines).group(1)) if "SPLIT_K:" in defines else 4 if tail else 1)
            fixed = re.search(r"BN:(\d+)", defines)
            want = int(fixed.group(1)) if fixed else 192 if tail else waves_bn(m, n, H200_SMS, bm, split, _wide(p), _wide256(p))
            assert _bn(p) == want, (defines, (m, n, k))
            if "BN:" not in defines and not tail:  # split: 272 units of 128 at 1024 x 2112 (3 waves) against 528 of 64 (4)
                # 192 unsplit where the build takes it, at the three large shapes (and with BM 64 at all four); 256
                # at 4096 x 7168 x 2048 where the build takes that (session24), and at 4096 x 7168 x 16384 where the
                # tail is not split (7 waves x 37/20 against 10 x 4/3)
                wide = 192 if _wide(p) and split == 1 else 128
                if _wide256(p) and split == 1 and (m, n, k) in ((4096, 7168, 2048), (4096, 7168, 16384)):
                    wide = 256
                assert want == (64 if (m, n, k) == (1024, 2112, 7168) and bm == 128 and split == 1 else wide), (
                    defines, (m, n, k))


# ---- builds ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def block_builds(tmp_path_factory):
    """Every sweep entry built as the tune builds it at a shape where the waves choose BN 128, and
    WIDTHS_BUILT's also at one where they choose 64 (each build a few CPU-seconds of the suite)."""
    out = session_folder(tmp_path_factory.getbasetemp(), "cuda-cache")
    return {(d, shape): build(VARIANT, "fp8", out, _overrides(d, shape))
            for d in FP8_BLOCK_SWEEP for shape in _shapes_built(d)}


def _shapes_built(defines):
    return BUILD_SHAPES if defines in WIDTHS_BUILT else BUILD_SHAPES[:1]


# the tests that read block_builds on one worker (xdist_group): each worker would build the whole sweep
@pytest.mark.slow
@pytest.mark.xdist_group("fp8_block_builds")
@pytest.mark.parametrize("defines", FP8_BLOCK_SWEEP)
def test_sweep_configurations_build_without_spills_or_warnings(block_builds, defines):
    from gemmlab.expr import evaluate

    for shape in _shapes_built(defines):
        p = _point(*shape, defines)
        assert p.skip_reason is None, p.skip_reason
        assert evaluate(p.variant_cfg.cuda.smem_bytes, p.expr_env()) <= SMEM_PER_BLOCK_MAX, (defines, shape)
        nums = ptxas_numbers(block_builds[defines, shape][1])
        assert nums["spill"] == 0 and nums["stack"] == 0 and nums["registers"] <= 255, (defines, shape, nums)
        # C7514 / C7517: ptxas serialised the wgmmas (an accumulator read it could not prove safe)
        report = block_builds[defines, shape][1]
        assert "warning" not in report.lower() and "C7514" not in report and "C7517" not in report, report


@pytest.mark.slow
def test_moe_router_candidates_build_and_the_measured_split_is_pinned(tmp_path_factory):
    """At moe_router's 4096 tokens the default (split in 2, the partial kept) is still the SASS session27 measured, and
    {SPLIT_KEEP:0} session24b's; SPLIT_KEEP 1 on an unsplit point is the default's code; every candidate of the next run
    builds without spills or serialised wgmmas, split in 2 at 128 wide, other code than the default."""
    from test_wgmma_ws_nt import sass_digest

    from gemmlab.backends import nvcc

    out = session_folder(tmp_path_factory.getbasetemp(), "cuda-cache")
    measured = nvcc.find_nvcc() is not None and nvcc.nvcc_version(nvcc.find_nvcc()) == MEASURED_NVCC
    assert _point(*MOE_ROUTER_T4096).point_defines() == {"SPLIT_TAIL": 0, "SPLIT_K": 2, "SPLIT_KEEP": 1, "BN": 128,
                                                         "EPI_BOXES": 0, "STAGES": 5, "SCALE_READ": 3}
    default = sass_digest(sass(build(VARIANT, "fp8", out, _overrides("{}", MOE_ROUTER_T4096))[0]))
    if measured:
        assert default == MEASURED_SPLIT_SASS, "the moe_router split default is no longer the code session27 measured"
        previous = build(VARIANT, "fp8", out, _overrides("{SPLIT_KEEP:0}", MOE_ROUTER_T4096))[0]
        assert sass_digest(sass(previous)) == SESSION24B_SPLIT_SASS
    for d in MOE_ROUTER_CANDIDATES:
        p = _point(*MOE_ROUTER_T4096, d)
        assert p.skip_reason is None, p.skip_reason
        env = p.expr_env()
        assert (env["SPLIT_K"], env["BN"], env["SPLIT_KEEP"]) == (2, 128, int("SPLIT_KEEP:0" not in d)), d
        cubin, report = build(VARIANT, "fp8", out, _overrides(d, MOE_ROUTER_T4096))
        nums = ptxas_numbers(report)
        assert nums["spill"] == 0 and nums["stack"] == 0, (d, nums)
        assert "warning" not in report.lower() and "C7514" not in report and "C7517" not in report, report
        assert sass_digest(sass(cubin)) != default, d
        text = sass(cubin)  # every candidate splits (a GPU-scope atomic hands the partials over); clusters multicast B
        assert "ATOMG.E.ADD" in text and ("UTMALDG.2D.MULTICAST" in text) == ("CLUSTER_M:2" in d), d
    wide = _point(*SHARED_GATE_UP_T1024).expr_env()  # the default there: 128 x 256, 4 stages, one box of C a round
    assert (wide["BN"], wide["STAGES"], wide["SPLIT_K"], wide["EPI_BOXES"]) == (256, 4, 1, 1)
    for d in SHARED_GATE_UP_CANDIDATES:  # 128 x 256 with 3 stages, unsplit
        env = _point(*SHARED_GATE_UP_T1024, d).expr_env()
        assert (env["BN"], env["STAGES"], env["SPLIT_K"]) == (256, 3, 1), (d, env["BN"], env["STAGES"])
        nums = ptxas_numbers(build(VARIANT, "fp8", out, _overrides(d, SHARED_GATE_UP_T1024))[1])
        assert nums["spill"] == 0 and nums["stack"] == 0, (d, nums)
    unsplit = build(VARIANT, "fp8", out, _overrides("{SPLIT_KEEP:1}"))[0]
    assert sass_digest(sass(unsplit)) == sass_digest(sass(build(VARIANT, "fp8", out, _overrides("{}"))[0]))


@pytest.mark.slow
def test_register_counts_past_the_launch_do_not_build(tmp_path):
    """setmaxnreg only moves registers inside the CTA's launch allocation (168 a thread at 384 threads:
    64512): PRODUCER_REGS 48 with two consumers at 232 asks 65536 and hung every launch on the H200
    (session14e, each point killed by its worker's timeout). The static_assert refuses it at compile time."""
    from gemmlab.backends import nvcc
    from gemmlab.backends.cuda_kernels import build_for

    if nvcc.find_nvcc() is None:
        pytest.skip("nvcc not found")
    kb = build_for(_point(4096, 7168, 7168, "{SCALE_SMEM:1,SCALE_WARPS:3,PRODUCER_REGS:48}"), str(ROOT))
    with pytest.raises(nvcc.CompileError) as e:
        nvcc.compile_cubin(kb.source, kb.flags, tmp_path)
    log = Path(e.value.log_path).read_text() if e.value.log_path else str(e.value)
    assert "past the CTA's launch registers" in log, log


@pytest.mark.slow
@pytest.mark.xdist_group("fp8_block_builds")
def test_sass_promotes_while_the_next_k_block_runs(block_builds):
    """e4m3 QGMMA fed by TMA; with PROMOTE_OVERLAP 1 the consumer waits for all but the newest wgmma
    group (WARPGROUP.DEPBAR.LE gsb0, 0x1) and then runs the promotion's FFMAs; with 0 it waits for all."""
    for (defines, shape), (cubin, _) in block_builds.items():
        text = sass(cubin)
        ops = opcodes(text)
        p = _point(*shape, defines)
        d = p.variant_cfg.cuda.defines  # the YAML's, with the entry's on top
        bn = _bn(p)  # as built: the entry's, or by waves
        n = 128 if bn == 256 else bn  # BN 256: two m64n128 halves a k-block
        assert any(x.startswith(f"QGMMA.64x{n}x32.F32.E4M3.E4M3") for x in ops), (defines, "no e4m3 QGMMA")
        assert not [x for x in ops if x.startswith(("LDL", "STL", "HGMMA", "HMMA"))], defines
        assert any(x.startswith("UTMALDG.2D") for x in ops) and any(x.startswith("FFMA") for x in ops), defines
        # split-K: the count on the slice's counter (an acq_rel atomic at GPU scope) and the partials' 16-byte
        # stores and loads past L1 (ld.global.cg); none of it unsplit
        partials = "LDG.E.128.STRONG.GPU"
        split = p.expr_env()["SPLIT_K"] > 1
        assert any(x.startswith("ATOMG.E.ADD.S32.STRONG.GPU") for x in ops) == split, defines
        assert any(x.startswith(partials) for x in ops) == split, defines
        assert any(x.startswith("STG.E.128") for x in ops) == split, defines
        loads = [x for x in ops if x.startswith("LDG") and not (split and x.startswith(partials))]
        if d.SCALE_SMEM == 2:  # the scales come by bulk copy, no consumer or producer loads them
            assert any(x.startswith("UBLKCP") for x in ops) and not loads, defines
        elif d.SCALE_SMEM == 3:  # ... by cp.async (LDGSTS), no register loads
            assert any(x.startswith("LDGSTS") for x in ops) and not [x for x in loads if x.startswith("LDG.")], defines
        else:
            assert any(x.startswith("LDG.E.CONSTANT") for x in ops), f"{defines}: scales not read through the read-only path"
        overlapped = "WARPGROUP.DEPBAR.LE gsb0, 0x1" in text
        assert overlapped == bool(d.PROMOTE_OVERLAP), defines
        assert any(x.startswith("UTMASTG.2D") for x in ops) == bool(d.EPI_TMA), defines


# The default kernel as session23e measured it (DESC_STEP 2 on session23b's SCALE_READ 3 with UNIFORM_A 1) at BN 64,
# 128 and 192 and in the tail split: sha256 of its SASS instructions (test_wgmma_ws_nt.sass_digest) at each width,
# from nvcc 13.0.88 (cuobjdump 13.x).
MEASURED_NVCC = "13.0.88"
MEASURED_DEFAULT_SASS = {
    128: "9469c8126b96cec0adef02728f4cf0f83b1a73ed83d0f8487fc93a981d5abf79",
    64: "f6d91c20d82e65446ab1648159bb0d5ccd861bcd80b42b68b97583bd9f190f1b",
    192: "a686fa206029b8b512891f8cf101d42182917ce10a18ce608a4c3a2a43f9ad3e",
    # BN 256 by waves since session24b, with one box of C staged a round and a fourth stage since session27 (EPI_BOXES
    # by rule; session27b's ds3_epi_boxes measured this build at BN 256's points, as {EPI_BOXES:1,STAGES:6})
    256: "4d11efe579c7f6e37e3058a59c8ab70e57bd4db820612b87fb83afb37ae55cf5",
}
# BN 256 as session24b-27 measured it (3 stages, all of C staged at once): {EPI_BOXES:0} now
SESSION24B_BN256_SASS = "4c12ff05a36ae8a630e31f3cbff54c2dcfe993c29052d5464f23bb05e1557083"
# {BN:256} as session24 measured it (8a26b5c's loop, each k-block's scales read after its slot's wait at the top):
# {BN:256,SCALE_READ:1,EPI_BOXES:0} now
SESSION24_BN256_SASS = "08089c557cb8c10cb8291d558bdda038903440ff0344d2df803dfba2dd9611de"
# the default where the rule takes the tail split ({SPLIT_K:4,SPLIT_TAIL:1,BN:192}, 4 stages)
MEASURED_TAIL_SASS = "3ae9ebaa589d3a596430172706fbf7193929399559d216cec7f4c28d53f50633"
# {DESC_STEP:0}: the defaults session23b-23d measured (2f7ca07's {SCALE_READ:3,UNIFORM_A:1}; 80401e4's defaults)
SESSION23_SASS = {
    128: "0c2ee6b8015ab311c5d9eb65670e2f2b88b81d35d4cd4d16cd0fa80f01993caf",
    64: "abe51badf75e299a40f6c207b4a17e4168c50032f3bf79beb86f467a58ebdf07",
    192: "89c5553a777872c3dcfa2f89fc8424fe7aa04b2ac2e6e14d7852e3aa6b10e317",
}
SESSION23_TAIL_SASS = "98e8a07a1806877329cb83b9a1ac058dea5de4adf66c36fe9eb502867e57f3ea"
# The defaults up to session23 ({SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0} now): session20b's build at BN 64 and 128 (cf2e194), session21's
# at 192 (d7e70a2), session22e's tail split; the runs the new defaults were measured against (ds3_defaults) built them.
# The SCALE_READ 0 build is the code session16 measured (ac04635): SESSION16_SASS.
PREVIOUS_DEFAULT_SASS = {
    128: "3ee27aa68c104d994cfbb8ac003f98e8ff102ef47f917804adb04fbfd6e5281d",
    64: "a50526aa20d6fbb2cdec24947beec38b71009479dba88f9eca7730c71708a5c9",
    192: "b2cf334ea8bd3d890b24f29291dc56f0234c5fb4e1ffc82dbf8cb413903a0a91",
}
PREVIOUS_TAIL_SASS = "23710c54289ba25369bcb806bb756146116d0146649fbed5dbe5d1f125721397"
SESSION16_SASS = {
    128: "9d0a35726a13095e34b0c72f585a01b92f076fa070622e026cc648fe21aa9f9d",
    64: "f9f90c257efe36f20be59f0276a450f425e9b4797e0c900ab5ac18e3987bae6c",
}
# the default at moe_router's 4096 tokens (4096 x 256 x 7168: 64 tiles of 128 x 128 split in 2, the summing split
# keeping its own partial by rule since session27), as session27 measured it ({SPLIT_KEEP:1}: 99.7 / 99.3% of cuBLASLt)
MEASURED_SPLIT_SASS = "373c9f66a93c4f42bb439feadd90a32b8c3481f42e13b291a44dbca7761ea76e"
# ... and as session24b measured it at 94.9% (ec544dc; session27's 93.9 / 91.6): {SPLIT_KEEP:0} now
SESSION24B_SPLIT_SASS = "7a6f4139d92e1e73f54efa31dfe1f3be99f587f48d358cb5202f64cf477aaae3"
MOE_ROUTER_T4096 = (4096, 256, 7168)
# What the next run measures there beside the defaults. Session27 measured the first list (fp8_block_split): keeping the
# partial won (99.7 against 93.9% of cuBLASLt; now the rule where a tile is split in 2); 128 x 256 tiles split in 4
# (83.2, 82.2 keeping), 2-CTA clusters split in 2 (84.9, 89.4 keeping: cuBLASLt's own configuration there) and both
# (75.3) lost, against the byte model's prediction (fewer operand bytes: 105 and 88-92 MB against 134); 6 stages
# without staging (94.6) or with one box a round (93.6) and DESC_STEP 0 (97.4; 99.1 keeping) tied or lost. Next: the
# previous default (the control), the k-loop before DESC_STEP 2 and the two sixth stages, each now with the partial kept
MOE_ROUTER_CANDIDATES = ["{SPLIT_KEEP:0}", "{DESC_STEP:0}", "{STAGES:6,EPI_TMA:0}", "{EPI_BOXES:1,STAGES:6}"]
# ... and at shared_gate_up's 1024 tokens (1024 x 4096 x 7168: 128 tiles of 128 x 256 by waves, 97.5% of cuBLASLt in
# session24b, at the L2 roof by arithmetic): session27 measured a fourth stage ({EPI_BOXES:1}: 99.6 against 97.4; the
# rule at BN 256 since) and with it B multicast in 2-CTA clusters (93.2: lost, as at 3 stages in session24c, 93.9
# against 97.6). Next: the previous default (3 stages, all of C staged at once) beside the new
SHARED_GATE_UP_T1024 = (1024, 4096, 7168)
SHARED_GATE_UP_CANDIDATES = ["{EPI_BOXES:0}"]


@pytest.mark.slow
@pytest.mark.xdist_group("fp8_block_builds")
def test_the_default_kernel_is_the_measured_code(block_builds, tmp_path_factory):
    """The default build, at each width, is the SASS measured (DESC_STEP 2: session23e); a change to it is measured
    (tune_fp8_block, ds3_fp8_block) before it becomes the default, and this digest with it. The previous defaults'
    builds are still the code measured before ({DESC_STEP:0}: session23b-d; SCALE_READ 1 without UNIFORM_A:
    session20b, 21, 22e)."""
    from test_wgmma_ws_nt import sass_digest

    from gemmlab.backends import nvcc

    found = nvcc.find_nvcc()
    if found is None or nvcc.nvcc_version(found) != MEASURED_NVCC:
        pytest.skip(f"the recorded SASS is nvcc {MEASURED_NVCC}'s (here: {found and nvcc.nvcc_version(found)})")
    default = FP8_BLOCK_SWEEP[0]
    for shape in BUILD_SHAPES:
        bn = _bn(_point(*shape, default))
        assert sass_digest(sass(block_builds[default, shape][0])) == MEASURED_DEFAULT_SASS[bn], (
            f"stage 15's default kernel at BN {bn} is no longer the measured code (or cuobjdump prints it otherwise)")
        # the check can fail: the clustered build at the same width is other code
        assert sass_digest(sass(block_builds["{CLUSTER_M:2}", shape][0])) != MEASURED_DEFAULT_SASS[bn]
    # the build shapes take 192 and 64 by waves; the defaults' 128 (e.g. 1024 x 1536 x 7168) and SCALE_READ 0 (the
    # defaults up to session20, still the code session16 measured) at 128 and 64
    out = session_folder(tmp_path_factory.getbasetemp(), "cuda-cache")
    assert sorted(_bn(_point(*shape, default)) for shape in BUILD_SHAPES) == [64, 192]
    assert _bn(_point(1024, 1536, 7168)) == 128
    # 256 at 4096 x 7168 x 2048 (shared_down at 4096 tokens), {BN:256}'s build; SCALE_READ 1 is session24's
    assert _bn(_point(4096, 7168, 2048)) == 256
    got = sass_digest(sass(build(VARIANT, "fp8", out, _overrides("{}", (4096, 7168, 2048)))[0]))
    assert got == MEASURED_DEFAULT_SASS[256] == sass_digest(sass(block_builds["{BN:256}", BUILD_SHAPES[0]][0]))
    # ... and with all of C staged at once and 3 stages, session24b-27's default at 256, and session24's loop
    got = sass_digest(sass(build(VARIANT, "fp8", out, _overrides("{EPI_BOXES:0}", (4096, 7168, 2048)))[0]))
    assert got == SESSION24B_BN256_SASS
    got = sass_digest(sass(build(VARIANT, "fp8", out, _overrides("{BN:256,SCALE_READ:1,EPI_BOXES:0}"))[0]))
    assert got == SESSION24_BN256_SASS
    # the tail split's default (1024 x 7168 x 16384: 192 wide, its last wave's 40 tiles in 3 runs)
    tail = _point(1024, 7168, 16384)
    assert tail.point_defines() == {"SPLIT_TAIL": 1, "SPLIT_K": 4, "SPLIT_KEEP": 0, "BN": 192, "EPI_BOXES": 0,
                                    "STAGES": 4, "SCALE_READ": 3}
    assert sass_digest(sass(build(VARIANT, "fp8", out, _overrides("{}", (1024, 7168, 16384)))[0])) == MEASURED_TAIL_SASS
    assert sass_digest(sass(build(VARIANT, "fp8", out, _overrides("{BN:128}"))[0])) == MEASURED_DEFAULT_SASS[128]
    for shape in BUILD_SHAPES:
        got = sass_digest(sass(block_builds["{DESC_STEP:0}", shape][0]))
        assert got == SESSION23_SASS[_bn(_point(*shape, "{DESC_STEP:0}"))], shape
    got = sass_digest(sass(build(VARIANT, "fp8", out, _overrides("{DESC_STEP:0}", (1024, 7168, 16384)))[0]))
    assert got == SESSION23_TAIL_SASS
    previous = "{SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0}"
    for shape in BUILD_SHAPES:
        assert sass_digest(sass(block_builds[previous, shape][0])) == PREVIOUS_DEFAULT_SASS[_bn(_point(*shape, previous))]
    got = sass_digest(sass(build(VARIANT, "fp8", out, _overrides(previous, (1024, 7168, 16384)))[0]))
    assert got == PREVIOUS_TAIL_SASS
    got = sass_digest(sass(build(VARIANT, "fp8", out, _overrides("{SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0,BN:128}"))[0]))
    assert got == PREVIOUS_DEFAULT_SASS[128]
    for bn in (128, 64):
        got = sass_digest(sass(build(VARIANT, "fp8", out, _overrides(f"{{SCALE_READ:0,UNIFORM_A:0,DESC_STEP:0,BN:{bn}}}"))[0]))
        assert got == SESSION16_SASS[bn], bn


@pytest.mark.slow
@pytest.mark.xdist_group("fp8_block_builds")
def test_clusters_multicast_b_and_release_slots_with_unfenced_remote_arrives(block_builds, tmp_path):
    """CLUSTER_M 2: B's share multicast (UTMALDG.2D.MULTICAST), the cluster barrier at start and end (UCGABAR),
    and each slot released to both CTAs with a CTA-scope remote arrive, which ptxas does not fence with
    MEMBAR.ALL.GPU (stage 12's clusters ran at 57-65% of cuBLAS with those fences: test_hopper_kernels);
    without clusters none of it. Control: the release at cluster scope is fenced, and the count sees it."""
    from gemmlab.backends import nvcc
    from gemmlab.backends.cuda_kernels import build_for

    for (defines, shape), (cubin, _) in block_builds.items():
        ops = opcodes(sass(cubin))
        clustered = "CLUSTER_M:2" in defines
        assert any(x.startswith("UTMALDG.2D.MULTICAST") for x in ops) == clustered, defines
        assert any(x.startswith("UCGABAR") for x in ops) == clustered, defines
        fenced, arrives = remote_arrives_fenced(ops)
        # the release's arrive to each of the 2 CTAs, at its one place (PROMOTE_OVERLAP 0, the defaults)
        assert (fenced, arrives) == ((0, 2) if clustered else (0, 0)), (defines, fenced, arrives)
    kb = build_for(_point(*BUILD_SHAPES[0], "{CLUSTER_M:2}"), str(ROOT))
    text = kb.source.read_text()
    marker = "mbar_arrive_remote(&empty[use % STAGES]"
    assert text.count(marker) == 1, "stage 15 changed: update the control's patch"
    wrong = tmp_path / kb.source.name
    wrong.write_text(text.replace(marker, "mbar_arrive_remote<true>(&empty[use % STAGES]"))
    # its headers from the kernel's folder (hopper/ptx.cuh)
    ops = opcodes(sass(nvcc.compile_cubin(wrong, [*kb.flags, f"-I{kb.source.parent}"], tmp_path).path))
    assert remote_arrives_fenced(ops) == (2, 2), "the cluster-scope control lost its fences"


def test_clusters_launch_a_multiple_of_two_ctas_and_multicast_half_of_b_each():
    """The YAML's rules at CLUSTER_M 2: the persistent grid a multiple of 2, at most the SMs (an odd count
    leaves one idle), never more than the CTAs of the cluster tiles (cdiv(m, 2 BM) rows of them); B's box
    half the tile's rows; the same shared memory as without clusters; the modeled intensity counts half
    of B."""
    from gemmlab.backends.cuda_kernels import build_for, launch_shape
    from gemmlab.expr import evaluate

    for (m, n, k), sms in [((4096, 7168, 7168), 132), ((4096, 7168, 7168), 133), ((1, 2112, 7168), 132),
                           ((130, 264, 1040), 132), ((300, 1032, 4096), 132), ((1024, 2112, 7168), 132)]:
        for defines in ("{CLUSTER_M:2}", "{CLUSTER_M:2,BN:64}", "{CLUSTER_M:2,BM:64,CONSUMER_REGS:240}"):
            p = _point(m, n, k, defines, extra=(f"device.sm_count={sms}",))
            env = p.expr_env()
            bm, bn = env["BM"], env["BN"]
            s = launch_shape(p, sm_count=sms)
            cluster_tiles = -(-m // (2 * bm)) * -(-n // bn)
            assert s.grid == (min(sms - sms % 2, 2 * cluster_tiles), 1, 1), (defines, (m, n, k), sms, s.grid)
            assert s.grid[0] % 2 == 0 and s.grid[0] <= sms
            assert [evaluate(x, env) for x in p.variant_cfg.cuda.tensor_maps[1].box] == [bn // 2, 128]
            # (unsplit: the clusters are: the split rule gives 1 with CLUSTER_M 2)
            assert env["SPLIT_K"] == 1 and "-DSPLIT_K=1" in build_for(p).flags
            plain = _point(m, n, k, defines.replace("CLUSTER_M:2", f"CLUSTER_M:1,SPLIT_K:1,BN:{bn}"),
                           extra=(f"device.sm_count={sms}",))
            assert s.smem_bytes == launch_shape(plain, sm_count=sms).smem_bytes
            assert evaluate(p.variant_cfg.intensity_model, env) == pytest.approx(2 * bm * bn / (bm + bn / 2))
            assert "-DCLUSTER_M=2" in build_for(p).flags
    # the YAML's default is no clusters: the grid and the box as before the define
    p = _point(130, 264, 1040)
    assert p.variant_cfg.cuda.defines.CLUSTER_M == 1 and "-DCLUSTER_M=1" in build_for(p).flags


def test_clusters_split_by_an_override_with_a_workspace_slice_per_cta_tile():
    """{CLUSTER_M:2,SPLIT_K:S} (cuBLASLt's configuration at moe_router's 4096 tokens: 128 x 128 tiles split in 2 in 2-CTA
    clusters): the grid is the cluster tiles' CTAs x the splits, a multiple of 2, at most the SMs; the workspace holds a
    counter and S partials for every CTA's tile, a cluster's second CTA's too where it lies past M (the kernel indexes
    them cluster tile x 2 + rank: cdiv(m, 2 BM) x 2 rows of tiles); the tail split is refused with clusters. Emulated
    (test_split_k_sums_the_splits_at_every_edge_on_the_cpu, test_clusters_split_with_the_same_bits_whichever_split_
    arrives_last) and run on the H200 at the split edges (tests/test_gpu_hopper_fp8_block.py)."""
    from gemmlab.backends.cuda_kernels import launch_shape

    for (m, n, k), defines in [(MOE_ROUTER_T4096, "{CLUSTER_M:2,SPLIT_K:2}"), ((1024, 256, 7168), "{CLUSTER_M:2,SPLIT_K:4,BN:64}"),
                               ((130, 264, 1040), "{CLUSTER_M:2,SPLIT_K:2}"), ((200, 264, 1040), "{CLUSTER_M:2,SPLIT_K:4,BN:256}"),
                               ((1, 8, 128), "{CLUSTER_M:2,SPLIT_K:2}")]:
        p = _point(m, n, k, defines)
        assert p.skip_reason is None, p.skip_reason
        env = p.expr_env()
        bm, bn, split = env["BM"], env["BN"], env["SPLIT_K"]
        taken = min(split, -(-k // 128))
        cta_tiles = -(-m // (2 * bm)) * 2 * -(-n // bn)
        s = launch_shape(p, sm_count=H200_SMS)
        assert s.grid == (min(H200_SMS, cta_tiles * taken), 1, 1) and s.grid[0] % 2 == 0, (defines, (m, n, k), s.grid)
        counters = -(-(cta_tiles * (bm // 64) * 4) // 256) * 256  # the kernel's counter_bytes(tiles x CLUSTER_M)
        assert s.workspace_bytes == counters + cta_tiles * split * bm * bn * 4, (defines, (m, n, k), s.workspace_bytes)
    # the YAML's rule still splits no clustered point
    assert _split(_point(*MOE_ROUTER_T4096, "{CLUSTER_M:2}")) == 1


# ---- the kernel on the CPU -------------------------------------------------------------------------
def operands(rng, m, n, k):
    """Block-scaled operands as gemmlab.fp8 makes them for measure.fp8_scaling=block, from FP32
    values whose magnitude changes by up to 2^12 from block to block (A per row and k-block, B per
    128 x 128), so that any scale taken from the wrong block is far off. Returns (A e4m3 m x k,
    B e4m3 stored n x k, the scales (gemmlab.fp8.Scales), A and B dequantized in FP64 (logical))."""
    import ml_dtypes
    import numpy as np

    from gemmlab import fp8

    kb = -(-k // SCALE_BLOCK)
    grid = lambda rows, cols: np.exp2(rng.integers(-6, 7, size=(rows, cols))).astype(np.float32)  # noqa: E731
    a32 = rng.standard_normal((m, k), dtype=np.float32) * fp8.expand(np, grid(m, kb), (1, SCALE_BLOCK), (m, k))
    b32 = rng.standard_normal((k, n), dtype=np.float32) * fp8.expand(
        np, grid(kb, -(-n // SCALE_BLOCK)), (SCALE_BLOCK, SCALE_BLOCK), (k, n))
    sc = fp8.scales_for(np, "block", a32, b32)
    qa, qb = (x.astype(ml_dtypes.float8_e4m3fn) for x in fp8.quantize_operands(np, sc, a32, b32))
    a64, b64 = sc.dequantize(np, qa, qb)
    return qa, np.ascontiguousarray(qb.T), sc, a64, b64


def emulate(point, folder, qa, qb, sa, sb, sm_count=EMU_SMS, source=None, laid_out=False, launches=1,
            reverse=False):
    """C (float64) of the stage's emulated launch at ``point`` on A (m x k) and B stored (n x k), with
    the scale grids ``sa`` (m, kb) and ``sb`` (kb, nb), handed over in the layouts the launcher gives
    them (cuBLASLt's; ``laid_out``: the arrays as given; ``source``: another copy of the kernel), and the
    zeroed workspace the launcher gives (cuda.workspace_bytes). ``launches``: the grid run that many times
    on the same workspace (C poisoned before each: a kernel that leaves its counters dirty fails);
    ``reverse``: the blocks run last to first (split-K's other arrival order)."""
    import numpy as np
    from test_cuda_kernels import emulator
    from test_hopper_emulation import emu_maps_args, run_hopper_emulation

    from gemmlab import fp8
    from gemmlab.backends.cuda_kernels import build_for, launch_shape

    if not laid_out:
        sa, sb = (fp8.cublaslt_scale_layout(g, "block") for g in (sa, sb))

    b = build_for(point)
    if source is not None:
        b = dataclasses.replace(b, source=source)
    args = ("a.data(), b.data(), c.data(), M, N, K, " + emu_maps_args(point, b) + ", "
            "gemm_host::emu_scale_array(0), gemm_host::emu_scale_array(1), gemm_host::emu_workspace()")
    exe = emulator(b, str(folder.parent), args)
    np.ascontiguousarray(sa, np.float32).tofile(folder / "sa.bin")
    np.ascontiguousarray(sb, np.float32).tofile(folder / "sb.bin")
    env = {"GEMMLAB_EMU_SCALE_FILES": f"{folder / 'sa.bin'};{folder / 'sb.bin'}",
           "GEMMLAB_EMU_WORKSPACE_BYTES": str(launch_shape(point, sm_count=sm_count).workspace_bytes),
           "GEMMLAB_EMU_LAUNCHES": str(launches)}
    if reverse:
        env["GEMMLAB_EMU_REVERSE_BLOCKS"] = "1"
    return run_hopper_emulation(point, exe, folder, qa.view(np.uint8), qb.view(np.uint8), sm_count, env)


def verdict(point, c, a64, b64):
    import numpy as np

    from gemmlab.measure import check

    assert not np.isnan(c).any(), f"{np.isnan(c).sum()} elements of C never written"
    return check.Reference.gemm(np, a64, b64, check.model_of(point), point.tolerance, point.out_dtype).verify(c)


# Every edge, for 128 x 128 tiles on 2 CTAs (each walks several tiles: ring slots and phases carry over;
# the tile width by waves on the 2 emulated SMs is 128 at every one):
EMULATED_SHAPES = [
    (200, 264, 1040),  # 2 x 3 tiles, both edges partial (N: 8 columns, a B scale block of 8 rows); 9 k-blocks,
                       # more than the 6 stages, the last of 16 (zero-filled, its own scale), odd: one peeled step
    (130, 128, 512),  # 2 x 1 tiles, the second 2 rows (its second consumer has none); 4 k-blocks: loop + two peeled
    (64, 136, 256),  # M = 64 (half a tile); 2 k-blocks: the two peeled steps alone
    (1, 8, 128),  # one row, 8 columns, K = one scale block (one tile of either width: 128, a tile busies half the 2 SMs)
]
# Other configurations run the first shape only: the builds are most of the time. Clusters (CLUSTER_M 2): the driver
# runs a cluster's two blocks together (GEMMLAB_EMU_CLUSTER, from the point's CLUSTER_M); on the H200 too
# (tests/test_gpu_hopper_fp8_block.py).
EMULATED_CONFIGS = ["{}", "{PROMOTE_OVERLAP:1}", "{SCALE_SMEM:0,STAGES:6,PROMOTE_OVERLAP:1}",
                    "{BM:64,BN:64,EPI_TMA:0,STAGES:2}", "{BM:64,STAGES:3,SCALE_COPY_FIRST:1}", "{SCALE_SMEM:1,BM:64,STAGES:2}",
                    "{SCALE_SMEM:0,STAGES:6,PROMOTE_OVERLAP:1,SCALE_AHEAD:2}",
                    "{SCALE_SMEM:1,SCALE_WARPS:3,PROMOTE_OVERLAP:1}", "{SCALE_SMEM:1,STAGES:2,SCALE_WARPS:2}",
                    "{SCALE_SMEM:3}", "{SCALE_SMEM:3,BM:64,STAGES:3,SCALE_WARPS:2,PROMOTE_OVERLAP:1}",
                    "{WG_ORDER:1}", "{WG_ORDER:1,PROMOTE_OVERLAP:1,STAGES:2}",
                    "{SCALE_READ:0}", "{SCALE_READ:2,BM:64,STAGES:3}", "{SCALE_READ:2}",
                    "{SCALE_B_TILE:1,STAGES:2}", "{SCALE_B_TILE:1,STAGES:3,SCALE_READ:0,BM:64}",
                    "{SCALE_B_TILE:1,STAGES:2,PROMOTE_OVERLAP:1}",
                    # 128 x 192 tiles across two of B's scale blocks (at 200 x 264: the first tile from a block
                    # boundary, the second 64 past one, its last 8 columns in n-block 2; at 130 x 128 and 1 x 8
                    # the second n-block is past N and the copy reads the last one again), and with one consumer
                    "{BN:192,STAGES:4}", "{BN:192,BM:64,STAGES:3,EPI_TMA:0}",
                    # the defaults at 128 wide where the waves on 2 SMs take 192 (200 x 264)
                    "{BN:128}",
                    # 128 x 160 (at 200 x 264: the first tile's columns split 128 + 32, the second's 96 + 64,
                    # its last 8 columns in n-block 2; 128 columns by TMA store, 32 from registers), all from registers
                    "{BN:160}", "{BN:160,EPI_TMA:0}",
                    # three consumer warpgroups (192 x 128 tiles; at 200 x 264 the second tile row's 8 rows in
                    # its first consumer, the other two past M), the registers the launch's 512 threads allow
                    "{BM:192,BN:128,CONSUMER_REGS:160,PRODUCER_REGS:24,STAGES:4}",
                    # the defaults up to session23 (each k-block's scales read after its own slot's wait, A's
                    # descriptors per thread), at 128 and 192 wide
                    "{SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0}", "{SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0,BN:192,STAGES:4}",
                    # the descriptors of each k32 step built from its address (DESC_STEP 0: up to session23e)
                    "{DESC_STEP:0}", "{DESC_STEP:1,BN:192,STAGES:4}",
                    # 128 x 256 in two halves (at 200 x 264: one tile column, its second half's columns 128-255 past
                    # N but 8, B's second n-block the last one's again where past N)
                    "{BN:256}", "{BN:256,SCALE_READ:1}",
                    # C staged one box a round (EPI_BOXES 1; 2 rounds at 128, 3 at 192, 4 at 256; BN 160: 2 and the
                    # registers' 32 columns), which makes room for a stage more
                    "{EPI_BOXES:1,STAGES:6}", "{BN:192,EPI_BOXES:1,STAGES:5}", "{BN:256,EPI_BOXES:1}", "{BN:160,EPI_BOXES:1}",
                    # 2-CTA clusters, B's tile multicast in halves (the driver runs a cluster's two blocks together): at
                    # 200 x 264 one cluster tile row (the second CTA's tile 72 rows), at 130 x 128 the second CTA's 2 rows,
                    # at 64 x 136 and 1 x 8 the second CTA wholly past M
                    "{CLUSTER_M:2}", "{CLUSTER_M:2,BN:64}", "{BN:256,CLUSTER_M:2}", "{CLUSTER_M:2,BM:64,CONSUMER_REGS:240}",
                    "{BN:256,CLUSTER_M:2,EPI_BOXES:1}",
                    # the tensor maps by value (__grid_constant__ parameters), at 128 wide and at 256 with boxes
                    "{MAP_PARAMS:1}", "{BN:256,EPI_BOXES:1,MAP_PARAMS:1}"]
# ... and these every shape: the defaults, the overlapped promotion, the consumers' own loads, cp.async, BN 192
# and 128
EMULATED_EVERY_SHAPE = [*EMULATED_CONFIGS[:3], "{SCALE_SMEM:3}", "{BN:192,STAGES:4}", "{BN:128}", "{BN:160}",
                        "{SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0}", "{SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0,BN:192,STAGES:4}", "{DESC_STEP:0}",
                        "{DESC_STEP:1,BN:192,STAGES:4}", "{BN:256}", "{BN:256,SCALE_READ:1}", "{BN:256,EPI_BOXES:1}",
                        "{EPI_BOXES:1,STAGES:6}", "{CLUSTER_M:2}"]


# Stage 15's techniques measured and left off (the YAML's defines: the promotion overlapped, the scales' other copies,
# readers and orders, per-thread descriptors, direct stores, clusters, the maps by value), each define at a value
# other than its default: a set with some runs where it is the first of its list with exactly those values, every
# run; the others (the same techniques with other tiles, stages or splits) where GEMMLAB_EVERY_CONFIG=1
OFF = ("PROMOTE_OVERLAP", "SCALE_SMEM", "SCALE_COPY_FIRST", "SCALE_WARPS", "SCALE_AHEAD", "WG_ORDER", "SCALE_B_TILE",
       "SCALE_READ", "UNIFORM_A", "DESC_STEP", "EPI_TMA", "CLUSTER_M", "MAP_PARAMS")


@functools.lru_cache(maxsize=None)
def off_techniques(defines: str) -> frozenset:
    """The define set's (define, value) pairs of OFF that differ from the YAML's defaults."""
    from gemmlab.bench.decode_trace import parse_defines
    from gemmlab.config import load_variant

    default = load_variant(VARIANT).cuda.defines
    return frozenset((k, v) for k, v in parse_defines(defines).items() if k in OFF and v != default[k])


def after_the_first(rows):
    """configs()'s predicate over rows whose first value is a define set: the rows past the first with its techniques."""
    return past_the_first(rows, lambda d, *rest: off_techniques(d), lambda d, *rest: f"stage 15's {d}")


@pytest.mark.slow
@pytest.mark.parametrize("defines", configs(EMULATED_CONFIGS, after_the_first(EMULATED_CONFIGS)))
def test_block_scaled_product_on_the_cpu(defines, tmp_path_factory):
    import numpy as np

    pytest.importorskip("ml_dtypes")
    folder, rng = tmp_path_factory.mktemp("emu-fp8-block"), np.random.default_rng(15)
    for m, n, k in EMULATED_SHAPES if defines in EMULATED_EVERY_SHAPE else EMULATED_SHAPES[:1]:
        p = _emu_point(m, n, k, defines)
        assert p.skip_reason is None, p.skip_reason
        if "BN:" not in defines:  # by waves on the emulated SMs
            assert _bn(p) == waves_bn(m, n, EMU_SMS, p.expr_env()["BM"], wide=_wide(p), wide256=_wide256(p)), (defines, (m, n, k))
        qa, qb, sc, a64, b64 = operands(rng, m, n, k)
        res = verdict(p, emulate(p, folder, qa, qb, sc.a, sc.b), a64, b64)
        assert res.passed, f"{defines} at {m}x{n}x{k}: {res.failure()} (elem_max {res.elem_max:.3g})"
        assert res.elem_max < 0.5, f"{defines} at {m}x{n}x{k}: error {res.elem_max:.2f} of the bound"


@pytest.mark.slow
def test_the_check_fails_a_kernel_that_scales_per_tile_or_reads_the_wrong_row(tmp_path_factory):
    """Negative controls: (1) the kernel patched to take every k-block's scales from the tile's first
    k-block (scales per tile, not per k-block), where the producer copies them (bulk copy, cp.async) and
    where the consumers load them; the right kernel handed (2) A's scales with the rows
    in another order, (3) B's grid in its row-major order instead of cuBLASLt's n-block-major layout. Each
    fails element-wise; the right kernel on the same shape passed above."""
    import numpy as np

    pytest.importorskip("ml_dtypes")
    from gemmlab import fp8
    from gemmlab.backends.cuda_kernels import build_for

    folder, rng = tmp_path_factory.mktemp("emu-fp8-block-wrong"), np.random.default_rng(16)
    m, n, k = EMULATED_SHAPES[0]
    p = _emu_point(m, n, k)
    qa, qb, sc, a64, b64 = operands(rng, m, n, k)
    text = build_for(p).source.read_text()
    # (1) every k-block scaled by the tile's first k-block's scales: in the producer's bulk copy (the
    # defaults, SCALE_SMEM 2) and in the consumers' own loads (SCALE_SMEM 0)
    for name, defines, marker, patch, places in (
            ("copy", "{}", "bulk_load_1d(sc, scale_a + static_cast<size_t>(kt) * ld_a",
             "bulk_load_1d(sc, scale_a + static_cast<size_t>(0) * ld_a", 1),
            ("cp_async", "{SCALE_SMEM:3}", "scale_a + static_cast<size_t>(kt) * ld_a + row4",
             "scale_a + static_cast<size_t>(0) * ld_a + row4", 1),
            ("loads", "{SCALE_SMEM:0,STAGES:6,PROMOTE_OVERLAP:1}", "int kb, int ld_a, int ld_b) {\n",
             "int kb, int ld_a, int ld_b) {\n  kb = 0;  // wrong on purpose: the tile's first scales\n", 1)):
        assert text.count(marker) == places, f"stage 15 changed: update the negative control's patch ({marker!r})"
        wrong = Path(folder) / f"wrong_per_tile_{name}.cu"
        wrong.write_text(text.replace(marker, patch))
        pw = _emu_point(m, n, k, defines)
        res = verdict(pw, emulate(pw, folder, qa, qb, sc.a, sc.b, source=wrong), a64, b64)
        assert not res.passed and res.elem_fail > 0, name
    res = verdict(p, emulate(p, folder, qa, qb, np.roll(sc.a, 1, axis=0), sc.b), a64, b64)
    assert not res.passed and res.elem_fail > 0
    # B's grid handed over in its own row-major (k-block, n-block) order, not n-block-major: the same 27
    # numbers in an array of the right size (3 n-blocks x 12), read as (n-block, k-block)
    assert sc.b.shape == (9, 3)
    right_a, right_b = (fp8.cublaslt_scale_layout(g, "block") for g in (sc.a, sc.b))
    flat = np.zeros(right_b.size, np.float32)
    flat[: sc.b.size] = sc.b.reshape(-1)
    res = verdict(p, emulate(p, folder, qa, qb, right_a, flat.reshape(right_b.shape), laid_out=True), a64, b64)
    assert not res.passed and res.elem_fail > 0


@pytest.mark.slow
def test_the_check_fails_a_192_wide_tile_that_takes_one_b_scale_block(tmp_path_factory):
    """Negative controls of BN 192 at 200 x 264 x 1040 (tile 0: columns 0-127 in B's n-block 0, 128-191 in 1;
    tile 1 from column 192: 192-255 in n-block 1, 256-263 in 2): the kernel patched so that (1) the columns
    64-127 of a tile always take the first n-block's scale (tile 1's 256-263 scaled by n-block 1's), (2) the
    second n-block's scales copied from the first's row (every column past a boundary scaled by the block
    before it). Each fails element-wise; the right kernel passed above."""
    import numpy as np

    pytest.importorskip("ml_dtypes")
    from gemmlab.backends.cuda_kernels import build_for

    folder, rng = tmp_path_factory.mktemp("emu-fp8-block-bn192-wrong"), np.random.default_rng(19)
    m, n, k = EMULATED_SHAPES[0]
    p = _emu_point(m, n, k, "{BN:192,STAGES:4}")
    assert _bn(p) == 192 and p.skip_reason is None
    qa, qb, sc, a64, b64 = operands(rng, m, n, k)
    text = build_for(p).source.read_text()
    for name, marker, patch in (
            ("middle", "const bool mid_second = kStraddle && n0 % kScaleBlock != 0;",
             "const bool mid_second = false;  // wrong on purpose"),
            ("second_row", "bulk_load_1d(sc + BM + 4, b_row1 + (kt & ~3)", "bulk_load_1d(sc + BM + 4, b_row + (kt & ~3)")):
        assert text.count(marker) == 1, f"stage 15 changed: update the negative control's patch ({marker!r})"
        wrong = Path(folder) / f"wrong_bn192_{name}.cu"
        wrong.write_text(text.replace(marker, patch))
        res = verdict(p, emulate(p, folder, qa, qb, sc.a, sc.b, source=wrong), a64, b64)
        assert not res.passed and res.elem_fail > 0, name
    # BN 160 (tile 1 from column 160: 160-255 in n-block 1, 256-263 in 2): the split taken at 128 columns always
    p160 = _emu_point(m, n, k, "{BN:160}")
    marker = "const int first_cols = kScaleBlock - n0 % kScaleBlock;"
    assert _bn(p160) == 160 and text.count(marker) == 1
    wrong = Path(folder) / "wrong_bn160_split.cu"
    wrong.write_text(text.replace(marker, "const int first_cols = kScaleBlock;  // wrong on purpose"))
    res = verdict(p160, emulate(p160, folder, qa, qb, sc.a, sc.b, source=wrong), a64, b64)
    assert not res.passed and res.elem_fail > 0, "bn160"


# ---- split-K (SPLIT_K) on the CPU ------------------------------------------------------------------------
# (defines, shapes, the split the point takes) on the 2 emulated SMs (2 CTAs: CTA 0 walks the even units, CTA
# 1 the odd, so a tile's splits meet across CTAs), each checked element-wise twice on one workspace (the
# counters must be back at zero for the second launch) and again with the blocks run last to first (another
# split arrives last at every tile), with the same bits. EMULATED_SHAPES with 2 and 4 splits: 9 k-blocks cut
# 4 + 5 / 2 + 2 + 2 + 3 (the partial last k-block in the last split), a second tile row whose second slice
# holds 8 rows (200 x 264) or none (130 x 128: that slice skips the workspace), N's last 8 columns, 2 k-blocks
# for 4 splits (64 x 136 x 256: the kernel and the grid take 2), one k-block (1 x 8 x 128: no split); at the
# first shape the other ways the consumers walk the k-blocks (the overlapped promotion, the scales loaded two
# ahead: clamped at the split's last) and the scales arrive (gathering warps, cp.async), BM 64 and BN 64; the
# YAML's rule splitting a lone tile (100 x 72 x 3088 on 2 SMs: 1 tile, 25 k-blocks, the last partial: S = 2,
# 12 k-blocks a split at least; all three tails).
SPLIT_CASES = [
    ("{SPLIT_K:2}", EMULATED_SHAPES, 2),
    ("{SPLIT_K:4}", EMULATED_SHAPES, 4),
    ("{SPLIT_K:2,PROMOTE_OVERLAP:1}", EMULATED_SHAPES[:1], 2),
    ("{SPLIT_K:3,SCALE_SMEM:0,STAGES:6,PROMOTE_OVERLAP:1,SCALE_AHEAD:2}", EMULATED_SHAPES[:1], 3),
    ("{SPLIT_K:2,SCALE_SMEM:1,STAGES:2,SCALE_WARPS:2}", EMULATED_SHAPES[:1], 2),
    ("{SPLIT_K:4,SCALE_SMEM:3}", EMULATED_SHAPES[:1], 4),
    ("{SPLIT_K:2,BM:64,BN:64,EPI_TMA:0,STAGES:2}", EMULATED_SHAPES[:1], 2),
    ("{SPLIT_K:2,BN:64}", EMULATED_SHAPES[:1], 2),
    ("{SPLIT_K:2,SCALE_B_TILE:1,STAGES:2}", EMULATED_SHAPES[:1], 2),
    ("{SPLIT_K:4,SCALE_B_TILE:1,STAGES:2}", EMULATED_SHAPES[:1], 4),
    ("{SPLIT_K:2,BN:192,STAGES:4}", EMULATED_SHAPES[:1], 2),
    ("{SPLIT_K:2,BN:160}", EMULATED_SHAPES[:1], 2),
    # three consumer warpgroups (192-row tiles): three counters a tile, each slice's partials its own
    ("{SPLIT_K:3,BM:192,BN:128,CONSUMER_REGS:160,PRODUCER_REGS:24,STAGES:4}", EMULATED_SHAPES[:1], 3),
    ("{}", [(100, 72, 3088)], 2),
    # 128 x 256 tiles split (its two-halves loop over a unit's k-blocks; 128 x 256 fp32 partials, 32 float4 a thread):
    # at 200 x 264 two tiles of 256 (the second's columns 8 of 256)
    ("{SPLIT_K:4,BN:256}", EMULATED_SHAPES[:1], 4),
    ("{SPLIT_K:2,BN:256,SPLIT_KEEP:1}", EMULATED_SHAPES[:1], 2),
    # the summing split keeping its own partial (test_split_keep_sums_in_the_same_order_on_the_cpu: the same bits)
    ("{SPLIT_K:2,SPLIT_KEEP:1}", EMULATED_SHAPES, 2),
    ("{SPLIT_K:2,SPLIT_KEEP:0}", EMULATED_SHAPES[:1], 2),  # split in 2 reading both partials (kept by rule since session27)
    ("{SPLIT_K:4,SPLIT_KEEP:1}", EMULATED_SHAPES[:1], 4),
    # split in 2-CTA clusters (the cluster's CTAs walk the same units, each its own tile's slices): one cluster on the 2
    # emulated SMs walks every unit; at 130 x 128 and 64 x 136 the second CTA's tile 2 rows or wholly past M
    ("{CLUSTER_M:2,SPLIT_K:2}", EMULATED_SHAPES, 2),
    ("{CLUSTER_M:2,SPLIT_K:4,BN:256,SPLIT_KEEP:1}", EMULATED_SHAPES[:1], 4),
    ("{CLUSTER_M:2,SPLIT_K:3,BN:64}", EMULATED_SHAPES[:1], 3),
]


@pytest.mark.slow
@pytest.mark.parametrize("defines,shapes,split", configs(SPLIT_CASES, after_the_first(SPLIT_CASES)),
                         ids=[c[0] for c in SPLIT_CASES])
def test_split_k_sums_the_splits_at_every_edge_on_the_cpu(defines, shapes, split, tmp_path_factory):
    import numpy as np

    pytest.importorskip("ml_dtypes")
    from gemmlab.backends.cuda_kernels import launch_shape

    folder, rng = tmp_path_factory.mktemp("emu-fp8-block-splitk"), np.random.default_rng(17)
    for i, (m, n, k) in enumerate(shapes):
        # the protocol's own properties (the counters left at zero for the next launch; C's bits whatever
        # split arrives last) once per split count, at the first shape (2 x 3 tiles, 9 k-blocks, both
        # edges): the fixup is the same code under every other define; the rest check the k-ranges walked
        protocol = i == 0 and defines in ("{SPLIT_K:2}", "{SPLIT_K:4}", "{CLUSTER_M:2,SPLIT_K:2}")
        p = _emu_point(m, n, k, defines)
        assert p.skip_reason is None, p.skip_reason
        assert _split(p) == split, (defines, (m, n, k))
        bm, bn = p.expr_env()["BM"], _bn(p)
        if "BN:" not in defines:
            assert bn == waves_bn(m, n, EMU_SMS, bm, split, _wide(p), _wide256(p)), (defines, (m, n, k))
        taken = min(split, -(-k // 128))  # the splits the kernel takes: at most the k-blocks
        s = launch_shape(p, sm_count=EMU_SMS)
        rows = -(-m // (2 * bm)) * 2 if "CLUSTER_M:2" in defines else -(-m // bm)  # clusters: cdiv(m, 2 BM) x 2 CTA rows
        assert s.grid == (min(EMU_SMS, rows * -(-n // bn) * taken), 1, 1), (defines, (m, n, k), s.grid)
        qa, qb, sc, a64, b64 = operands(rng, m, n, k)
        c = emulate(p, folder, qa, qb, sc.a, sc.b, launches=2 if protocol else 1)
        res = verdict(p, c, a64, b64)
        assert res.passed, f"{defines} at {m}x{n}x{k}: {res.failure()} (elem_max {res.elem_max:.3g})"
        assert res.elem_max < 0.5, f"{defines} at {m}x{n}x{k}: error {res.elem_max:.2f} of the bound"
        if protocol:  # deterministic: the partials summed in split order, whichever split came last
            assert taken > 1
            reverse = emulate(p, folder, qa, qb, sc.a, sc.b, reverse=True)
            assert np.array_equal(c, reverse), f"{defines} at {m}x{n}x{k}: C depends on the arrival order"


@pytest.mark.slow
@pytest.mark.parametrize("split,width", [(2, 128), (4, 128), (4, 256)])
def test_split_keep_sums_in_the_same_order_on_the_cpu(split, width, tmp_path_factory):
    """SPLIT_KEEP 1 (the summing split adds its own partial from its registers where the order allows: it is split 0
    or 1) sums ((p0 + p1) + p2) + ... as SPLIT_KEEP 0 does: C has the same bits as the kernel that reads every
    partial back, whichever split arrives last (the blocks run first to last and last to first), at 200 x 264 x 1040
    (9 k-blocks: 4 + 5 or 2 + 2 + 2 + 3). With 4 splits the operands make the order show in C's bf16 bits: k-blocks
    2-3 are k-blocks 0-1 with B negated and all four scaled by 2^16, so p1 = -p0 exactly and p0 + p1 = 0, while a
    sum that adds p2 to p0 first loses p2's low bits. Negative control: split 2 keeping its own too ((p2 + p0) + p1
    + p3) gives other bits in the arrival order where split 2 sums."""
    import numpy as np

    pytest.importorskip("ml_dtypes")
    from gemmlab.backends.cuda_kernels import build_for

    folder, rng = tmp_path_factory.mktemp("emu-fp8-block-keep"), np.random.default_rng(19)
    m, n, k = EMULATED_SHAPES[0]
    qa, qb, sc, a64, b64 = operands(rng, m, n, k)
    if split == 4:  # splits 0 and 1 (k-blocks 0-1, 2-3) cancel exactly, 2^16 x larger than splits 2 and 3
        qa[:, 256:512], qb[:, 256:512] = qa[:, :256], -qb[:, :256]
        sc = dataclasses.replace(sc, a=sc.a.copy(), b=sc.b.copy())
        sc.a[:, 2:4], sc.b[2:4] = sc.a[:, :2], sc.b[:2]
        sc.a[:, :4] *= np.float32(2.0 ** 16)
        a64, b64 = sc.dequantize(np, qa, np.ascontiguousarray(qb.T))
    base = _emu_point(m, n, k, f"{{SPLIT_K:{split},BN:{width},SPLIT_KEEP:0}}")
    keep = _emu_point(m, n, k, f"{{SPLIT_K:{split},BN:{width},SPLIT_KEEP:1}}")
    assert _split(base) == _split(keep) == split and _bn(keep) == width
    c = emulate(base, folder, qa, qb, sc.a, sc.b)
    assert verdict(base, c, a64, b64).passed
    # the emulation runs a block's units before the next block's: on 2 SMs the last split to arrive is the last
    # block's last (forward: split S - 1, reverse: split S - 2), on `split` SMs each block holds one split of a tile
    # (reverse: split 0 arrives last and keeps its own)
    for sms in sorted({EMU_SMS, split}):
        for reverse in (False, True):
            got = emulate(keep, folder, qa, qb, sc.a, sc.b, sm_count=sms, launches=2, reverse=reverse)
            assert np.array_equal(got, c), f"SPLIT_KEEP 1 (on {sms} SMs, reverse={reverse}) sums in another order"
    if split == 4 and width == 128:
        text = build_for(keep).source.read_text()
        marker = "const bool keep = split <= 1;"
        assert text.count(marker) == 1, f"stage 15 changed: update the negative control's patch ({marker!r})"
        wrong = Path(folder) / "wrong_keep_reorders.cu"
        # split 2 keeps its own as well and starts the loop past it: (p2 + p0) + p1 + p3
        wrong.write_text(text.replace(marker, "const bool keep = split <= 2;").replace(
            "s = keep ? 1 - split : 1;", "s = keep ? (split == 2 ? 0 : 1 - split) : 1;"))
        outs = [emulate(keep, folder, qa, qb, sc.a, sc.b, source=wrong, reverse=r) for r in (False, True)]
        assert not all(np.array_equal(o, c) for o in outs), "a reordered sum kept SPLIT_KEEP 0's bits"


@pytest.mark.slow
def test_clusters_split_with_the_same_bits_whichever_split_arrives_last(tmp_path_factory):
    """{CLUSTER_M:2,SPLIT_K:2} on 4 emulated SMs (two clusters, a tile's two splits on different clusters), the blocks run
    first to last and last to first: right at every edge, twice on one workspace, with the same bits either way."""
    import numpy as np

    pytest.importorskip("ml_dtypes")
    folder, rng = tmp_path_factory.mktemp("emu-fp8-block-cluster-split"), np.random.default_rng(29)
    for m, n, k in EMULATED_SHAPES[:2]:
        p = _point(m, n, k, "{CLUSTER_M:2,SPLIT_K:2}", extra=("device.sm_count=4",))
        qa, qb, sc, a64, b64 = operands(rng, m, n, k)
        c = emulate(p, folder, qa, qb, sc.a, sc.b, sm_count=4, launches=2)
        res = verdict(p, c, a64, b64)
        assert res.passed, f"at {m}x{n}x{k}: {res.failure()}"
        assert np.array_equal(c, emulate(p, folder, qa, qb, sc.a, sc.b, sm_count=4, reverse=True))


@pytest.mark.slow
def test_the_emulated_clusters_fail_a_cta_that_multicasts_into_the_wrong_half_or_releases_its_own_slots_alone(
        tmp_path_factory):
    """Negative controls of the clusters' emulation (the driver runs a cluster's two blocks together): stage 15 patched
    so that (1) each CTA multicasts its half of B's tile into the slot's first half (the second half keeps what the
    slot held: the check fails element-wise), (2) a consumer releases a slot to its own CTA only (the peer's producer
    waits for an arrival that never comes: the driver names the deadlock, where the GPU would hang)."""
    import numpy as np

    pytest.importorskip("ml_dtypes")
    from gemmlab.backends.cuda_kernels import build_for

    folder, rng = tmp_path_factory.mktemp("emu-fp8-block-cluster-wrong"), np.random.default_rng(31)
    m, n, k = EMULATED_SHAPES[0]
    p = _emu_point(m, n, k, "{CLUSTER_M:2}")
    qa, qb, sc, a64, b64 = operands(rng, m, n, k)
    assert verdict(p, emulate(p, folder, qa, qb, sc.a, sc.b), a64, b64).passed
    text = build_for(p).source.read_text()
    marker = "stage + kTileABytes + walk.rank * kBShareBytes"
    assert text.count(marker) == 1, f"stage 15 changed: update the negative control's patch ({marker!r})"
    wrong = Path(folder) / "wrong_multicast_half.cu"
    wrong.write_text(text.replace(marker, "stage + kTileABytes"))
    c = emulate(p, folder, qa, qb, sc.a, sc.b, source=wrong)
    assert np.isnan(c).any() or not verdict(p, c, a64, b64).passed, "B's second half never loaded went unnoticed"
    marker = "for (int r = 0; r < CLUSTER_M; ++r) mbar_arrive_remote(&empty[use % STAGES], static_cast<uint32_t>(r));"
    assert text.count(marker) == 1, f"stage 15 changed: update the negative control's patch ({marker!r})"
    wrong = Path(folder) / "wrong_release_own.cu"
    wrong.write_text(text.replace(marker, "mbar_arrive(&empty[use % STAGES]);"))
    with pytest.raises(AssertionError, match="deadlock"):
        emulate(p, folder, qa, qb, sc.a, sc.b, source=wrong)


@pytest.mark.slow
def test_the_check_fails_a_split_that_skips_its_last_k_block_or_leaves_its_counters(tmp_path_factory):
    """Negative controls of split-K (SPLIT_K 4 at 200 x 264 x 1040: splits of 2, 2, 2, 3 k-blocks): the kernel
    patched so that (1) the last split skips its last k-block (the partial one: K's last 16), (2) the first
    split skips its last (k-block 1 of 9: a whole one inside K): producer and consumers walk the same
    shortened range, so the ring stays consistent and only the sum is wrong: the check fails element-wise;
    (3) the last split does not reset its counter: the first launch is right, the second finds every count
    past its last arrival and no split writes C (left poisoned: the emulation's launches=2 sees it)."""
    import numpy as np

    pytest.importorskip("ml_dtypes")
    from gemmlab.backends.cuda_kernels import build_for

    folder, rng = tmp_path_factory.mktemp("emu-fp8-block-splitk-wrong"), np.random.default_rng(18)
    m, n, k = EMULATED_SHAPES[0]
    p = _emu_point(m, n, k, "{SPLIT_K:4}")
    qa, qb, sc, a64, b64 = operands(rng, m, n, k)
    text = build_for(p).source.read_text()
    marker = "(split + 1) * k_tiles / splits}"
    assert text.count(marker) == 1, f"stage 15 changed: update the negative control's patch ({marker!r})"
    for name, which in (("last", "splits - 1"), ("first", "0")):
        wrong = Path(folder) / f"wrong_split_skips_{name}.cu"
        wrong.write_text(text.replace(marker, f"(split + 1) * k_tiles / splits - (split == {which})}}"))
        res = verdict(p, emulate(p, folder, qa, qb, sc.a, sc.b, source=wrong), a64, b64)
        assert not res.passed and res.elem_fail > 0, name
    marker = "if (local_tid == 0) workspace[who] = 0;"
    assert text.count(marker) == 1, f"stage 15 changed: update the negative control's patch ({marker!r})"
    wrong = Path(folder) / "wrong_split_keeps_counters.cu"
    wrong.write_text(text.replace(marker, ""))
    assert verdict(p, emulate(p, folder, qa, qb, sc.a, sc.b, source=wrong), a64, b64).passed
    c = emulate(p, folder, qa, qb, sc.a, sc.b, source=wrong, launches=2)
    assert np.isnan(c).all(), "a second launch on counters left dirty still wrote C"


# SPLIT_TAIL (the last, partial wave's tiles split, the waves before whole): (defines, (m, n, k), SMs, the
# tail's tiles, its runs a tile). 6 tiles of 128 x 128 at 200 x 264 (both edges partial) on 4 SMs: one whole
# wave, a tail of 2 cut in 2 (17 k-blocks: 8 a run at least); on 5: a tail of 1 in 4 (33 k-blocks); BN 192 and
# 160 across their scale blocks; 3 tiles (one row of 100) on 8 SMs: the grid 6 (tiles x SPLIT_K), every tile the tail.
TAIL_CASES = [
    ("{SPLIT_K:4,SPLIT_TAIL:1,BN:128}", (200, 264, 2064), 4, 2, 2),
    ("{SPLIT_K:4,SPLIT_TAIL:1,BN:128}", (200, 264, 4112), 5, 1, 4),
    ("{SPLIT_K:4,SPLIT_TAIL:1,BN:192,STAGES:4}", (200, 400, 2064), 4, 2, 2),
    ("{SPLIT_K:4,SPLIT_TAIL:1,BN:160}", (200, 328, 4112), 5, 1, 4),
    ("{SPLIT_K:2,SPLIT_TAIL:1,BN:128}", (100, 264, 2064), 8, 3, 2),
    # the tail split as session22 measured it (each k-block's scales read after its own slot's wait)
    ("{SPLIT_K:4,SPLIT_TAIL:1,BN:192,STAGES:4,SCALE_READ:1,UNIFORM_A:0,DESC_STEP:0}", (200, 400, 2064), 4, 2, 2),
]


def _tail(tiles, grid, k_blocks, split_k):
    """The kernel's tail arithmetic in Python: (the tail's tiles, its runs a tile)."""
    tail = tiles % grid
    runs = min(split_k, grid // tail, k_blocks // 8) if tail else 1
    return (tail, runs) if runs > 1 else (0, 1)


@pytest.mark.slow
@pytest.mark.parametrize("defines,shape,sms,tail,runs", configs(TAIL_CASES, after_the_first(TAIL_CASES)),
                         ids=[f"{c[0]}-{c[2]}sms" for c in TAIL_CASES])
def test_split_tail_splits_the_last_wave_alone_on_the_cpu(defines, shape, sms, tail, runs, tmp_path_factory):
    """SPLIT_TAIL on the emulated device: the whole waves' tiles and the split tail's sum to the FP64 product of
    the dequantised operands at every edge, twice on one workspace (the tail's counters left at zero), and
    C's bits do not depend on which run of a tail tile arrives last. Negative control: the first tail tile's
    runs each write their own partial to C instead of handing it over: the check fails."""
    import numpy as np

    pytest.importorskip("ml_dtypes")
    from gemmlab.backends.cuda_kernels import build_for, launch_shape

    m, n, k = shape
    p = _point(m, n, k, defines, extra=(f"device.sm_count={sms}",))
    assert p.skip_reason is None, p.skip_reason
    bm, bn = p.expr_env()["BM"], _bn(p)
    tiles, k_blocks = -(-m // bm) * -(-n // bn), -(-k // 128)
    grid = launch_shape(p, sm_count=sms).grid[0]
    assert grid == min(sms, tiles * min(_split(p), k_blocks))
    assert _tail(tiles, grid, k_blocks, _split(p)) == (tail, runs), (tiles, grid)
    folder, rng = tmp_path_factory.mktemp("emu-fp8-block-tail"), np.random.default_rng(23)
    qa, qb, sc, a64, b64 = operands(rng, m, n, k)
    c = emulate(p, folder, qa, qb, sc.a, sc.b, sm_count=sms, launches=2)
    res = verdict(p, c, a64, b64)
    assert res.passed, f"{defines} at {shape} on {sms}: {res.failure()}"
    assert res.elem_max < 0.5, f"{defines} at {shape} on {sms}: error {res.elem_max:.2f} of the bound"
    assert np.array_equal(c, emulate(p, folder, qa, qb, sc.a, sc.b, sm_count=sms, reverse=True))
    if defines == TAIL_CASES[0][0] and sms == TAIL_CASES[0][2]:
        text = build_for(p).source.read_text()
        marker = "unit.tile_index >= whole_units) && m0"
        assert text.count(marker) == 1, f"stage 15 changed: update the negative control's patch ({marker!r})"
        wrong = Path(folder) / "wrong_tail_skips_its_sum.cu"
        wrong.write_text(text.replace(marker, "unit.tile_index > whole_units) && m0"))
        res = verdict(p, emulate(p, folder, qa, qb, sc.a, sc.b, sm_count=sms, source=wrong), a64, b64)
        assert not res.passed and res.elem_fail > 0, "a tail tile's runs each writing C passed the check"
