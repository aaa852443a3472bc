"""Stages 14 (decode_splitk), 16 (decode_rows) and 17 (decode_wgmma) on a GPU (`pytest -m gpu`): bf16 and fp8 (per-tensor scales) against the
FP64 product through the real runner at decode shapes with tails, with and without the split-K
reduction (its workspace zeroed once per launch object, then reused by every call: the check of the
call repeated three times and the re-check after the timed samples fail a kernel that leaves its
counters dirty), the shapes it must skip, and the split the rows record (extra.let).

Run after tests/test_decode_emulation.py has passed on the CPU.
"""
from __future__ import annotations

import json

import pytest
from conftest import compose_cfg, run_points

pytestmark = pytest.mark.gpu

SHAPES = [
    [1, 6144, 4096],  # Llama-3 8B qkv at one token: no split
    [16, 6144, 4096],
    [64, 6144, 4096],  # splits in four on the H200
    [5, 1000, 1000],  # N and K off every tile and chunk (K = 1000: 31.25 chunks of 64 bytes)
    [64, 257, 7168],  # a few rows per CTA, K split
    [1, 256, 7168],  # DeepSeek-V3's router
    [33, 4104, 2048],  # M past an n8 tile (NT 8)
    [65, 1024, 1024],  # M > 64: skipped
    [16, 1024, 1001],  # K * 2 % 16 != 0: skipped
]


def _run(tmp, precision, extra=(), baseline="[]", shapes=SHAPES, variant="decode_splitk"):
    cfg = compose_cfg([f"variant=[{variant}]", f"precision=[{precision}]", "layouts=[nt]", "measure=quick",
                       "measure.fp8_scaling=tensor", "measure.check_repeats=3", "run.progress=false",
                       "run.fail_on_error=false", f"measure.baseline={baseline}", *extra], tmp)
    cfg.sizes.square = []
    cfg.sizes.shapes = shapes
    _, out = run_points(cfg, tmp / "run")
    return out


def _checked(rows, precision, also_skips=lambda m, n, k: False):
    """One row per shape: skipped exactly where M > 64 or K's bytes are no multiple of 16 (or
    ``also_skips``), else ok; returns the ok rows."""
    assert len(rows) == len(SHAPES)
    ok = []
    for r in rows:
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        should_skip = m > 64 or (k * (1 if precision == "fp8" else 2)) % 16 != 0 or also_skips(m, n, k)
        assert (r["status"] == "skipped") == should_skip, ((m, n, k), r["status"], r["reason"])
        if not should_skip:
            assert r["status"] == "ok", ((m, n, k), r["reason"])
            ok.append(r)
    return ok


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
@pytest.mark.parametrize("defines", ["{SPLIT_K:1}", "{X_SMEM:0}", "{M1_SIMT:1,MT:1,W_DEPTH:8}",
                                     "{W_PIPE:1}", "{W_PIPE:1,W_PIPE_MAX_M:64}"])
def test_decode_stage_matches_the_fp64_product(tmp_path, precision, defines):
    rows = _run(tmp_path, precision, [f"variant.decode_splitk.cuda.defines={defines}"])
    for r in _checked(rows, precision):
        extra = json.loads(r["extra"])
        assert extra["let"]["S"] == extra["grid"][1], extra


