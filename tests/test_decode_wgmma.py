"""Stage 17 (decode_wgmma) without a GPU: it builds for sm_90a without spills at the token counts and
configurations its session sweep runs, its SASS streams the weights by TMA into wgmma (HGMMA bf16, QGMMA
e4m3: no conversions), and its own code runs on the CPU through the host emulation of TMA, mbarriers and
deferred wgmma (common/host_emulation/hopper_emu.h): C checked element-wise against FP64 at decode shapes
with tails (N past a tile, K past a 128-byte block, M not a multiple of 8), with tiles cut between CTAs
(stream-K over a small grid: up to twelve parts a tile), 2-CTA clusters, boxes wholly past K, launched twice on one workspace (the counters come
back to zero), and with the blocks run in reverse order: the split tiles' sums are the same bits whichever
part arrives last. Mutants (a part dropped from the sum, a counter left dirty, a part read from the wrong
slot, a slot released before its wgmma group retired) fail the same check."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import pytest
from conftest import compose_cfg, configs, session_folder
from test_decode_emulation import NEEDS_NVCC, _assert_right, decode_emulator, decode_point, emulate_decode, mutant

from gemmlab.backends import nvcc
from gemmlab.backends.cuda_kernels import build_for, launch_shape
from gemmlab.points import expand

VARIANT = "decode_wgmma"


def wgmma_point(m, n, k, precision="bf16", defines=None):
    return decode_point(m, n, k, precision, defines, variant=VARIANT)


@pytest.fixture(scope="module")
def cubin_cache(tmp_path_factory):
    return session_folder(tmp_path_factory.getbasetemp(), "cuda-cache")


# The session stage's define sets (SWEEP in .ci/h200-session.sh's decode_wgmma) at 1, 16 and 64 tokens, and the
# token counts between (NTOK 24, 40, 56: wrappers used by no other stage)
SWEEP = ["{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8}",
         "{CONSUMERS:1,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8}",
         "{CONSUMERS:0,MSUB:2,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8}",
         "{CONSUMERS:0,MSUB:1,STAGES:4,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8}",
         "{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:2,MAX_PARTS:8}",
         "{CONSUMERS:2,MSUB:2,STAGES:0,PRODUCER_WG:1,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8}",
         "{CONSUMERS:3,MSUB:1,STAGES:0,PRODUCER_WG:1,L2_HINT:-1,CLUSTER:1,KSPAN:1,MAX_PARTS:8}",
         "{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:0,CLUSTER:1,KSPAN:1,MAX_PARTS:8}",
         "{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:2,KSPAN:1,MAX_PARTS:8}",
         "{CONSUMERS:2,MSUB:2,STAGES:0,PRODUCER_WG:1,L2_HINT:-1,CLUSTER:2,KSPAN:1,MAX_PARTS:8}",
         "{CONSUMERS:0,MSUB:1,STAGES:0,PRODUCER_WG:0,L2_HINT:-1,CLUSTER:1,KSPAN:4,MAX_PARTS:8}"]
# DYN 1 (the dynamic tail): the default set and the sweep's sets that change its producer or consumers' registers
DYN_BUILDS = ["{DYN:1}", "{DYN:1,PRODUCER_WG:1,MSUB:2}", "{DYN:1,PRODUCER_WG:1,CONSUMERS:3}", "{DYN:1,KSPAN:4,L2_HINT:1}",
              "{DYN:1,CONSUMERS:1}", "{DYN:1,TRACE:1}", "{DYN:1,DYN_PUB:1}",
              "{DYN:1,DYN_PUB:1,PRODUCER_WG:1,CONSUMERS:3}", "{DYN:1,DYN_PUB:1,PRODUCER_WG:1,MSUB:2}"]
# The defaults build at every token count (the token count's own code paths); a technique's defines at 64 tokens (NTOK
# 64: the most accumulator registers, where a spill shows first), and at 1 too where the set has the producer warpgroup
# (setmaxnreg's split of the launch's registers); the deeper rings at 1, 16 and 64, whose stage count changes with
# the tokens. test_the_gpu_tests_define_sets_resolve_to_builds_the_kernel_accepts resolves every GPU test's set at its
# own shapes against the static_asserts. Building each technique at 16 too was 62 of the CPU suite's ~480 nvcc builds
# (session 45), at 1 another ~40 (session 51: the suite at 13:52-15:30 on CI's two cores, its limit 15)


def tech_m(defines: str) -> Tuple[int, ...]:
    return (1, 64) if "PRODUCER_WG:1" in defines else (64,)


BUILDS = ([(p, m, None) for p in ("bf16", "fp8") for m in (1, 16, 64)]
          + [(p, m, d) for p in ("bf16", "fp8") for d in SWEEP[1:] for m in tech_m(d)]
          + [(p, m, None) for p in ("bf16", "fp8") for m in (20, 40, 56)]
          # two slices a consumer without the producer warpgroup, at the token counts where the YAML still allows it
          + [(p, m, "{MSUB:2}") for p in ("bf16", "fp8") for m in (48, 56)]
          # DYN 1 (off: measured slower than the static split)
          + [(p, m, d) for p in ("bf16", "fp8") for d in DYN_BUILDS for m in tech_m(d)]
          # the L2 policies (the YAML's rule gives L2_HINT 0 at 6144 x 4096, 1 from 64 MiB of weights), with clusters
          + [(p, 64, d) for p in ("bf16", "fp8") for d in ("{L2_HINT:1}", "{CLUSTER:2,L2_HINT:1,STAGES:8}")]
          # the tensor maps in the device buffer (the defaults pass them by value), with and without clusters; the
          # counters' prefetch
          + [(p, 64, d) for p in ("bf16", "fp8") for d in ("{MAP_PARAMS:0}", "{MAP_PARAMS:0,CLUSTER:2}",
                                                           "{WS_PREFETCH:1}", "{WS_PREFETCH:1,CLUSTER:2}")]
          # a deeper ring than 8 where 227 KB hold it (12 at 1 and 16 tokens; 64 tokens fit 8: the same build), and
          # 64-row tiles unsplit with a ring of 16 (decode_deep's candidates)
          + [(p, m, d) for p in ("bf16", "fp8") for m in (1, 16, 64) for d in ("{STAGES:12}",
                                                                            "{CONSUMERS:1,MAX_PARTS:1,STAGES:16}")]
          # a split tile summed by its first part (FIXED_SUM; 2: the others' partials loaded before its piece ends),
          # with clusters and the producer warpgroup
          + [(p, m, "{FIXED_SUM:%d%s}" % (f, d)) for p in ("bf16", "fp8") for f in (1, 2)
             for d in ("", ",CLUSTER:2", ",PRODUCER_WG:1,CONSUMERS:3") for m in tech_m(d)])


def left_off(precision: str, m: int, defines: str | None) -> str | None:
    """The two techniques measured and left off (DYN 1: slower than the static split; FIXED_SUM 2: -1.3 to +1.9% on an
    H100, the YAML's header): their plain sets build in every run, their combinations where GEMMLAB_EVERY_CONFIG=1."""
    for plain in ("{DYN:1}", "{FIXED_SUM:2}"):
        if defines and plain[1:-1] in defines and defines != plain:
            return f"stage 17's {defines}"
    return None


@NEEDS_NVCC
@pytest.mark.slow
@pytest.mark.parametrize("precision,m,defines", configs(BUILDS, left_off),
                         ids=[f"{p}-m{m}-{d or 'default'}" for p, m, d in BUILDS])
def test_builds_for_sm90a_without_spills(precision, m, defines, cubin_cache):
    p = wgmma_point(m, 6144, 4096, precision, defines)
    b = build_for(p)
    cubin = nvcc.compile_cubin(b.source, b.flags, cubin_cache)
    report = cubin.report(b.entry)
    assert report.spill_bytes == 0 and report.stack_frame_bytes == 0, (b.kernel_name, report)
    # no warning from nvcc or ptxas: C7520 / C7510 (wgmma serialised behind a warpgroup arrive on a path ptxas takes
    # for divergent, as the tail's box count was until it was told warp-uniform) is a slow path
    log = cubin.log_path.read_text()
    assert "warning" not in log.lower() and "Performance Loss" not in log, (b.kernel_name, log)
    threads = launch_shape(p, sm_count=132).block[0]
    if dict(b.defines)["PRODUCER_WG"]:
        # setmaxnreg moves registers inside the CTA's launch allocation: the kernel must be launched with every
        # register the block size allows (65536 / threads, down to 8), which the consumers' count assumes (fewer,
        # and setmaxnreg.inc would wait for registers that never come: stage 15's hang, session14e)
        assert report.registers == 65536 // threads // 8 * 8, (b.kernel_name, report)


@NEEDS_NVCC
@pytest.mark.slow
def test_sass_streams_weights_by_tma_into_wgmma(cubin_cache):
    """What the header claims, in the machine code: TMA loads (UTMALDG), wgmma of the stored types (HGMMA
    bf16, QGMMA e4m3: no F2FP conversions of the operands), a counter for split tiles, 16-byte stores of C,
    nothing in local memory."""
    from test_hopper_kernels import opcodes, sass

    for prec in ("bf16", "fp8"):
        for m in (1, 64):
            b = build_for(wgmma_point(m, 6144, 4096, prec))
            o = opcodes(sass(nvcc.compile_cubin(b.source, b.flags, cubin_cache).path))
            assert not [x for x in o if x.startswith(("LDL", "STL"))], f"{prec} touches local memory"
            assert any(x.startswith("UTMALDG") for x in o), f"{prec}: no TMA loads"
            n = 8 * ((m + 7) // 8)
            if prec == "bf16":
                assert any(x.startswith(f"HGMMA.64x{n}x16.F32.BF16") for x in o), (prec, m, sorted(set(o)))
            else:
                assert any(x.startswith(f"QGMMA.64x{n}x32.F32.E4M3.E4M3") for x in o), (prec, m, sorted(set(o)))
                assert not any(x.startswith("F2FP.F16.E4M3") for x in o), "fp8 operands converted"
            # the split tiles' counter: FIXED_SUM 1 counts with a release reduction (RED), FIXED_SUM 0 with an atomic
            assert any(x.startswith(("ATOMG", "RED")) for x in o), f"{prec}: no counter for split tiles"
            assert any(x.startswith("STG.E.128") for x in o), f"{prec}: C not stored 16 bytes at a time"
    # one wgmma group a stage: every HGMMA of the stage's boxes issued together, the group's last one waited on
    # (gsb0); no dummy group (a branch among the MMAs made ptxas commit an empty wgmma on RZ every stage)
    for kspan in (1, 2, 4):
        b = build_for(wgmma_point(64, 6144, 4096, "bf16", f"{{KSPAN:{kspan}}}"))
        mma = [x for x in sass(nvcc.compile_cubin(b.source, b.flags, cubin_cache).path).splitlines() if "GMMA" in x]
        assert len(mma) == 4 * kspan and sum("gsb0" in x for x in mma) == 1, (kspan, mma)
        assert not [x for x in mma if "gdesc[URZ]" in x], (kspan, mma)


def test_launch_rules_on_the_h200():
    p = wgmma_point(1, 6144, 4096)
    s = launch_shape(p, sm_count=132)
    # two consumer warpgroups and the producer warp; tokens rounded up to 8; 4 stages below 192 MiB of weights (8
    # from there) where they fit: 4 x (128 + 8) x 128 bytes + two staging tiles of 8 x 144 bytes + alignment + barriers
    # (L2_HINT: 0 below 64 MiB of weights, 1 from there; as given where an override names it)
    assert dict(build_for(p).point_defines) == {"NTOK": 8, "CONSUMERS": 2, "MAX_PARTS": 8, "CLUSTER": 1, "L2_HINT": 0,
                                                "FIXED_SUM": 1, "MSUB": 1, "STAGES": 4, "DYN_K0": -1}
    # CONSUMERS 0: 64-row tiles past 16 tokens where 128-row tiles would be fewer than 32 (2112 rows: 17), else 128-row
    # tiles (4096 rows: 32); as given where an override names it; 2 with the producer warpgroup
    assert [dict(build_for(wgmma_point(m, n, 7168, "fp8", d)).point_defines)["CONSUMERS"]
            for m, n, d in [(1, 2112, None), (16, 2112, None), (17, 2112, None), (64, 2112, None), (64, 3968, None),
                            (64, 4096, None), (64, 2112, "{CONSUMERS:2}"), (1, 4096, "{CONSUMERS:1}"),
                            (64, 2112, "{CONSUMERS:3,PRODUCER_WG:1}"), (64, 2112, "{PRODUCER_WG:1,MSUB:2}")]] \
        == [2, 2, 1, 1, 1, 2, 2, 1, 3, 2]
    assert launch_shape(wgmma_point(64, 2112, 7168, "fp8"), sm_count=132).block == (160, 1, 1)
    # FIXED_SUM (1 by default): as given with the static split, 0 with the dynamic tail (the last part to arrive sums)
    assert [dict(build_for(wgmma_point(1, 6144, 4096, "bf16", d)).point_defines)["FIXED_SUM"]
            for d in (None, "{FIXED_SUM:2}", "{FIXED_SUM:0}", "{DYN:1}", "{DYN:1,FIXED_SUM:2}")] == [1, 2, 0, 0, 0]
    # UNSPLIT 1: in fp8 at 1-16 tokens and in both precisions past 16 (session52), where the 64-row tiles number
    # between two thirds of the SMs and all of them (70B mlp_down 8192 rows: 128; 8B qkv 6144: 96), 64-row tiles, one
    # unit a tile and a ring of 16, as many as fit past 16 tokens (13 at 64); not in bf16 at 1-16 tokens, with fewer
    # tiles (4096 rows: 64) or more (10240: 160), nor with the tiles' width given; the default since session40e
    # (None), 0 the rules before
    unsplit = [(1, 8192, 28672, "fp8", "{UNSPLIT:1}"), (16, 8192, 28672, "fp8", "{UNSPLIT:1}"),
               (1, 6144, 4096, "fp8", "{UNSPLIT:1}"), (1, 8192, 28672, "bf16", "{UNSPLIT:1}"),
               (64, 8192, 28672, "fp8", "{UNSPLIT:1}"), (64, 6144, 4096, "bf16", None),
               (16, 6144, 4096, "bf16", None), (64, 4096, 4096, "bf16", None), (1, 4096, 4096, "fp8", "{UNSPLIT:1}"),
               (1, 10240, 8192, "fp8", "{UNSPLIT:1}"), (1, 8192, 28672, "fp8", "{UNSPLIT:1,CONSUMERS:2}"),
               (1, 8192, 28672, "fp8", "{UNSPLIT:0}"), (64, 6144, 4096, "bf16", "{UNSPLIT:0}"),
               (1, 8192, 28672, "fp8", None)]
    got = []
    for m, n, k, prec, d in unsplit:
        p_u = wgmma_point(m, n, k, prec, d)
        pd_u = dict(build_for(p_u).point_defines)
        got.append((pd_u["CONSUMERS"], pd_u["MAX_PARTS"], pd_u["STAGES"], launch_shape(p_u, sm_count=132).grid[0]))
    assert got == [(1, 1, 16, 128), (1, 1, 16, 128), (1, 1, 16, 96), (2, 8, 8, 132), (1, 1, 13, 128), (1, 1, 13, 96),
                   (2, 8, 4, 132), (2, 8, 4, 132), (2, 8, 4, 132), (2, 8, 4, 132), (2, 8, 8, 132), (2, 8, 8, 132),
                   (2, 8, 4, 132), (1, 1, 16, 128)]
    assert [dict(build_for(wgmma_point(1, n, k, prec, d)).point_defines)["STAGES"]
            for n, k, prec, d in [(8192, 28672, "fp8", "{UNSPLIT:0}"), (8192, 28672, "bf16", "{STAGES:6}"),
                                  (10240, 8192, "bf16", None), (12288, 8192, "bf16", None)]] == [8, 6, 4, 8]
    # 64-row tiles past 16 tokens (the rule's pick under 32 tiles of 128: DeepSeek-V3 attn_qkv_a, 2112 rows, and the
    # router, 256) take 8 stages (session40f); 128-row tiles there, 64-row ones at 16 tokens, or STAGES given keep theirs
    assert [(dict(build_for(wgmma_point(m, n, 7168, prec, d)).point_defines)["CONSUMERS"],
             dict(build_for(wgmma_point(m, n, 7168, prec, d)).point_defines)["STAGES"])
            for m, n, prec, d in [(64, 2112, "bf16", None), (32, 256, "fp8", None), (48, 2112, "fp8", None),
                                  (64, 4096, "bf16", None), (16, 2112, "bf16", "{CONSUMERS:1}"),
                                  (64, 2112, "bf16", "{STAGES:4}")]] \
        == [(1, 8), (1, 8), (1, 8), (2, 4), (1, 4), (1, 4)]
    assert [dict(build_for(wgmma_point(1, n, k, prec, d)).point_defines)["L2_HINT"]
            for n, k, prec, d in [(4096, 8192, "bf16", None), (4096, 8192, "fp8", None), (8192, 8192, "fp8", None),
                                  (8192, 28672, "fp8", "{L2_HINT:0}"), (6144, 4096, "bf16", "{L2_HINT:1}")]] \
        == [1, 0, 1, 0, 1]
    assert s.grid == (132, 1, 1) and s.block == (288, 1, 1)
    assert s.smem_bytes == 4 * 136 * 128 + 2 * 8 * 144 + 1024 + 64 + 8
    # counters: 48 tiles x 2 consumers -> 384 bytes, to 256: 512; partials: 132 x 2 slots x 128 x 8 x 4 bytes
    assert s.workspace_bytes == 512 + 132 * 2 * 128 * 8 * 4
    p64 = wgmma_point(64, 8192, 28672, "fp8", "{CONSUMERS:2,MSUB:2,STAGES:16}")
    # MSUB 2 spills at 64 tokens (168 registers a thread with 288 threads): the point takes 1; the ring as deep
    # as fits in 227 KB
    d = dict(build_for(p64).point_defines)
    assert d["NTOK"] == 64 and d["MSUB"] == 1
    assert d["STAGES"] == (227 * 1024 - 2 * 64 * 144 - 1024 - 256) // (192 * 128)
    assert launch_shape(p64, sm_count=132).smem_bytes <= 227 * 1024
    # fewer k-blocks than SMs: no CTA without work; few tiles: at most MAX_PARTS (8) CTAs a tile (DeepSeek-V3's
    # router, 256 x 7168: 2 tiles, 16 CTAs), so the last part sums at most ~8 partials
    assert launch_shape(wgmma_point(1, 64, 256), sm_count=132).grid == (4, 1, 1)
    assert launch_shape(wgmma_point(1, 256, 7168), sm_count=132).grid == (16, 1, 1)
    assert launch_shape(wgmma_point(1, 256, 7168, defines="{MAX_PARTS:128}"), sm_count=132).grid == (132, 1, 1)
    # 40 tokens: NTOK 40; a cluster's CTAs load half the tokens' box each, in whole 8-row atoms: NTOK 16, 32, 48, 64
    # only; whole clusters on the SMs; M > 64 (skipped) still builds (NTOK 64)
    assert dict(build_for(wgmma_point(33, 6144, 4096)).point_defines)["NTOK"] == 40
    for m, cluster in ((1, 1), (16, 2), (33, 1), (64, 2)):
        assert dict(build_for(wgmma_point(m, 6144, 4096, defines="{CLUSTER:2}")).point_defines)["CLUSTER"] == cluster
    # (UNSPLIT 0: at 64 tokens 6144 rows are one unit a tile, 96 CTAs, whatever the SMs)
    assert launch_shape(wgmma_point(64, 6144, 4096, defines="{CLUSTER:2,UNSPLIT:0}"), sm_count=131).grid == (130, 1, 1)
    # four boxes along K of 256-row tiles leave room for one stage: skipped with the reason, not a failed build
    over = [f"variant={VARIANT}", "precision=bf16", "layouts=[nt]", "sizes.square=[]", "sizes.shapes=[[16,6144,4096]]",
            f"variant.{VARIANT}.cuda.defines={{KSPAN:4,MSUB:2,PRODUCER_WG:1}}"]
    (p,) = expand(compose_cfg(over))
    assert p.skip_reason and "two stages" in p.skip_reason, p.skip_reason


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_the_gpu_tests_define_sets_resolve_to_builds_the_kernel_accepts(precision):
    """Every define set of tests/test_gpu_decode.py at each of its shapes resolves (the YAML's point rules, 132 SMs as
    on the H100 and the H200) to defines its `requires` accept, so the GPU test's points are ok, not skipped. A rule
    that picks a build the kernel refuses showed on the GPU only as a failed build (session41: the UNSPLIT rule gave
    one consumer to {PRODUCER_WG:1,MSUB:2} at fp8 1 x 6144 x 4096, which needs two); the YAML now requires what the
    kernel's static_assert does, and this fails on the CPU."""
    from test_gpu_decode import SHAPES, STAGE17_DEFINES

    def skip_reason(m, n, k, defines):
        (p,) = decode_point(m, n, k, precision, defines, variant=VARIANT,
                            sizes=["sizes.square=[]", f"sizes.shapes=[[{m},{n},{k}]]"])
        return p.skip_reason

    expected_skip = lambda m, n, k: m > 64 or (k * (1 if precision == "fp8" else 2)) % 16 or n % 8  # noqa: E731
    refused = [(defines, (m, n, k), why) for defines in STAGE17_DEFINES for m, n, k in SHAPES
               if not expected_skip(m, n, k) and (why := skip_reason(m, n, k, defines))]
    assert not refused, refused
    # the YAML's requirement is the kernel's own condition (a changed kernel fails here first), and it bites: one
    # consumer beside the producer warpgroup (what the rule before session41 gave) is skipped with the reason
    src = (Path(__file__).resolve().parents[1] / "kernels" / "cuda" / "17_decode_wgmma.cu").read_text()
    assert "static_assert(PRODUCER_WG == 0 || (PRODUCER_WG == 1 && CONSUMERS >= 2)" in src
    why = skip_reason(1, 6144, 4096, "{PRODUCER_WG:1,MSUB:2,CONSUMERS:1}")
    assert why and "2-3 consumer warpgroups" in why, why


def test_unsupported_points_are_skipped_with_the_reason():
    over = [f"variant={VARIANT}", "precision=bf16", "layouts=[nt]", "sizes.square=[]"]
    for shape, words in (("[65,6144,4096]", "at most 64 tokens"), ("[1,6140,4096]", "N a multiple of 8"),
                         ("[1,6144,4092]", "16-byte row strides")):
        (p,) = expand(compose_cfg([*over, f"sizes.shapes=[{shape}]"]))
        assert p.skip_reason and words in p.skip_reason, (shape, p.skip_reason)
    from gemmlab.backends.cuda_kernels import CudaKernels

    (p,) = expand(compose_cfg([f"variant={VARIANT}", "precision=bf16", "layouts=[nn]", "sizes.square=[]",
                               "sizes.shapes=[[1,6144,4096]]"]))
    assert "declares layouts nt" in (CudaKernels.workload_reason(p) or ""), "layout nn would run"


def test_tensor_maps_by_value_are_one_element_arrays_of_their_bytes():
    """MAP_PARAMS 1's arguments: each encoded map a one-element NumPy array of a 128-byte void type (CuPy passes a
    one-element NumPy array by value: the parameter's bytes), holding the map's bytes unchanged; a map of another
    size is refused."""
    from gemmlab.gpu import tma

    maps = [bytes(range(128)), bytes(range(128, 256))]
    args = tma.by_value_args(maps)
    assert [a.size for a in args] == [1, 1] and all(a.dtype.itemsize == tma.TENSOR_MAP_BYTES for a in args)
    assert [a.tobytes() for a in args] == maps
    with pytest.raises(tma.TensorMapError, match="128 bytes, not 64"):
        tma.by_value_args([bytes(64)])


# ---- the host emulation ---------------------------------------------------------------------------------
def _emu_env(point, reverse: bool) -> dict:
    """The driver's settings for the stage at ``point``: its tensor maps (what the launcher resolves from the YAML),
    its clusters, the blocks' order."""
    from gemmlab.gpu import tma
    from test_hopper_kernels import _FakeArray

    m, n, k = point.m, point.n, point.k
    stored = "uint8" if point.precision == "fp8" else "bfloat16"  # as decode_operands stores them
    fake = {"A": _FakeArray(m, k, stored), "B": _FakeArray(n, k, stored), "C": _FakeArray(m, n, point.out_dtype)}
    specs = tma.resolve(point, fake, point.variant_cfg.cuda.tensor_maps)
    for spec in specs:
        tma.check(spec)
    return {"GEMMLAB_EMU_MAPS": ";".join(f"{s.operand},{s.rows},{s.cols},{s.row_stride_bytes},{s.box_rows},"
                                         f"{s.box_cols},{s.elem_bytes},{s.swizzle}" for s in specs),
            # the driver runs the blocks last to first where the variable is set at all (to "0" too): set only then
            **({"GEMMLAB_EMU_REVERSE_BLOCKS": "1"} if reverse else {}),
            # the kernel's clusters along x (CLUSTER: its __cluster_dims__), run together by the driver
            "GEMMLAB_EMU_CLUSTER": str(point.expr_env().get("CLUSTER", 1))}


def emulate_wgmma(point, exe: Path, folder: Path, rng, sm_count: int, launches: int = 2, reverse: bool = False,
                  together: bool = False, workspace_out: Optional[Path] = None):
    """test_decode_emulation.emulate_decode with the stage's tensor maps (what the launcher resolves from the YAML for
    the point), its clusters run together, and the blocks in reverse order if asked. ``together``: every block of the
    grid runs at once (one "cluster" of the whole grid for the driver: the CTAs' threads interleave, so DYN's units
    compete for the tickets; CLUSTER 1 only). ``workspace_out``: the workspace as the last launch left it, written
    there. FIXED_SUM 1 / 2 (the default): a split tile's first part waits for the others' count, and the driver runs
    the blocks one at a time, so first to last that wait would never end: such a grid runs together (CLUSTER 1), else
    last to first (every other part stored before its tile's first part runs)."""
    if point.expr_env().get("FIXED_SUM", 0) and not (reverse or together):
        together, reverse = point.expr_env().get("CLUSTER", 1) == 1, point.expr_env().get("CLUSTER", 1) != 1
    env = _emu_env(point, reverse)
    if together:
        assert point.expr_env().get("CLUSTER", 1) == 1, "together runs a grid of CLUSTER 1"
        env["GEMMLAB_EMU_CLUSTER"] = str(launch_shape(point, sm_count=sm_count).grid[0])
    if workspace_out is not None:
        env["GEMMLAB_EMU_WORKSPACE_OUT"] = str(workspace_out)
    return emulate_decode(point, exe, folder, rng, launches, sm_count, env)


def dyn_tickets(point, sm_count: int) -> Tuple[int, int]:
    """DYN 1: (the ticket counter's byte offset in the workspace, the tickets a launch takes: chunks + units, 0 where
    there is no tail), from the YAML's rules as the kernel reads them."""
    from gemmlab.bench import decode_trace as dt

    shape = launch_shape(point, sm_count=sm_count)
    env, let = point.expr_env(), dict(shape.let)
    unit_tiles = -(-point.n // let["BW"])  # CLUSTER 1 with DYN 1
    kb = -(-(-(-point.k * env["elem_bytes"] // 128)) // env["KSPAN"])
    k0 = min(env["DYN_K0"], kb)
    chunks = unit_tiles * -(-(kb - k0) // env["DYN_CK"])
    units = min(unit_tiles * kb, let["G"])
    # past the counters and partial slots (where TRACE's stamps begin), and those stamps to 256 bytes
    lay = dt.wgmma_trace_layout(let, env, point.n)
    offset = lay["offset"] + 256 * -(-(env["TRACE"] * lay["records"] * 8 * dt.WORDS) // 256)
    return offset, (chunks + units if chunks else 0)


# (m, n, k, sm_count): N = 136 is a tile and 8 rows (a tile of 128 weight rows; past 16 tokens the YAML's rule takes
# 64-row tiles at so few: two and 8 rows), 200 past a 64-row tile (CONSUMERS 1);
# K = 200 bf16 is 3 blocks of 128 bytes and 16 bytes, 208 fp8 one block and 80 bytes; 3-5 CTAs cut the tiles'
# k-blocks unevenly (a run that begins and ends inside one tile, a tile in three parts); (1, 64, 2048) over 7
# CTAs: one tile cut in seven; M = 13 and 33 are no multiple of 8 (the token box's rows past M read as zeros)
SHAPES = {
    "bf16": [(1, 136, 200, 3), (13, 264, 520, 5), (64, 136, 1000, 4), (33, 72, 256, 2), (1, 64, 2048, 7)],
    "fp8": [(1, 136, 208, 3), (16, 264, 1040, 5), (64, 136, 1008, 4), (33, 72, 512, 2), (1, 64, 4096, 7)],
}


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
@pytest.mark.parametrize("defines", ["{MAP_PARAMS:0}", "{MAP_PARAMS:0,CLUSTER:2}", "{WS_PREFETCH:1}"])
def test_tensor_maps_either_way_compute_x_wt_on_the_cpu(precision, defines, tmp_path_factory):
    """MAP_PARAMS 0: the tensor maps in the device buffer, its address the parameter (the defaults pass each map by
    value, which the other emulation tests run), with and without the tokens' multicast; the counters' prefetch."""
    folder = tmp_path_factory.mktemp(f"emu-dwg-maps-{precision}")
    rng = np.random.default_rng(23)
    for m, n, k, sms in SHAPES[precision][:3]:
        p = wgmma_point(m, n, k, precision, defines)
        c, res = emulate_wgmma(p, decode_emulator(p, folder.parent), folder, rng, sms)
        _assert_right(p, c, res, f"{defines}: ")


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_decode_wgmma_computes_x_wt_on_the_cpu(precision, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"emu-dwg-{precision}")
    rng = np.random.default_rng(17)
    # the defaults, and 128-row tiles past 16 tokens too (the YAML's rule gives 64-row tiles there at these few tiles)
    for (m, n, k, sms), d in [(s, None) for s in SHAPES[precision]] + [(s, "{CONSUMERS:2}") for s in SHAPES[precision]
                                                                        if s[0] > 16]:
        p = wgmma_point(m, n, k, precision, d)
        exe = decode_emulator(p, folder.parent)
        c, res = emulate_wgmma(p, exe, folder, rng, sms)
        _assert_right(p, c, res, f"{d}: " if d else "")


@pytest.mark.slow
# (the sweep's L2_HINT set is 0 everywhere since the YAML's rule, which gives 0 at these small shapes: 1 named here)
@pytest.mark.parametrize("precision,defines", [(p, d) for p in ("bf16", "fp8")
                                               for d in SWEEP[1:4] + SWEEP[5:7] + ["{L2_HINT:1}"] + SWEEP[8:]
                                               + ["{STAGES:12}", "{CONSUMERS:1,MAX_PARTS:1,STAGES:16}"]])
def test_decode_wgmma_sweep_configurations_on_the_cpu(precision, defines, tmp_path_factory):
    """One consumer (64-row tiles), two slices a consumer (256-row tiles), a ring of 4 that wraps more often, the
    producer warpgroup (its other 127 threads idle) with two slices a consumer or three consumers (192-row tiles), the
    L2 policies (the same bytes land), 2-CTA clusters (each CTA's half of the tokens multicast into both; the driver
    runs a cluster's blocks together), 2 and 4 boxes along K a stage (K = 520 bf16 / 1040 fp8: 9 boxes, the last
    k-block holds one), a ring of 12, and 64-row tiles with a ring of 16 and at most one unit a tile (the session's
    decode_deep candidates)."""
    folder = tmp_path_factory.mktemp("emu-dwg-sweep")
    rng = np.random.default_rng(5)
    for m, n, k, sms in SHAPES[precision][:2]:
        p = wgmma_point(m, n, k, precision, defines)
        c, res = emulate_wgmma(p, decode_emulator(p, folder.parent), folder, rng, sms)
        _assert_right(p, c, res, f"{defines}: ")


@pytest.mark.slow
def test_split_tiles_sum_to_the_same_bits_in_either_arrival_order(tmp_path_factory):
    """The last part sums every part in part order: the blocks run first to last and last to first give the
    same C, bit for bit, with a tile cut in seven."""
    folder = tmp_path_factory.mktemp("emu-dwg-order")
    p = wgmma_point(1, 64, 2048, "bf16", "{CONSUMERS:1}")
    exe = decode_emulator(p, folder.parent)
    c0, res0 = emulate_wgmma(p, exe, folder, np.random.default_rng(9), 7, launches=1)
    c1, res1 = emulate_wgmma(p, exe, folder, np.random.default_rng(9), 7, launches=1, reverse=True)
    _assert_right(p, c0, res0)
    _assert_right(p, c1, res1, "reversed: ")
    assert np.array_equal(c0, c1), "the split tiles' sums depend on which part arrived last"


def _mutant_launch(tmp_path_factory, name, old, new, launches=1, defines=None, shape=(1, 136, 200)):
    folder = tmp_path_factory.mktemp(f"emu-dwg-{name}")
    defines = defines or "{FIXED_SUM:0}"  # (the last part to arrive sums: the code most of these mutants change)
    source = build_for(wgmma_point(1, 64, 256)).source
    src = mutant(folder.parent, name, old, new, source)
    p = wgmma_point(*shape, "bf16", defines)
    exe = decode_emulator(p, folder.parent, src)
    return p, exe, folder


@pytest.mark.slow
def test_emulation_catches_a_sum_that_drops_a_part(tmp_path_factory):
    p, exe, folder = _mutant_launch(tmp_path_factory, "drop_part", "const int p_begin = first, p_end = last + 1;",
                                    "const int p_begin = first + 1, p_end = last + 1;")
    c, res = emulate_wgmma(p, exe, folder, np.random.default_rng(7), 3, launches=1)
    assert not res.passed and res.elem_fail > 0, "a dropped part went unnoticed"


@pytest.mark.slow
def test_emulation_catches_a_part_read_from_the_wrong_slot(tmp_path_factory):
    """Unit 1's part of tile 1 (its run's last piece) stored over its part of tile 0 (its run's first piece): wrong
    where tile 0 is summed after that, i.e. with the blocks last to first (first to first, unit 1 sums tile 0 before)."""
    p, exe, folder = _mutant_launch(tmp_path_factory, "wrong_slot", "(c == first ? first_which : 0)", "0")
    c, res = emulate_wgmma(p, exe, folder, np.random.default_rng(7), 3, launches=1, reverse=True)
    assert not res.passed and res.elem_fail > 0, "a part read from the wrong slot went unnoticed"


@pytest.mark.slow
def test_emulation_catches_counters_left_dirty_for_the_next_launch(tmp_path_factory):
    _right_once_then_wrong(*_mutant_launch(tmp_path_factory, "dirty_counters", "if (local_tid == 0) *counter = 0;", ""),
                           "counters left dirty")


def _right_once_then_wrong(p, exe, folder, what: str) -> None:
    """A mutant that leaves state for the next launch: right on one launch, caught on the second (3 SMs)."""
    c, res = emulate_wgmma(p, exe, folder, np.random.default_rng(8), 3, launches=1)
    _assert_right(p, c, res, "the first launch: ")
    c, res = emulate_wgmma(p, exe, folder, np.random.default_rng(8), 3, launches=2)
    assert not res.passed, f"{what} went unnoticed on the second launch"


@pytest.mark.slow
def test_emulation_catches_a_slot_released_before_its_wgmma_read_it(tmp_path_factory):
    """The ring's protocol: without the wait that retires the previous stage's wgmma group, a slot goes back to
    the producer while its group is still pending (the emulation runs a group when it is retired, as late as the
    hardware may): one CTA, 32 k-blocks through 8 slots, the producer refills slots the MMAs have not read."""
    folder = tmp_path_factory.mktemp("emu-dwg-early")
    source = build_for(wgmma_point(1, 64, 256)).source
    src = mutant(folder.parent, "early_release", "wgmma_wait<1>();  // the previous stage's group", "//", source)
    p = wgmma_point(1, 64, 2048, "bf16", "{CONSUMERS:1}")
    exe = decode_emulator(p, folder.parent, src)
    c, res = emulate_wgmma(p, exe, folder, np.random.default_rng(4), 1, launches=1)
    assert not res.passed and res.elem_fail > 0, "a slot released before its wgmma group retired went unnoticed"


def test_the_sweep_is_the_session_scripts_and_starts_at_the_defaults():
    from gemmlab.config import ROOT

    text = (ROOT / ".ci" / "h200-session.sh").read_text()
    (line,) = [x for x in text.splitlines() if x.startswith("DECODE_WGMMA_SWEEP=")]
    assert line.split("=", 1)[1].strip("'") == ",".join(SWEEP)
    defaults = dict(compose_cfg([f"variant={VARIANT}"]).variant[VARIANT].cuda.defines)
    assert defaults.pop("TRACE") == 0  # the trace probe's switch (gemmlab.bench.decode_trace), not a technique
    # the dynamic tail, off by default (a sweep entry with DYN:1 goes beside the others)
    assert (defaults.pop("DYN"), defaults.pop("DYN_PCT"), defaults.pop("DYN_CK"), defaults.pop("DYN_K0"),
            defaults.pop("DYN_PUB")) == (0, 10, 4, -1, 0)
    assert defaults.pop("MAP_PARAMS") in (0, 1)  # how the launcher passes the tensor maps (measured on its own)
    assert defaults.pop("WS_PREFETCH") in (0, 1)  # the counters' prefetch (measured beside MAP_PARAMS)
    assert defaults.pop("FIXED_SUM") in (0, 1, 2)  # who sums a split tile (measured on its own: decode_fixed)
    assert defaults.pop("FIXED_LEAD") >= 1  # (FIXED_SUM 2 only)
    assert defaults.pop("UNSPLIT") in (0, 1)  # the unsplit 64-row-tile rule's switch (measured on its own)
    assert SWEEP[0] == "{" + ",".join(f"{k}:{v}" for k, v in defaults.items()) + "}"


@NEEDS_NVCC
@pytest.mark.slow
def test_sass_of_the_l2_policies_and_the_multicast(cubin_cache):
    """L2_HINT 1: both TMA loads carry a cache-policy operand (UTMALDG's desc[...]); 0: neither does."""
    from test_hopper_kernels import sass

    for hint in (0, 1):
        b = build_for(wgmma_point(64, 6144, 4096, "bf16", f"{{L2_HINT:{hint}}}"))
        loads = [x for x in sass(nvcc.compile_cubin(b.source, b.flags, cubin_cache).path).splitlines() if "UTMALDG" in x]
        assert len(loads) == 2 and all(("desc[" in x) == bool(hint) for x in loads), (hint, loads)
    # CLUSTER 2: the weights' box a plain load, the tokens' half a multicast one; cluster barriers at both ends
    b = build_for(wgmma_point(64, 6144, 4096, "fp8", "{CLUSTER:2}"))
    text = sass(nvcc.compile_cubin(b.source, b.flags, cubin_cache).path)
    loads = [x.split(";")[0].split("*/")[-1].split()[0] for x in text.splitlines() if "UTMALDG" in x]
    assert sorted(loads) == ["UTMALDG.2D", "UTMALDG.2D.MULTICAST"], loads
    assert text.count("UCGABAR_WAIT") == 2, "a cluster barrier after the barriers' init and before the exit"


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_clusters_multicast_the_tokens_on_the_cpu(precision, tmp_path_factory):
    """CLUSTER 2: each CTA of a pair loads half of the tokens' box and multicasts it into both; a slot is refilled only
    when both CTAs' consumers released it. Shapes with one unit tile (N within 2 x 128 rows), several, tiles cut
    between clusters, M = 25 (NTOK 32: the second CTA's half of the box partly past M), both block orders bit for bit."""
    folder = tmp_path_factory.mktemp("emu-dwg-cluster")
    defines = "{CLUSTER:2}"
    k = {"bf16": [1000, 520, 512], "fp8": [1008, 1040, 1024]}[precision]
    for m, n, kk, sms in [(64, 136, k[0], 4), (16, 264, k[1], 6), (25, 520, k[2], 6)]:
        p = wgmma_point(m, n, kk, precision, defines)
        assert p.expr_env()["CLUSTER"] == 2
        exe = decode_emulator(p, folder.parent)
        c0, res0 = emulate_wgmma(p, exe, folder, np.random.default_rng(21), sms)
        _assert_right(p, c0, res0)
        c1, res1 = emulate_wgmma(p, exe, folder, np.random.default_rng(21), sms, launches=1, reverse=True)
        _assert_right(p, c1, res1, "reversed: ")
        assert np.array_equal(c0, c1), f"{m}x{n}x{kk}: the sums depend on the blocks' order"


@pytest.mark.slow
@pytest.mark.parametrize("kspan", [2, 4])
def test_boxes_wholly_past_k_read_as_zeros(kspan, tmp_path_factory):
    """KSPAN 2 and 4: a tile's last k-block holds boxes wholly past K (K = 2056 bf16: 33 boxes, the last k-block one
    box inside K and 1 or 3 past it), loaded anyway (TMA fills them with zeros) so that no branch sits among the
    MMAs; 17 or 9 k-blocks through the ring, whose slots hold older stages' boxes: zeros must land there."""
    folder = tmp_path_factory.mktemp("emu-dwg-kspan")
    p = wgmma_point(1, 64, 2056, "bf16", f"{{CONSUMERS:1,KSPAN:{kspan},STAGES:4}}")
    c, res = emulate_wgmma(p, decode_emulator(p, folder.parent), folder, np.random.default_rng(6), 1, launches=1)
    _assert_right(p, c, res)


def test_the_quick_sweep_is_a_subset_of_the_sweep():
    """decode_wgmma_quick (one GPU call with the experiment) runs sets of the full sweep, every one built above."""
    from gemmlab.config import ROOT

    text = (ROOT / ".ci" / "h200-session.sh").read_text()
    (line,) = [x for x in text.splitlines() if x.startswith("DECODE_WGMMA_QUICK=")]
    quick = ["{" + x.strip("{}") + "}" for x in line.split("=", 1)[1].strip("'").split("},{")]
    assert quick[0] == SWEEP[0] and set(quick) <= set(SWEEP), quick


@pytest.mark.slow
def test_a_tile_in_more_parts_than_one_batch_of_loads(tmp_path_factory):
    """The last part loads kSumBatch partials at a time (8 at one token): a tile cut in twelve (MAX_PARTS 16, 12
    CTAs) sums them in two batches, right and the same bits in both block orders."""
    folder = tmp_path_factory.mktemp("emu-dwg-batches")
    p = wgmma_point(1, 64, 8192, "bf16", "{CONSUMERS:1,MAX_PARTS:16}")
    assert launch_shape(p, sm_count=12).grid == (12, 1, 1)
    exe = decode_emulator(p, folder.parent)
    c0, res0 = emulate_wgmma(p, exe, folder, np.random.default_rng(12), 12, launches=1)
    c1, res1 = emulate_wgmma(p, exe, folder, np.random.default_rng(12), 12, launches=1, reverse=True)
    _assert_right(p, c0, res0)
    _assert_right(p, c1, res1, "reversed: ")
    assert np.array_equal(c0, c1)


@pytest.mark.slow
@pytest.mark.parametrize("precision,m", [("bf16", 1), ("fp8", 1), ("bf16", 64), ("fp8", 64)])
def test_one_unit_a_tile_splits_none(precision, m, tmp_path_factory):
    """MAX_PARTS 1 with as many SMs as 64-row tiles (decode_deep's candidate at 70B mlp_down: 128 tiles on 132 SMs):
    a unit a tile, each run one whole tile, so no partial and no sum; C right in both block orders, the same bits.
    At 64 tokens (the rule's unsplit tiles since session52) the ring is as deep as fits: 13 stages."""
    folder = tmp_path_factory.mktemp(f"emu-dwg-unsplit-{precision}-{m}")
    k = 1024 if precision == "bf16" else 2048  # 16 k-blocks a tile: the ring of 16 (13 at 64 tokens) wraps once
    p = wgmma_point(m, 3 * 64, k, precision, "{CONSUMERS:1,MAX_PARTS:1,STAGES:16}")
    assert dict(build_for(p).point_defines)["STAGES"] == (16 if m == 1 else 13)
    assert launch_shape(p, sm_count=4).grid == (3, 1, 1)  # one unit a tile, the fourth SM idle
    exe = decode_emulator(p, folder.parent)
    c0, res0 = emulate_wgmma(p, exe, folder, np.random.default_rng(31), 4)
    c1, res1 = emulate_wgmma(p, exe, folder, np.random.default_rng(31), 4, reverse=True)
    _assert_right(p, c0, res0)
    _assert_right(p, c1, res1, "reversed: ")
    assert np.array_equal(c0, c1)


# FIXED_SUM 1: each split tile summed by its first part, which waits for the others' count. The emulation runs the
# blocks one at a time, so only last to first, where every part has stored before its tile's first part runs (first
# to last, unit 0 would wait for unit 1, not yet run; on the GPU every CTA of the grid is resident at once)
@pytest.mark.slow
# FIXED_SUM 2 is off (-1.3 to +1.9% on an H100, the YAML's header): fp8 runs its plain set, bf16 every set
@pytest.mark.parametrize("precision,defines", configs([(p, d) for d in (
    "{FIXED_SUM:1}", "{FIXED_SUM:1,CLUSTER:2}", "{FIXED_SUM:1,CONSUMERS:1,MAX_PARTS:16}", "{FIXED_SUM:2}",
    "{FIXED_SUM:2,CLUSTER:2}", "{FIXED_SUM:2,CONSUMERS:1,MAX_PARTS:16}", "{FIXED_SUM:2,FIXED_LEAD:1}")
    for p in (("bf16", "fp8") if d.startswith("{FIXED_SUM:1") or d == "{FIXED_SUM:2}" else ("bf16",))],
    lambda p, d: left_off(p, 0, d)))
def test_a_fixed_summer_writes_every_split_tile_on_the_cpu(precision, defines, tmp_path_factory):
    """Tiles cut in 2 to 7 parts (and in 12 with MAX_PARTS 16: two batches of loads), with the tokens' multicast; two
    launches (the summer leaves its counters at zero), C against FP64. FIXED_SUM 2: last to first, every other part is
    in when the first reads the count, so its early loads are the path taken (FIXED_LEAD 1: at its last k-block)."""
    folder = tmp_path_factory.mktemp(f"emu-dwg-fixed-{precision}")
    rng = np.random.default_rng(41)
    shapes = SHAPES[precision] if "MAX_PARTS" not in defines else [(1, 64, 8192 if precision == "bf16" else 16384, 12)]
    for m, n, k, sms in shapes:
        p = wgmma_point(m, n, k, precision, defines)
        c, res = emulate_wgmma(p, decode_emulator(p, folder.parent), folder, rng, sms, reverse=True)
        _assert_right(p, c, res, f"{defines} {m}x{n}x{k} on {sms} SMs: ")


@pytest.mark.slow
@pytest.mark.parametrize("name,old,new", [
    # the summer starts from zero: its own part (kept in registers, never stored) lost
    ("fixed_own", "const int p_begin = first + 1, p_end = last + 1;",
     "const int p_begin = first + 1, p_end = last + 1; for (int s = 0; s < MSUB; ++s) for (int r = 0; r < kAccum; ++r) "
     "acc[s][r] = 0.0f;"),
    # the last part's partial not added
    ("fixed_last", "const int p_begin = first + 1, p_end = last + 1;", "const int p_begin = first + 1, p_end = last;"),
    # FIXED_SUM 2: the parts loaded early counted as added, but not added
    ("fixed_pre", "acc[s][4 * j] += pre[u][s][j].x;", "")])
def test_emulation_catches_a_fixed_summer_that_loses_a_part(name, old, new, tmp_path_factory):
    p, exe, folder = _mutant_launch(tmp_path_factory, name, old, new, defines="{FIXED_SUM:%d}" % (2 if "pre" in name else 1))
    c, res = emulate_wgmma(p, exe, folder, np.random.default_rng(7), 3, launches=1, reverse=True)
    assert not res.passed and res.elem_fail > 0, f"{name}: a part lost went unnoticed"


@pytest.mark.slow
def test_a_fixed_summer_that_finds_a_part_missing_waits_for_it(tmp_path_factory):
    """FIXED_SUM 2's other path: the count read early says a part is still out (forced here: in the emulation every part
    is in by then), so the first part waits for the count after its last k-block and loads every partial then; C right."""
    p, exe, folder = _mutant_launch(tmp_path_factory, "fixed_late", "have = arrived[consumer] == sum_last - g;",
                                    "have = false;", defines="{FIXED_SUM:2}")
    c, res = emulate_wgmma(p, exe, folder, np.random.default_rng(7), 3, launches=2, reverse=True)
    _assert_right(p, c, res, "the late path: ")


@pytest.mark.slow
def test_a_grid_of_more_units_than_k_blocks_still_writes_every_tile(tmp_path_factory):
    """The YAML never launches more units than k-blocks, but a grid that does (the grid's `let` overridden: 6 CTAs for
    1 tile of 4 k-blocks) gives the extra units empty runs that are parts of no tile: C is written, the counters
    left at zero for the second launch."""
    folder = tmp_path_factory.mktemp("emu-dwg-units")
    (p,) = expand(compose_cfg([f"variant={VARIANT}", "precision=bf16", "layouts=[nt]", "sizes.square=[]",
                               "sizes.shapes=[[1,64,256]]", f"variant.{VARIANT}.cuda.let.G=6"]))
    assert launch_shape(p, sm_count=132).grid == (6, 1, 1)
    c, res = emulate_wgmma(p, decode_emulator(p, folder.parent), folder, np.random.default_rng(2), 132, launches=2)
    _assert_right(p, c, res)


@pytest.mark.slow
@pytest.mark.parametrize("defines", ["{TRACE:1}", "{TRACE:1,CLUSTER:2}", "{TRACE:1,DYN:1}"])
def test_trace_stamps_leave_the_product_alone_on_the_cpu(defines, tmp_path_factory):
    """TRACE 1 (gemmlab.bench.decode_trace --variant decode_wgmma): the stamps go past the partials, inside the
    workspace the YAML sizes (AddressSanitizer sees a write past it), where the probe reads them (every consumer
    warpgroup's record: a start, first data, last MMA and end in that order, and its SM, which the emulation says is
    its block), and C is still right with the blocks in either order (a stamp over a partial another CTA still reads
    would break the sum)."""
    from gemmlab.bench import decode_trace as dt

    p = wgmma_point(16, 264, 1040, "bf16", defines)
    shape = launch_shape(p, sm_count=5)
    lay = dt.wgmma_trace_layout(dict(shape.let), p.expr_env(), p.n)
    if "DYN" not in defines:  # (DYN's tickets and slots follow the stamps)
        assert shape.workspace_bytes == lay["offset"] + lay["records"] * 8 * dt.WORDS
    assert launch_shape(wgmma_point(16, 264, 1040, "bf16", defines.replace("TRACE:1", "TRACE:0").replace(",DYN:1", "")),
                        sm_count=5).workspace_bytes == lay["offset"]
    folder = tmp_path_factory.mktemp("emu-dwg-trace")
    exe = decode_emulator(p, folder.parent)
    for reverse in (False, True):
        c, res = emulate_wgmma(p, exe, folder, np.random.default_rng(5), 5, reverse=reverse,
                               workspace_out=folder / "ws.bin")
        _assert_right(p, c, res, f"TRACE 1 {defines}, reverse={reverse}: ")
        ws = np.fromfile(folder / "ws.bin", dtype=np.uint8)
        rec = ws[lay["offset"]:lay["offset"] + lay["records"] * 8 * dt.WORDS].view(np.uint64).reshape(-1, dt.WORDS)
        consumers = p.expr_env()["CONSUMERS"]
        assert (rec[:, 4] == np.arange(lay["records"]) // consumers).all(), rec[:, 4]  # the SM: the block here
        active = rec[:, 1] != 0
        assert active.any() and (rec[:, 0] > 0).all(), rec
        a = rec[active]
        assert ((a[:, 0] <= a[:, 1]) & (a[:, 1] <= a[:, 2]) & (a[:, 2] <= a[:, 3])).all(), a
        assert (rec[~active, 2] == 0).all(), rec  # no work: no MMA stamp


# ---- DYN 1: the dynamic tail ------------------------------------------------------------------------------------
# Stage 17 before DYN: DYN 0 (the default) must still build its machine code
PRE_DYN_COMMIT = "bcc5064ccc3568fb20241d982debf0c64b2f6702"


@NEEDS_NVCC
@pytest.mark.slow
@pytest.mark.parametrize("precision,m,defines", [("bf16", 1, None), ("fp8", 64, "{CLUSTER:2}"),
                                                 ("bf16", 16, "{TRACE:1,PRODUCER_WG:1,MSUB:2}"),
                                                 ("fp8", 16, "{KSPAN:4,L2_HINT:1,CONSUMERS:1}")])
def test_dyn_0_builds_the_kernel_from_before_dyn(precision, m, defines, tmp_path):
    """DYN 0 is the measured kernel as it was: the source of PRE_DYN_COMMIT and this one, built with the same defines
    (the new ones included), give the same cubin bytes without -lineinfo (whose line table moves with the new lines) and
    the same SASS with the launcher's flags."""
    import shutil
    import subprocess

    from gemmlab.config import ROOT
    from test_hopper_kernels import find_cuobjdump, sass

    if shutil.which("git") is None:
        pytest.skip("no git here")
    old = subprocess.run(["git", "show", f"{PRE_DYN_COMMIT}:kernels/cuda/17_decode_wgmma.cu"], cwd=ROOT,
                         capture_output=True, text=True)
    if old.returncode != 0:
        pytest.skip(f"stage 17 before DYN is not in this checkout's history: {old.stderr.strip()}")
    before = tmp_path / "before" / "17_decode_wgmma.cu"
    before.parent.mkdir()
    before.write_text(old.stdout)
    # with the tensor maps in the device buffer, as they were passed then, the last part summing, no unsplit rule
    # (MAP_PARAMS 0, FIXED_SUM 0, UNSPLIT 0: the defaults' changes since)
    defines = "{MAP_PARAMS:0,FIXED_SUM:0,UNSPLIT:0" + ("," + defines[1:] if defines else "}")
    b = build_for(wgmma_point(m, 6144, 4096, precision, defines))
    assert dict(b.defines)["DYN"] == 0

    def cubin(source, flags, name):
        out = tmp_path / name
        r = subprocess.run([nvcc.find_nvcc(), *flags, f"-I{b.source.parent}", "-o", str(out), str(source)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-4000:]
        return out

    plain = [f for f in b.flags if f != "-lineinfo"]
    assert cubin(b.source, plain, "now.cubin").read_bytes() == cubin(before, plain, "before.cubin").read_bytes()
    if find_cuobjdump() is not None:
        assert sass(cubin(b.source, b.flags, "now_li.cubin")) == sass(cubin(before, b.flags, "before_li.cubin"))


def test_dynamic_tail_launch_rules():
    """DYN 1's point rule (the static head DYN_K0: the k-blocks less ~DYN_PCT percent in whole chunks of DYN_CK, one
    chunk at least), its workspace (a 256-byte ticket area, then a slot per tile and per chunk) and shared memory (16
    bytes a stage); no clusters; DYN 0 builds one kernel for every K (DYN_K0 as the YAML has it)."""
    # the ncu point, 8192 x 28672 bf16: 448 k-blocks a tile, 10% of them 44.8 -> 11 chunks of 4, the head 404; fp8: 224
    # k-blocks, 6 chunks, 200
    p = wgmma_point(1, 8192, 28672, "bf16", "{DYN:1}")
    assert p.expr_env()["DYN_K0"] == 404
    assert wgmma_point(1, 8192, 28672, "fp8", "{DYN:1}").expr_env()["DYN_K0"] == 224 - 24
    s, s0 = launch_shape(p, sm_count=132), launch_shape(wgmma_point(1, 8192, 28672), sm_count=132)
    tiles = 8192 // 128
    assert s0.workspace_bytes == 256 * -(-tiles * 2 // 64) + 132 * 2 * 128 * 8 * 4  # DYN 0's, as before
    assert s.workspace_bytes == s0.workspace_bytes + 256 + tiles * (1 + 11) * 128 * 8 * 4
    assert s.smem_bytes == s0.smem_bytes + 16 * 8 and s.grid == s0.grid
    # one chunk at least (16 k-blocks: 10% rounds to none); a tile of one chunk or less all dynamic; DYN_K0 given:
    # clipped to the tile's k-blocks; DYN_CK 3: chunks of 3
    assert wgmma_point(1, 6144, 1024, "bf16", "{DYN:1}").expr_env()["DYN_K0"] == 12
    assert wgmma_point(1, 136, 200, "bf16", "{DYN:1}").expr_env()["DYN_K0"] == 0
    assert wgmma_point(1, 136, 200, "bf16", "{DYN:1,DYN_K0:99}").expr_env()["DYN_K0"] == 4
    assert wgmma_point(1, 6144, 4096, "bf16", "{DYN:1,DYN_PCT:20,DYN_CK:3}").expr_env()["DYN_K0"] == 64 - 12
    p3 = wgmma_point(1, 6144, 4096, "bf16", "{DYN:1,DYN_K0:10,DYN_CK:3}")
    assert launch_shape(p3, sm_count=132).workspace_bytes == (
        launch_shape(wgmma_point(1, 6144, 4096), sm_count=132).workspace_bytes + 256 + 48 * (1 + 18) * 128 * 8 * 4)
    # no clusters with the tail; DYN 0 points carry the YAML's DYN_K0 (-1) whatever the K: one build, and the rows'
    # defines those of the YAML (analysis.ladder's current configuration)
    assert wgmma_point(64, 6144, 4096, "bf16", "{DYN:1,CLUSTER:2}").expr_env()["CLUSTER"] == 1
    assert wgmma_point(64, 6144, 4096, "bf16", "{CLUSTER:2}").expr_env()["CLUSTER"] == 2
    assert {wgmma_point(1, 6144, k).expr_env()["DYN_K0"] for k in (1024, 4096, 28672)} == {-1}
    # TRACE 1: the stamps where DYN 0 has them (decode_trace reads them there), the tail's area from the next 256 bytes
    from gemmlab.bench import decode_trace as dt

    pt = wgmma_point(16, 264, 1040, "bf16", "{TRACE:1,DYN:1}")
    st = launch_shape(pt, sm_count=5)
    lay = dt.wgmma_trace_layout(dict(st.let), pt.expr_env(), pt.n)
    stamps = lay["records"] * 8 * dt.WORDS
    assert lay["offset"] + stamps == launch_shape(wgmma_point(16, 264, 1040, "bf16", "{TRACE:1}"),
                                                  sm_count=5).workspace_bytes
    assert pt.expr_env()["DYN_K0"] == 13  # K = 1040 bf16: 17 k-blocks, one chunk of 4
    d = 1
    assert st.workspace_bytes == lay["offset"] + -(-stamps // 256) * 256 + 256 + 3 * (1 + d) * 128 * 16 * 4


# K0 / CK choices over SHAPES (k-blocks a tile: bf16 4, 9, 16, 4, 32; fp8 2, 9, 8, 4, 32): the rule (a tail of 10% in
# chunks of 4, one chunk at least: all dynamic where a tile has 4 k-blocks or fewer), all dynamic with chunks of 3 (a
# tile's last chunk shorter), a tail of exactly one chunk of 2 (DYN_PCT 1), a head of one k-block and chunks of 3 that
# do not divide the tail (more units than the heads have k-blocks: units with no static run), no tail at all (every
# piece through the producer's records, DYN 0's parts)
DYN_SETS = ["{DYN:1}", "{DYN:1,DYN_K0:0,DYN_CK:3}", "{DYN:1,DYN_PCT:1,DYN_CK:2}", "{DYN:1,DYN_K0:1,DYN_CK:3}",
            "{DYN:1,DYN_K0:4096}",
            # DYN_PUB 1 (the producer counts the pieces, the sums come back through the ring): the rule, all dynamic
            "{DYN:1,DYN_PUB:1}", "{DYN:1,DYN_PUB:1,DYN_K0:0,DYN_CK:3}"]


# DYN 1 is off (measured slower than the static split, the YAML's header): fp8 runs the sets whose k-blocks differ from
# bf16's most, the rule and all dynamic (its 2-k-block tile), and the producer's count (DYN_PUB 1); bf16 every set
DYN_FP8 = ("{DYN:1}", "{DYN:1,DYN_K0:0,DYN_CK:3}", "{DYN:1,DYN_PUB:1}")


@pytest.mark.slow
@pytest.mark.parametrize("precision,defines", configs(
    [("bf16", d) for d in DYN_SETS] + [("fp8", d) for d in DYN_FP8],
    # every run: the rule in both precisions, all dynamic in chunks of 3 (a tile's last chunk shorter), the producer's
    # count
    lambda p, d: None if d == "{DYN:1}" or (p, d) in (("bf16", "{DYN:1,DYN_K0:0,DYN_CK:3}"), ("bf16", "{DYN:1,DYN_PUB:1}"))
    else f"stage 17's {d} ({p})"))
def test_dynamic_tail_computes_x_wt_on_the_cpu(precision, defines, tmp_path_factory):
    """(What no CPU test can see: the order of the producer's PieceInfo store and the arrive that publishes its slot;
    the emulation's threads interleave only at waits, so a store after the arrive still lands first here. Keep the
    store before the arrive, as stage 12's PRODUCER_SCHEDULES does.)
    DYN 1 at the shapes of test_decode_wgmma_computes_x_wt_on_the_cpu (2-7 units, several chunks a unit): C right
    after three launches on one workspace with every block of the grid running at once (the units compete for the
    tickets), the ticket counter then at exactly 3 P (never reset: each launch takes chunks + units tickets, launch
    L's [L P, (L + 1) P): a period off by one loses chunks by the third); and with the blocks one after another in reverse order (the first block run takes every
    chunk): the same bits both ways, whichever unit took which chunk."""
    folder = tmp_path_factory.mktemp("emu-dwg-dyn")
    for m, n, k, sms in SHAPES[precision]:
        p = wgmma_point(m, n, k, precision, defines)
        exe = decode_emulator(p, folder.parent)
        c0, res0 = emulate_wgmma(p, exe, folder, np.random.default_rng(31), sms, launches=3, together=True,
                                 workspace_out=folder / "ws.bin")
        _assert_right(p, c0, res0, f"{defines}: ")
        offset, per_launch = dyn_tickets(p, sms)
        tickets = int(np.fromfile(folder / "ws.bin", dtype=np.uint8)[offset:offset + 8].view(np.uint64)[0])
        assert tickets == 3 * per_launch, f"{defines} at {m}x{n}x{k}: {tickets} tickets after 3 launches of {per_launch}"
        c1, res1 = emulate_wgmma(p, exe, folder, np.random.default_rng(31), sms, launches=1, reverse=True)
        _assert_right(p, c1, res1, f"{defines}, reversed: ")
        assert np.array_equal(c0, c1), f"{defines} at {m}x{n}x{k}: the sums depend on which unit took which chunk"


@pytest.mark.slow
@pytest.mark.parametrize("precision,defines", configs([(p, d) for d in (
    "{DYN:1,PRODUCER_WG:1,MSUB:2}", "{DYN:1,PRODUCER_WG:1,CONSUMERS:3,DYN_CK:1}", "{DYN:1,CONSUMERS:1,DYN_K0:2,DYN_CK:5}",
    "{DYN:1,KSPAN:2,DYN_CK:3}", "{DYN:1,L2_HINT:1,STAGES:4,DYN_K0:0,DYN_CK:1}", "{DYN:1,TRACE:1}",
    "{DYN:1,DYN_PUB:1,PRODUCER_WG:1,CONSUMERS:3,DYN_CK:1}", "{DYN:1,DYN_PUB:1,STAGES:2,DYN_K0:0,DYN_CK:1}")
    for p in (("bf16", "fp8") if "PRODUCER_WG" in d else ("bf16",))],  # fp8: the producer warpgroup's (DYN_FP8)
    # every run: the producer warpgroup's ticket loop and the trace stamps, in bf16
    lambda p, d: None if p == "bf16" and d in ("{DYN:1,PRODUCER_WG:1,MSUB:2}", "{DYN:1,TRACE:1}")
    else f"stage 17's {d} ({p})"))
def test_dynamic_tail_with_the_sweep_configurations_on_the_cpu(precision, defines, tmp_path_factory):
    """DYN 1 with the producer warpgroup (40 registers for the ticket loop), 192- and 256-row tiles, 64-row tiles, two
    boxes along K a stage, a ring of 4 with chunks of one k-block, the trace stamps: three launches on one workspace."""
    folder = tmp_path_factory.mktemp("emu-dwg-dyn-sweep")
    for m, n, k, sms in SHAPES[precision][:2] + SHAPES[precision][4:]:
        p = wgmma_point(m, n, k, precision, defines)
        c, res = emulate_wgmma(p, decode_emulator(p, folder.parent), folder, np.random.default_rng(8), sms, launches=3)
        _assert_right(p, c, res, f"{defines}: ")


@pytest.mark.slow
def test_dynamic_tail_with_more_units_than_k_blocks(tmp_path_factory):
    """A grid of more units than k-blocks (the grid's `let` overridden: 6 CTAs for 1 tile of 4): the units past them
    take no ticket (P counts the others) and only end their consumers; right on the second launch."""
    folder = tmp_path_factory.mktemp("emu-dwg-dyn-units")
    (p,) = expand(compose_cfg([f"variant={VARIANT}", "precision=bf16", "layouts=[nt]", "sizes.square=[]",
                               "sizes.shapes=[[1,64,256]]", f"variant.{VARIANT}.cuda.let.G=6",
                               f"variant.{VARIANT}.cuda.defines={{DYN:1,DYN_K0:2,DYN_CK:1}}"]))
    assert launch_shape(p, sm_count=132).grid == (6, 1, 1)
    c, res = emulate_wgmma(p, decode_emulator(p, folder.parent), folder, np.random.default_rng(2), 132, launches=2)
    _assert_right(p, c, res)


def _cancelling_operands(m, n, k, rng):
    """bf16 operands whose product cancels: the tokens repeat every 128-byte block along K, the weights' odd blocks are
    their even neighbours negated, each pair scaled by its own power of two: the exact product is 0, and C holds the
    FP32 rounding left by the parts' sums, which changes with the order they are added in (random operands rarely show
    an order in bf16's 8 bits)."""
    import ml_dtypes

    a = np.tile(rng.standard_normal((m, 64), dtype=np.float32), (1, k // 64)).astype(ml_dtypes.bfloat16)
    w = np.empty((n, k), dtype=np.float32)
    for b in range(0, k // 64, 2):
        block = rng.standard_normal((n, 64), dtype=np.float32) * np.float32(2.0 ** int(rng.integers(-8, 9)))
        w[:, 64 * b:64 * b + 64], w[:, 64 * b + 64:64 * b + 128] = block, -block
    return a, w.astype(ml_dtypes.bfloat16)


def _emulate_bits(point, exe: Path, folder: Path, a, w, sm_count: int, reverse: bool):
    """C's bytes (bf16 as uint16) after one emulated launch on the given operands (A M x K, the weights N x K)."""
    import os
    import subprocess

    shape = launch_shape(point, sm_count=sm_count)
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "GEMMLAB_EMU_LAUNCHES": "1",
           "GEMMLAB_EMU_WORKSPACE_BYTES": str(shape.workspace_bytes), **_emu_env(point, reverse)}
    a.tofile(folder / "a.bin")
    w.tofile(folder / "b.bin")
    r = subprocess.run([str(exe), str(point.m), str(point.n), str(point.k), *map(str, shape.grid),
                        *map(str, shape.block), str(shape.smem_bytes), str(folder / "a.bin"), str(folder / "b.bin"),
                        str(folder / "c.bin")], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-4000:]}"
    return np.fromfile(folder / "c.bin", dtype=np.uint16)


# a tile of 32 k-blocks over 7 units: DYN_PCT 30 leaves 5 chunks of 2 (K0 22), 12 parts a tile (two batches of loads)
DYN_ORDER = "{CONSUMERS:1,DYN:1,DYN_PCT:30,DYN_CK:2}"


@pytest.mark.slow
@pytest.mark.parametrize("defines,shape", [(DYN_ORDER, (1, 64, 2048)), (DYN_ORDER, (13, 136, 2048)),
                                           ("{CONSUMERS:1,DYN:1,DYN_K0:0,DYN_CK:3}", (1, 136, 2048)),
                                           ("{CONSUMERS:1,DYN:1,DYN_PUB:1,DYN_PCT:30,DYN_CK:2}", (1, 64, 2048)),
                                           ("{CONSUMERS:1,FIXED_SUM:0}", (1, 64, 2048))])
def test_split_tiles_sum_to_the_same_bits_whoever_takes_the_chunks(defines, shape, tmp_path_factory):
    """The parts' sum in its fixed order (the static parts in unit order, then the chunks) whichever part arrives last
    and whichever unit took which chunk: the blocks first to last (the first takes every chunk) and last to first (the
    last takes them) give the same bytes of C on operands that cancel (C is the order's rounding); DYN 0 too."""
    folder = tmp_path_factory.mktemp("emu-dwg-dyn-bits")
    p = wgmma_point(*shape, "bf16", defines)
    exe = decode_emulator(p, folder.parent)
    a, w = _cancelling_operands(*shape, np.random.default_rng(13))
    c0 = _emulate_bits(p, exe, folder, a, w, 7, reverse=False)
    c1 = _emulate_bits(p, exe, folder, a, w, 7, reverse=True)
    assert np.count_nonzero(c0 & 0x7FFF) > c0.size // 4, "the operands left too little rounding to compare"
    assert np.array_equal(c0, c1), f"{defines}: the sums depend on the arrival order"


@pytest.mark.slow
def test_emulation_catches_a_dynamic_sum_in_arrival_order(tmp_path_factory):
    """The check above can fail: the last part starting the sum at its own part (the order then depends on who
    arrives last) gives other bytes in the other block order."""
    p, exe, folder = _mutant_launch(tmp_path_factory, "dyn_order", "const float4* part = part_at(c0 + u);",
                                    "const float4* part = part_at((c0 + u + me) % n_parts);", defines=DYN_ORDER,
                                    shape=(1, 64, 2048))
    a, w = _cancelling_operands(1, 64, 2048, np.random.default_rng(13))
    c0 = _emulate_bits(p, exe, folder, a, w, 7, reverse=False)
    c1 = _emulate_bits(p, exe, folder, a, w, 7, reverse=True)
    assert not np.array_equal(c0, c1), "a sum in arrival order went unnoticed"


@pytest.mark.slow
def test_emulation_catches_a_dynamic_sum_that_drops_a_chunk(tmp_path_factory):
    p, exe, folder = _mutant_launch(tmp_path_factory, "dyn_drop", "const int p_begin = 0, p_end = n_parts;",
                                    "const int p_begin = 0, p_end = n_parts - 1;", defines="{DYN:1,DYN_K0:1,DYN_CK:1}")
    c, res = emulate_wgmma(p, exe, folder, np.random.default_rng(7), 3, launches=1)
    assert not res.passed and res.elem_fail > 0, "a dropped chunk went unnoticed"


@pytest.mark.slow
def test_emulation_catches_tickets_not_counted_per_launch(tmp_path_factory):
    """The ticket counter is never reset: a producer that reads its tickets as this launch's without the launch's
    base (ticket - ticket % P) is right once and finds no chunk left on the second launch."""
    _right_once_then_wrong(*_mutant_launch(
        tmp_path_factory, "dyn_base",
        "const unsigned long long base = ticket - ticket % static_cast<unsigned long long>(chunks + units);",
        "const unsigned long long base = 0;", defines="{DYN:1,DYN_K0:1,DYN_CK:1}"),
        "tickets read without the launch's base")


@pytest.mark.slow
def test_emulation_catches_a_producer_that_stops_before_every_piece_is_counted(tmp_path_factory):
    """DYN_PUB 1: the producer counts the pieces the consumers have stored until none is left, then ends the ring; one
    that ends it at once leaves the tiles whose last part was counted late unsummed. (What no CPU test can see: a
    count taken before the consumers' stores; the ring's order sums this CTA's own pieces after it stored them, and the
    emulation's threads interleave only at waits. The GPU tests run it.)"""
    p, exe, folder = _mutant_launch(tmp_path_factory, "dyn_pub_end", "      while (pub < issued) {",
                                    "      while (false) {", defines="{DYN:1,DYN_PUB:1}", shape=(13, 264, 520))
    c, res = emulate_wgmma(p, exe, folder, np.random.default_rng(31), 5, launches=1)
    assert not res.passed and res.elem_fail > 0, "tiles left unsummed went unnoticed"
