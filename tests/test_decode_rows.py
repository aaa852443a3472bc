"""Stage 16 (decode_rows) without a GPU: it builds for sm_90a without spills at every n8-tile count in
bf16 and fp8, its SASS reads the weights with 16-byte no-L1 loads and multiplies on the tensor cores,
and its own code runs on the CPU through the host emulation (mma.sync, shared memory, the split
units' counters), launched twice on one workspace, C checked element-wise against FP64 at decode
shapes with tails (N not a multiple of a 16-row unit, K not a multiple of a 512-byte step, M not a
multiple of an n8 tile) and with units split between warps (stream-K over the grid's warps, empty
ranges where there are more warps than items). Mutants (a reduction that drops a warp's partial, a
counter left dirty for the next launch, a tile read without the swizzle it was written with) fail the
same check."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import configs, past_the_first, session_folder
from test_decode_emulation import NEEDS_NVCC, _assert_right, decode_emulator, decode_point, emulate_decode, mutant

from gemmlab.backends import nvcc
from gemmlab.backends.cuda_kernels import build_for, launch_shape

VARIANT = "decode_rows"


def rows_point(m, n, k, precision="bf16", defines=None):
    return decode_point(m, n, k, precision, defines, variant=VARIANT)


@pytest.fixture(scope="module")
def cubin_cache(tmp_path_factory):
    return session_folder(tmp_path_factory.getbasetemp(), "cuda-cache")


# every n8-tile count at the defaults; two CTAs per SM (128 registers) where the YAML allows it (bf16 up
# to 16 tokens, fp8 up to 8); XSHARE 0 (stream-K over warps, each its own activation tiles) beside the default
BUILDS = ([(p, m, None) for p in ("bf16", "fp8") for m in (1, 16, 32, 64)]
          + [("bf16", 1, "{BLOCKS_SMALL:2}"), ("bf16", 16, "{BLOCKS_SMALL:2,XSHARE:0}"), ("fp8", 1, "{BLOCKS_SMALL:2}")]
          + [(p, m, "{XSHARE:0}") for p in ("bf16", "fp8") for m in (16, 64)]
          + [("bf16", 16, "{TRACE:1}"), ("bf16", 1, "{DEFER:1,XSHARE:0}")]
          + [(p, m, "{RING:3}") for p in ("bf16", "fp8") for m in (1, 16, 64)]
          + [(p, m, "{BAL:1,XSHARE:0}") for p in ("bf16", "fp8") for m in (1, 16)]
          + [(p, m, "{XS:0}") for p in ("bf16", "fp8") for m in (1, 16)]
          + [("fp8", m, "{XF16:1}") for m in (1, 16)]
          + [(p, 16, "{WARPS:12}") for p in ("bf16", "fp8")]
          + [(p, m, "{XS_WIDE:1}") for p in ("bf16", "fp8") for m in (32, 64)] + [("fp8", 64, "{XS_WIDE:1,XF16:1}"), ("fp8", 64, "{XS_WIDE:1,XF16:2}"), ("fp8", 16, "{XF16:2}")]
          + [(p, m, "{AFRAG:1}") for p in ("bf16", "fp8") for m in (1, 16, 64)]
          + [(p, m, "{AFRAG:1,XPAD:1}") for p in ("bf16", "fp8") for m in (16,)]
          + [(p, m, "{AFRAG:0,XPAD:0,CVT_H1:0,XS_WIDE:0}") for p in ("bf16", "fp8") for m in (16, 64)]
          + [(p, 64, "{XS_WIDE:1,XPAD:1,AFRAG:1}") for p in ("bf16", "fp8")]
          + [("fp8", m, "{CVT_H1:1,AFRAG:1,XPAD:1}") for m in (1, 16, 64)] + [("fp8", 16, "{CVT_H1:1,XF16:1}")])


# Stage 16's techniques measured and left off (its header and YAML: DEFER, RING, BAL, XS 0, XF16, XSHARE 0, two CTAs
# an SM, 12 warps): each set builds at its first token count and precision in every run, at the others where
# GEMMLAB_EVERY_CONFIG=1 (the emulations below run them every run)
OFF = ("DEFER:1", "RING:", "BAL:1", "XS:0", "XF16", "XSHARE:0", "BLOCKS_SMALL:2", "WARPS:12")
left_off = past_the_first(BUILDS, lambda p, m, d: d if d and any(t in d for t in OFF) else None,
                          lambda p, m, d: f"stage 16's {d} at {p}, {m} tokens")


@NEEDS_NVCC
@pytest.mark.slow
@pytest.mark.parametrize("precision,m,defines", configs(BUILDS, left_off),
                         ids=[f"{p}-m{m}-{d or 'default'}" for p, m, d in BUILDS])
def test_builds_for_sm90a_without_spills(precision, m, defines, cubin_cache):
    b = build_for(rows_point(m, 256, 512, precision, defines))
    report = nvcc.compile_cubin(b.source, b.flags, cubin_cache).report(b.entry)
    assert report.spill_bytes == 0 and report.stack_frame_bytes == 0, (b.kernel_name, report)
    blocks, warps = dict(b.point_defines)["MIN_BLOCKS"], dict(b.defines)["WARPS"]
    assert report.registers <= 65536 // (32 * warps * blocks), (b.kernel_name, report)


@NEEDS_NVCC
@pytest.mark.slow
def test_sass_reads_rows_with_no_l1_loads_into_tensor_cores(cubin_cache):
    """What the header claims, in the machine code: no-L1 16-byte weight loads with the 256-byte L2
    prefetch, 16-byte stores and loads of the shared-memory tile, HMMA (bf16; f16 after e4m3 -> f16
    in fp8), an atomic for split units, nothing in local memory."""
    from test_hopper_kernels import opcodes, sass

    for prec in ("bf16", "fp8"):
        b = build_for(rows_point(1, 256, 512, prec))
        o = opcodes(sass(nvcc.compile_cubin(b.source, b.flags, cubin_cache).path))
        assert not [x for x in o if x.startswith(("LDL", "STL"))], f"{prec} touches local memory"
        assert any(x.startswith("LDG.E.NA.LTC256B.128") for x in o), f"{prec}: weights not streamed"
        assert any(x.startswith("STS.128") for x in o) and any(x.startswith("LDS.128") for x in o), prec
        assert any(x.startswith("ATOMG") for x in o), f"{prec}: no counter for split units"
        if prec == "bf16":
            assert any(x.startswith("HMMA.16816.F32.BF16") for x in o)
        else:
            assert any(x.startswith("HMMA.16816.F32") and "BF16" not in x for x in o)
            assert any(x.startswith("F2FP.F16.E4M3") for x in o)


def test_launch_rules_on_the_h200():
    p = rows_point(1, 6144, 4096)
    s = launch_shape(p, sm_count=132)
    # a weight tile per warp and (XSTAGE with XSHARE) the CTA's two activation tiles of 8 tokens x 512 bytes
    assert s.grid == (132, 1, 1) and s.block == (256, 1, 1) and s.smem_bytes == 8 * 8192 + 2 * 4096
    assert dict(build_for(p).point_defines)["XSTAGE"] == 1
    # 16 tokens: two tiles of 16 x 512 bytes, the CTA's; with XSHARE 0 each warp has its own two
    assert launch_shape(rows_point(16, 6144, 4096), sm_count=132).smem_bytes == 8 * 8192 + 2 * 8192
    assert launch_shape(rows_point(16, 6144, 4096, defines="{XSHARE:0}"), sm_count=132).smem_bytes == 8 * 8192 * 3
    # counters: 384 units -> 1536 bytes, to 256: 1536; partials: 132 x 8 warps x 2 slots x NT 1 x 512
    assert s.workspace_bytes == 1536 + 132 * 8 * 2 * 512
    p2 = rows_point(1, 6144, 4096, defines="{BLOCKS_SMALL:2}")  # two CTAs a SM: the grid follows
    assert dict(build_for(p2).point_defines)["MIN_BLOCKS"] == 2
    assert launch_shape(p2, sm_count=132).grid == (264, 1, 1)
    p64 = rows_point(64, 8192, 8192, "fp8")
    # XS_WIDE by the point (the YAML's -1): past 16 tokens the CTA's two activation tiles (64 tokens: 2 x 64 x
    # 512 bytes; not per warp), at 16 or fewer 0 (it changes nothing there: the builds measured keep their key)
    assert dict(build_for(p64).point_defines) == {"NT": 8, "MIN_BLOCKS": 1, "BALANCE": 0, "XS_WIDE": 1, "XSTAGE": 1}
    assert launch_shape(p64, sm_count=132).grid == (132, 1, 1)
    assert launch_shape(p64, sm_count=132).smem_bytes == 8 * 8192 + 2 * 64 * 512
    assert dict(build_for(rows_point(16, 8192, 8192, "fp8")).point_defines)["XS_WIDE"] == 0
    assert dict(build_for(rows_point(64, 8192, 8192, "fp8", defines="{XS_WIDE:0}")).point_defines)["XSTAGE"] == 0
    assert dict(build_for(rows_point(64, 8192, 8192, defines="{XS_WIDE:1,XSHARE:0}")).point_defines)["XSTAGE"] == 0
    # XF16 2 (fp8): two f16 tiles (twice the bytes) and the e4m3 staging tile: 224 KB at 64 tokens
    assert launch_shape(rows_point(64, 8192, 8192, "fp8", defines="{XS_WIDE:1,XF16:2}"), sm_count=132).smem_bytes \
        == 8 * 8192 + 2 * 64 * 1024 + 64 * 512
    assert launch_shape(rows_point(16, 8192, 8192, "fp8", defines="{XF16:2}"), sm_count=132).smem_bytes \
        == 8 * 8192 + 2 * 16 * 1024 + 16 * 512
    # BALANCE up to 16 tokens: its claim counter in shared memory, 2 x (8 + 64) slots of NT x 512 bytes
    # per CTA after the partials; past 16 tokens the define is dropped (and the build is the plain one)
    pb = rows_point(16, 6144, 4096, defines="{BAL:1,XSHARE:0}")
    assert dict(build_for(pb).point_defines)["BALANCE"] == 1
    sb = launch_shape(pb, sm_count=132)
    assert sb.smem_bytes == 8 * 8192 + 16
    assert dict(build_for(pb).point_defines)["XSTAGE"] == 0  # BALANCE takes the register path alone
    assert sb.workspace_bytes == 1536 + 132 * 8 * 2 * 2 * 512 + 132 * 2 * 72 * 2 * 512
    assert dict(build_for(rows_point(64, 6144, 4096, defines="{BAL:1,XSHARE:0}")).point_defines)["BALANCE"] == 0
    assert dict(build_for(rows_point(16, 6144, 4096, defines="{BAL:1}")).point_defines)["BALANCE"] == 0  # XSHARE 1


# (m, n, k): P steps of 512 bytes per row and 16-row units; with the emulation's 4 SMs the grid has
# 64 warps (MIN_BLOCKS 2) or 32: (1, 37, 200) one step, one warp per unit (C written at once);
# (5, 70, 2056) 9 steps (the last one 16 bytes), 45 items over 64 warps (every unit split, empty
# ranges between); (16, 100, 8200) 33 steps, 231 items (ranges cross unit boundaries: first and last
# slots); (9, 300, 4096) full and split units mixed; (33, 70, 520) and (64, 40, 1032) eight n-tiles.
SHAPES = {
    "bf16": [(1, 37, 200), (5, 70, 2056), (16, 100, 8200), (9, 300, 4096), (33, 70, 520), (64, 40, 1032)],
    "fp8": [(1, 37, 208), (5, 70, 4112), (16, 100, 8208), (64, 40, 1040)],
}


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_decode_rows_computes_x_wt_on_the_cpu(precision, tmp_path_factory):
    folder, rng = tmp_path_factory.mktemp(f"emu-rows-{precision}"), np.random.default_rng(11)
    exes = {}
    for m, n, k in SHAPES[precision]:
        p = rows_point(m, n, k, precision)
        key = tuple(build_for(p).point_defines)
        exes[key] = exes.get(key) or decode_emulator(p, folder.parent)
        c, res = emulate_decode(p, exes[key], folder, rng)
        _assert_right(p, c, res)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_stream_k_over_warps_computes_x_wt_on_the_cpu(precision, tmp_path_factory):
    """XSHARE 0 (stream-K over every warp, each on its own units and steps, with its own activation
    tiles), the default before session13b, at the same shapes as the default (XSHARE 1: a CTA's warps
    on neighbouring units at the same step, including a last block with fewer units than warps: 37,
    70, 100 rows are 3, 5, 7 units)."""
    folder, rng = tmp_path_factory.mktemp(f"emu-rows-xshare-{precision}"), np.random.default_rng(14)
    exes = {}
    for m, n, k in SHAPES[precision]:
        p = rows_point(m, n, k, precision, defines="{XSHARE:0}")
        key = tuple(build_for(p).point_defines)
        exes[key] = exes.get(key) or decode_emulator(p, folder.parent)
        c, res = emulate_decode(p, exes[key], folder, rng)
        _assert_right(p, c, res, "XSHARE 0: ")


@pytest.mark.slow
def test_fp8_activations_held_as_f16_compute_right(tmp_path_factory):
    """XF16 (fp8, the CTA's activation tiles): the activations loaded into registers, converted once and
    stored as f16 with the halves of odd rows swapped: the fp8 shapes (tails in M, N and K; one and two
    n8 tiles; at eight XF16 does not apply and the build is the default one)."""
    folder, rng = tmp_path_factory.mktemp("emu-rows-xf16"), np.random.default_rng(17)
    for m, n, k in SHAPES["fp8"][:3]:
        p = rows_point(m, n, k, "fp8", defines="{XF16:1}")
        c, res = emulate_decode(p, decode_emulator(p, folder.parent), folder, rng)
        _assert_right(p, c, res, "XF16 1: ")
    assert launch_shape(rows_point(16, 6144, 4096, "fp8", defines="{XF16:1}"), sm_count=132).smem_bytes == 8 * 8192 + 2 * 16384


@pytest.mark.slow
@pytest.mark.parametrize("defines", ["{XS_WIDE:1}", "{XS_WIDE:1,XF16:1}", "{XS_WIDE:1,XF16:2}", "{XF16:2}",
                                     "{AFRAG:1}", "{XF16:1,XPAD:1}", "{XS_WIDE:1,XPAD:1,AFRAG:1}", "{CVT_H1:1}",
                                     "{CVT_H1:1,AFRAG:1,XPAD:1}", "{CVT_H1:1,XF16:1}", "{XS_WIDE:1,XPAD:1,AFRAG:1,CVT_H1:1}"])
def test_fp8_activations_staged_past_16_tokens_compute_right(defines, tmp_path_factory):
    """XS_WIDE in fp8: the CTA's activation tiles at four and eight n8 tiles (tokens past M in the last
    one), with the activations converted by every warp or, with XF16, once into f16 tiles (2: from a
    staging tile a step ahead); XF16 2 at one and two n8 tiles too (the first shapes: one-step ranges)."""
    folder, rng = tmp_path_factory.mktemp("emu-rows-xswide"), np.random.default_rng(18)
    shapes = [(33, 70, 528), SHAPES["fp8"][3]] if "XS_WIDE" in defines else SHAPES["fp8"][:3]
    for m, n, k in shapes:
        p = rows_point(m, n, k, "fp8", defines=defines)
        assert dict(build_for(p).point_defines)["XSTAGE"] == (1 if "XS_WIDE" in defines or m <= 16 else 0)
        c, res = emulate_decode(p, decode_emulator(p, folder.parent), folder, rng)
        _assert_right(p, c, res, f"{defines}: ")


@pytest.mark.slow
def test_prefetch_and_swizzle_switched_off_still_compute_right(tmp_path_factory):
    folder, rng = tmp_path_factory.mktemp("emu-rows-off"), np.random.default_rng(12)
    p = rows_point(5, 70, 2056, defines="{PREFETCH:0,SWIZZLE:0}")
    c, res = emulate_decode(p, decode_emulator(p, folder.parent), folder, rng)
    _assert_right(p, c, res)


# each define at the shapes that show what it changes (one emulator build per n8-tile count it runs at):
# the range-crossing shapes (16, 100, 8200) and (9, 300, 4096) (NT 2, first and last slots, full and split
# units), and besides them: (5, 70, 2056) where ranges are a step or two long (DEFER's pending first
# unit; ranges shorter than the ring; XSTAGE's first copy is also its last), (33, 70, 520) where the
# define still applies at eight n-tiles (RING)
CROSS = [(16, 100, 8200), (9, 300, 4096)]
SHORT, WIDE = (5, 70, 2056), (33, 70, 520)
DEFINE_SHAPES = {
    "{DEFER:1,XSHARE:0}": [SHORT, *CROSS],
    "{TRACE:1}": CROSS,
    "{RING:2}": [SHORT, *CROSS, WIDE],
    "{RING:3,TRACE:1}": [SHORT, CROSS[0], WIDE],
    "{RING:4,WARPS:4,SWIZZLE:0}": [SHORT, CROSS[1], WIDE],
    "{RING:2,XSHARE:0}": [SHORT, *CROSS],
    "{BAL:1,XSHARE:0}": [SHORT, *CROSS],
    "{BAL:1,TRACE:1,XSHARE:0}": CROSS,
    "{XS:0}": [SHORT, *CROSS],
    "{XS:0,XSHARE:0}": [SHORT, *CROSS],
    # XSTAGE past 16 tokens (the CTA's tiles): four and eight n-tiles, tokens past M in the last tile
    "{XS_WIDE:1}": [WIDE, (64, 40, 1032), CROSS[0]],
    # the weight tile in the A operand's order; the activation tiles' pad rows zeroed once (M = 5, 9, 33)
    "{AFRAG:1}": [SHORT, *CROSS, WIDE],
    # the defaults before session28b: rows as loaded, tested reads, shifted conversions, no staging past 16
    "{AFRAG:0,XPAD:0,CVT_H1:0,XS_WIDE:0}": [SHORT, *CROSS, WIDE],
    "{XPAD:1}": [SHORT, *CROSS],
    "{XPAD:1,XSHARE:0}": [SHORT, CROSS[1]],
    "{XS_WIDE:1,XPAD:1,AFRAG:1}": [WIDE, (64, 40, 1032), CROSS[1]],
    # 384 threads: the CTA's activation copy ends in a part-empty pass (256 or 512 chunks a step)
    "{WARPS:12}": [SHORT, *CROSS],
}


@pytest.mark.slow
# every run: each technique's plain set; the combinations of two left-off techniques where GEMMLAB_EVERY_CONFIG=1
@pytest.mark.parametrize("defines", configs(list(DEFINE_SHAPES), lambda d: f"stage 16's {d}" if d in (
    "{RING:3,TRACE:1}", "{RING:4,WARPS:4,SWIZZLE:0}", "{RING:2,XSHARE:0}", "{BAL:1,TRACE:1,XSHARE:0}", "{XS:0,XSHARE:0}",
    "{XPAD:1,XSHARE:0}") else None))
def test_deferred_arrival_ring_and_traced_builds_compute_right(defines, tmp_path_factory):
    """DEFER 1 (a split first unit arrives at its counter at the end of the warp's range), TRACE 1
    (stamps after the partials: the workspace grows by 32 bytes a warp, which AddressSanitizer holds it
    to), the cp.async ring (RING stages per warp; the emulation lands a copy only when
    cp.async.wait_group retires it, so a tile read too early holds NaN), BALANCE, and the activations
    read from global memory inside the step (XS 0, the path before XSTAGE), alone and with XSHARE:
    the shapes whose ranges cross unit boundaries, and ranges shorter than the ring."""
    folder, rng = tmp_path_factory.mktemp("emu-rows-defines"), np.random.default_rng(15)
    for m, n, k in DEFINE_SHAPES[defines]:
        p = rows_point(m, n, k, defines=defines)
        c, res = emulate_decode(p, decode_emulator(p, folder.parent), folder, rng)
        _assert_right(p, c, res, f"{defines}: ")


@pytest.mark.slow
@pytest.mark.parametrize("precision,m,n,k", [("bf16", 1, 400, 65536), ("fp8", 16, 200, 65536), ("bf16", 3, 4000, 256)])
def test_balance_with_long_and_short_ranges(precision, m, n, k, tmp_path_factory):
    """BALANCE where a CTA's range is long (1600 steps: the guided chunks reach their cap of 64 and the
    last one takes the rest; 416 in fp8 at 16 tokens) and where it is cut into many one-step units
    (K = 256: one step a row, 63 units a CTA)."""
    folder, rng = tmp_path_factory.mktemp("emu-rows-balance"), np.random.default_rng(16)
    p = rows_point(m, n, k, precision, defines="{BAL:1,XSHARE:0}")
    assert dict(build_for(p).point_defines)["BALANCE"] == 1
    c, res = emulate_decode(p, decode_emulator(p, folder.parent), folder, rng)
    _assert_right(p, c, res, "BALANCE: ")


MUTANTS = [
    # the deferred first unit never arrives: its counter stays short, nobody writes its rows of C
    ("lost_deferred_arrival", "!more && pend ? u0 : -1", "-1", 1, "{DEFER:1,XSHARE:0}"),
    # BALANCE: a chunk's last unit written over its first one's slot; a unit shared with the next CTA
    # written to C from this CTA's part alone
    ("balance_slot_clash", "2 * q + (first_seg ? 0 : 1)", "2 * q", 1, "{BAL:1,XSHARE:0}"),
    ("balance_no_fixup", "if (ua >= c.c0 && ub <= c1) {", "if (true) {", 1, "{BAL:1,XSHARE:0}"),
    # the ring multiplies a tile before its copies are waited for (one group too many left in flight)
    ("ring_early_read", "cp_async_wait<RING - 1>();", "cp_async_wait<RING>();", 1, "{RING:3}"),
    # XSTAGE: a step's activations read before their copy is waited for; the next step's copied over them
    ("xstage_early_read", "cp_async_wait<1>();", "cp_async_wait<2>();", 1, "{XSHARE:0}"),
    # XSTAGE with XSHARE: the CTA's copies read without the barrier that makes them visible
    # XF16: the f16 activations read without the odd rows' swap they were stored with
    ("xf16_unswapped_read", "lds16(xt + token * kXRow + xhalf(token, 2 * q) * 16)", "lds16(xt + token * kXRow + 2 * q * 16)", 1,
     "{XF16:1}"),
    # XF16 2: the next step's activations converted before their copy has landed
    ("xf16_staged_early", "cp_async_wait<0>();\n      load_x_staged", "load_x_staged", 1, "{XF16:2}"),
    # AFRAG: the A operands read back with rows g and g + 8 swapped against how they were stored
    ("afrag_rows_swapped", "const U4 a{f0.x, f0.z, f1.x, f1.z}, b{f0.y, f0.w, f1.y, f1.w};",
     "const U4 b{f0.x, f0.z, f1.x, f1.z}, a{f0.y, f0.w, f1.y, f1.w};", 1, "{AFRAG:1}"),
    ("xcta_no_barrier", "cp_async_wait<0>();\n    __syncthreads();", "cp_async_wait<0>();", 1, None),
    ("xstage_tile_clash", "copy_x<32>(xtiles + ((it - i0 + 1) & 1) * kXTile", "copy_x<32>(xtiles + ((it - i0) & 1) * kXTile", 1,
     "{XSHARE:0}"),
    ("drop_partial", "for (int p = p0; p <= p1; ++p)", "for (int p = p0 + 1; p <= p1; ++p)", 1, None),
    ("dirty_counter", "if (lane == 0) j.counters[u] = 0;", "", 2, None),
    ("unswizzled_read", "const U4 a = lds16(tile + g * kStep + swz(g, q) * 16);",
     "const U4 a = lds16(tile + g * kStep + q * 16);", 1, "{AFRAG:0}"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,old,new,launches,defines", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_emulation_catches_a_broken_kernel(name, old, new, launches, defines, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"emu-rows-{name}")
    # BALANCE's mutants where chunks cross units (16-step units, static chunks of 7 steps)
    if "XF16" in (defines or ""):  # an fp8 define
        p = rows_point(5, 70, 4112, "fp8", defines=defines)
    else:
        p = rows_point(9, 300, 4096, defines=defines) if "BAL" in (defines or "") else rows_point(5, 70, 2056, defines=defines)
    exe = decode_emulator(p, folder.parent, mutant(folder.parent, name, old, new, build_for(p).source))
    c, res = emulate_decode(p, exe, folder, np.random.default_rng(13), launches=launches)
    assert not res.passed, f"the mutant {name} passed the check"