def test_split_k_at_64_tokens_against_the_libraries(tmp_path):
    """At (64, 6144, 4096) the rule splits K (S = 4 on 132 SMs); with cuBLAS / cuBLASLt timed as the
    baseline, the row states its speed against them (printed: the issue's 1.3x bar is <= ~14 us)."""
    (r,) = _run(tmp_path, "bf16", baseline="[cublas,cublaslt]", shapes=[[64, 6144, 4096]])
    assert r["status"] == "ok", r["reason"]
    assert json.loads(r["extra"])["let"]["S"] > 1
    gbs = float(r["bytes_min"]) / float(r["time_median_s"]) / 1e9
    print(f"decode_splitk (64, 6144, 4096) bf16: {float(r['time_median_s']) * 1e6:.1f} us, {gbs:.0f} GB/s, "
          f"{float(r['pct_of_baseline']):.1f}% of {r['baseline_variant']}")


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
@pytest.mark.parametrize("defines", ["{PREFETCH:1}", "{PREFETCH:0,SWIZZLE:0,W_HINT:0}", "{BLOCKS_SMALL:2,XSHARE:0}", "{XSHARE:0}",
                                     "{DEFER:1,XSHARE:0}", "{RING:2}", "{RING:3}", "{RING:3,TRACE:1}", "{RING:2,XSHARE:0}",
                                     "{BAL:1,XSHARE:0}", "{BAL:1,TRACE:1,XSHARE:0}", "{XS:0}", "{XS:1,XSHARE:0}", "{XF16:1}",
                                     "{XS_WIDE:1}", "{XS_WIDE:1,XF16:1}", "{XF16:2}", "{XS_WIDE:1,XF16:2}",
                                     "{AFRAG:1}", "{AFRAG:1,XPAD:1}", "{XS_WIDE:1,XPAD:1,AFRAG:1}",
                                     "{CVT_H1:1,AFRAG:1,XPAD:1}", "{XS_WIDE:1,XPAD:1,AFRAG:1,CVT_H1:1}",
                                     "{AFRAG:0,XPAD:0,CVT_H1:0,XS_WIDE:0}"])
def test_stage_16_matches_the_fp64_product(tmp_path, precision, defines):
    """Stage 16 (decode_rows, tests/test_decode_rows.py on the CPU) on the same shapes: every M from 1
    to 64 (n8 tiles 1, 2, 8), N and K tails, units split between warps; the call repeated and re-checked
    after timing (its counters must be left zero)."""
    _checked(_run(tmp_path, precision, [f"variant.decode_rows.cuda.defines={defines}"], variant="decode_rows"), precision)


# stage 17's define sets on the GPU (tests/test_decode_wgmma.py resolves each at SHAPES on the CPU first: a set whose
# rules land on a build the kernel refuses fails here as a compile error)
STAGE17_DEFINES = ["{CONSUMERS:2,MSUB:1,STAGES:8}", "{CONSUMERS:1}", "{MSUB:2}", "{STAGES:4}", "{STAGES:16}",
                   "{PRODUCER_WG:1,MSUB:2}", "{PRODUCER_WG:1,CONSUMERS:3}", "{L2_HINT:1}", "{CLUSTER:2}",
                   "{PRODUCER_WG:1,MSUB:2,CLUSTER:2}", "{KSPAN:2}", "{KSPAN:4,CLUSTER:2,L2_HINT:1}",
                   # DYN 1 (the dynamic tail): the calls repeated on one workspace exercise its ticket counter, never
                   # reset (each launch takes chunks + units tickets)
                   "{DYN:1}", "{DYN:1,DYN_K0:0,DYN_CK:3}", "{DYN:1,PRODUCER_WG:1,MSUB:2}",
                   "{DYN:1,DYN_PCT:20,DYN_CK:8,L2_HINT:1}",
                   # DYN_PUB 1: the producer counts the pieces, the sums come back through the ring
                   "{DYN:1,DYN_PUB:1}", "{DYN:1,DYN_PUB:1,DYN_K0:0,DYN_CK:3}",
                   "{DYN:1,DYN_PUB:1,PRODUCER_WG:1,CONSUMERS:3}",
                   # the tensor maps in the device buffer (the defaults pass them by value)
                   "{MAP_PARAMS:0}", "{MAP_PARAMS:0,CLUSTER:2,L2_HINT:1}",
                   # the split tiles' counters prefetched into the L2
                   "{WS_PREFETCH:1}", "{WS_PREFETCH:1,CLUSTER:2}",
                   # a split tile summed by its first part, which waits for the others' count
                   "{FIXED_SUM:1}", "{FIXED_SUM:1,CLUSTER:2,L2_HINT:1}", "{FIXED_SUM:1,CONSUMERS:1,MAX_PARTS:16}",
                   "{FIXED_SUM:2}", "{FIXED_SUM:2,CLUSTER:2,L2_HINT:1}"]


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
@pytest.mark.parametrize("defines", STAGE17_DEFINES)
def test_stage_17_matches_the_fp64_product(tmp_path, precision, defines):
    """Stage 17 (decode_wgmma, tests/test_decode_wgmma.py on the CPU) on the same shapes: TMA boxes past M, N and
    K, tiles cut between CTAs (stream-K), the call repeated and re-checked after timing (its counters must be left
    zero); N = 257 is skipped (16-byte stores of C's rows)."""
    _checked(_run(tmp_path, precision, [f"variant.decode_wgmma.cuda.defines={defines}"], variant="decode_wgmma"),
             precision, lambda m, n, k: n % 8 != 0)


@pytest.mark.parametrize("m,defines", [(64, "{CLUSTER:2}"), (64, "{CLUSTER:2,PRODUCER_WG:1,MSUB:2}"),
                                       (16, "{CLUSTER:2,KSPAN:4}")])
def test_stage_17_clusters_are_all_resident(m, defines, tmp_path):
    """CLUSTER 2 sizes its grid as if every 2-CTA cluster were resident at once (one CTA an SM, up to ~225 KB of shared
    memory each); the driver's occupancy query says how many are. Fewer, and the clusters past them run as a second
    wave (slower, never a hang: no CTA waits for another): the grid rule would have to follow. Printed."""
    from cuda.bindings import driver
    from test_decode_emulation import decode_point

    from gemmlab.backends import nvcc
    from gemmlab.backends.cuda_kernels import build_for, launch_shape

    import cupy

    cupy.zeros(1)  # the device's primary context, current
    p = decode_point(m, 8192, 28672, "bf16", defines, variant="decode_wgmma")
    b = build_for(p)
    shape = launch_shape(p, sm_count=cupy.cuda.Device().attributes["MultiProcessorCount"])
    cubin = nvcc.compile_cubin(b.source, b.flags, tmp_path)

    def ok(result):
        err, *rest = result if isinstance(result, tuple) else (result,)
        assert err == driver.CUresult.CUDA_SUCCESS, err
        return rest[0] if rest else None

    module = ok(driver.cuModuleLoad(str(cubin.path).encode()))
    fn = ok(driver.cuModuleGetFunction(module, b.entry.encode()))
    ok(driver.cuFuncSetAttribute(fn, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 shape.smem_bytes))
    cfg = driver.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = shape.grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = shape.block
    cfg.sharedMemBytes = shape.smem_bytes
    clusters = ok(driver.cuOccupancyMaxActiveClusters(fn, cfg))
    print(f"decode_wgmma {defines} at m={m}: {clusters} 2-CTA clusters resident at once, the grid {shape.grid[0]} CTAs "
          f"({shape.smem_bytes} B of shared memory each)")
    ok(driver.cuModuleUnload(module))
    assert 2 * clusters >= shape.grid[0], f"{clusters} clusters resident, the grid asks for {shape.grid[0] // 2}"


@pytest.mark.parametrize("precision,k", [("bf16", 1032), ("fp8", 1040)])
@pytest.mark.parametrize("defines", ["{KSPAN:2}", "{KSPAN:4}", "{KSPAN:4,CLUSTER:2}"])
def test_stage_17_boxes_wholly_past_k(tmp_path, precision, k, defines):
    """KSPAN 2 and 4 load a tile's last k-block whole: K = 1032 bf16 / 1040 fp8 is 17 / 9 boxes of 128 bytes, so that
    k-block holds one box partly inside K and one or three wholly past it, which TMA must fill with zeros (its bytes
    counted on the barrier); the tests above have no such K."""
    rows = _run(tmp_path, precision, [f"variant.decode_wgmma.cuda.defines={defines}"], variant="decode_wgmma",
                shapes=[[16, 1024, k], [64, 520, k]])
    for r in rows:
        assert r["status"] == "ok", ((r["m"], r["n"], r["k"]), r["status"], r["reason"])
