"""Stage 14 (decode_splitk) without a GPU: it builds for sm_90a without spills in every configuration
of its sweep, its SASS streams the weights and multiplies on the tensor cores as its header says, its
launch rules (the split S, shared memory, workspace) hold on the decode shapes, and its own code runs
on the CPU through the host emulation (kernels/cuda/common/host_emulation: mma.sync, shuffles, the
bulk copies and mbarriers), launched twice on one workspace, C checked element-wise against FP64 at
small decode shapes with tails (M = 1, 5, 16, 64; N not a multiple of a unit; K not a multiple of a
chunk nor of the split), bf16 and fp8 with per-tensor scales. Mutants of the kernel (a reduction that
drops a split, counters left dirty) fail the same check. Plus the launcher's ``let`` and
``workspace_bytes`` rules that the stage brought.

Builds are what costs time here: one host emulator per configuration and session (shapes and the
split are run-time arguments: the split is forced through the YAML's ``let``, not a define).
"""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import compose_cfg, configs, session_folder

from gemmlab.backends import nvcc
from gemmlab.backends.cuda_kernels import build_for, launch_shape
from gemmlab.measure import check
from gemmlab.points import expand

VARIANT = "decode_splitk"
# The define sweep of the session's decode_ablation step (the YAML's header lists it too).
DECODE_SWEEP = ["{X_SMEM:0}", "{SPLIT_K:0}", "{W_DEPTH:2,W_DEPTH_SMALL:4}", "{W_HINT:0}", "{MT:1,W_DEPTH:8}",
                "{M1_SIMT:1}", "{X_BLOCKS:1}", "{FP8_F16_MMA:0,W_DEPTH:3}"]
SM_COUNT = 4  # small grids on the CPU; the H200's 132 below, where the rules are checked
H200_SMS = 132
SMEM_OPTIN = 232448  # sm_90's 227 KB per block


def decode_point(m, n, k, precision="bf16", defines=None, split=None, sizes=None, variant=VARIANT):
    """A decode stage's point (stage 14's unless ``variant`` names another) at layout nt, fp8 per-tensor scaled."""
    over = [f"variant={variant}", f"precision={precision}", "layouts=[nt]"]
    over += sizes or ["sizes.square=[]", f"sizes.shapes=[[{m},{n},{k}]]"]
    if precision == "fp8":
        over.append("measure.fp8_scaling=tensor")
    if defines:
        over.append(f"variant.{variant}.cuda.defines={defines}")
    if split:
        over.append(f"variant.{variant}.cuda.let.S={split}")
    pts = expand(compose_cfg(over))
    if sizes:
        return pts
    (p,) = pts
    assert p.skip_reason is None, p.skip_reason
    return p


# ---- builds ---------------------------------------------------------------------------------------
NEEDS_NVCC = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not found on this machine")


@pytest.fixture(scope="module")
def cubin_cache(tmp_path_factory):
    return session_folder(tmp_path_factory.getbasetemp(), "cuda-cache")


# The default builds (also test_cuda_kernels.py's, one cache) and the sweep's entries that change what
# holds registers (W_HINT, X_BLOCKS and SPLIT_K change an instruction, a loop count, a launch rule).
BUILDS = [("bf16", None), ("fp8", None)] + \
         [("bf16", d) for d in ("{X_SMEM:0}", "{W_DEPTH:2,W_DEPTH_SMALL:4}", "{MT:1,W_DEPTH:8}", "{M1_SIMT:1}")] + \
         [("fp8", "{M1_SIMT:1}"), ("fp8", "{FP8_F16_MMA:0,W_DEPTH:3}")] + \
         [(p, "{W_PIPE:1}") for p in ("bf16", "fp8")] + [("bf16", "{W_PIPE:1,W_PIPE_MAX_M:64}")]  # TMA W ring


@NEEDS_NVCC
@pytest.mark.slow
# every run: the defaults and the TMA weight ring; the sweep's other sets (measured, left off: the decode experiment
# runs stage 14 at its defaults) build where GEMMLAB_EVERY_CONFIG=1 and are emulated on the CPU every run
# (test_decode_sweep_configurations_on_the_cpu). Stage 14's builds are the CPU suite's slowest (7-12 s each)
@pytest.mark.parametrize("precision,defines", configs(
    BUILDS, lambda p, d: None if d in (None, "{W_PIPE:1}") else f"stage 14's {d} ({p}) build"),
    ids=[f"{p}-{d or 'default'}" for p, d in BUILDS])
def test_builds_for_sm90a_without_spills(precision, defines, cubin_cache):
    b = build_for(decode_point(16, 64, 64, precision, defines))
    cubin = nvcc.compile_cubin(b.source, b.flags, cubin_cache)
    report = cubin.report(b.entry)
    assert report.spill_bytes == 0 and report.stack_frame_bytes == 0, (b.kernel_name, report)
    assert report.registers <= 255


@NEEDS_NVCC
@pytest.mark.slow
def test_sass_streams_weights_into_tensor_cores(cubin_cache):
    """What the header claims, in the machine code: no-L1 weight loads with the 256-byte L2 prefetch,
    bulk copies (the TMA engine) for X, HMMA bf16 (and f16 for fp8's converted operands, e4m3 -> f16
    once per byte), an atomic per unit, and nothing in local memory."""
    from test_hopper_kernels import opcodes, sass

    ops = {}
    for prec in ("bf16", "fp8"):
        b = build_for(decode_point(16, 64, 64, prec))
        ops[prec] = opcodes(sass(nvcc.compile_cubin(b.source, b.flags, cubin_cache).path))
    for prec, o in ops.items():
        assert not [x for x in o if x.startswith(("LDL", "STL"))], f"{prec} touches local memory"
        assert any(x.startswith("LDG.E.NA.LTC256B.128") for x in o), f"{prec}: weights not streamed"
        assert any(x.startswith("UBLKCP") for x in o), f"{prec}: no bulk copies of the activations"
        assert any(x.startswith("ATOMG") for x in o), f"{prec}: no split-K counter"
    assert any(x.startswith("HMMA.16816.F32.BF16") for x in ops["bf16"])
    assert any(x.startswith("HMMA.16816.F32") and "BF16" not in x for x in ops["fp8"])
    assert any(x.startswith("F2FP.F16.E4M3") for x in ops["fp8"])


@NEEDS_NVCC
@pytest.mark.slow
def test_sass_of_the_tma_weight_ring(cubin_cache):
    """W_PIPE 1 at every M (W_PIPE_MAX_M 64): the weights come by bulk copies (the TMA engine) into
    shared memory and from there by 16-byte lds into the MMAs: no streaming global loads of them, the
    ring on mbarriers."""
    from test_hopper_kernels import opcodes, sass

    for prec in ("bf16", "fp8"):
        b = build_for(decode_point(16, 64, 64, prec, "{W_PIPE:1,W_PIPE_MAX_M:64}"))
        o = opcodes(sass(nvcc.compile_cubin(b.source, b.flags, cubin_cache).path))
        assert not [x for x in o if x.startswith(("LDL", "STL"))], f"{prec} touches local memory"
        assert not any(x.startswith("LDG.E.NA") for x in o), f"{prec}: weights still loaded into registers"
        assert any(x.startswith("UBLKCP") for x in o) and any(x.startswith("LDS.128") for x in o), prec
        assert any(x.startswith("SYNCS") for x in o), f"{prec}: no mbarrier waits"
        assert any(x.startswith("HMMA.16816.F32") for x in o), prec


# ---- launch rules at the H200's decode shapes --------------------------------------------------------
def test_split_rule_fits_every_decode_shape_in_shared_memory():
    """On the H200 (132 SMs): every decode shape of the experiment (tokens 1, 16, 64) gets a split that
    fits its X slice in 227 KB, a grid of at most 132 CTAs, non-empty K-slices; no split at M = 1;
    Llama-3 8B's qkv projection at 64 tokens splits in four."""
    shapes = ["sizes=llm", "sizes.tokens=[1,16,64]", "sizes.model_names=[llama3_8b,llama3_70b,deepseek_v3]"]
    seen = 0
    for prec, defines in (("bf16", None), ("fp8", None), ("bf16", "{W_PIPE:1}"), ("fp8", "{W_PIPE:1}")):
        for p in decode_point(0, 0, 0, prec, defines, sizes=shapes):
            if p.skip_reason:  # the routed experts' batches
                assert "batch" in p.skip_reason, p.skip_reason
                continue
            s = launch_shape(p, sm_count=H200_SMS)
            let = dict(s.let)
            assert s.smem_bytes <= SMEM_OPTIN, (p.shape_name, prec, s)
            assert s.grid[0] * s.grid[1] <= H200_SMS and s.grid[1] == let["S"] <= let["CKT"]
            if p.m == 1:
                assert let["S"] == 1, (p.shape_name, let)
            seen += 1
    assert seen >= 4 * 3 * 15
    s = launch_shape(decode_point(64, 6144, 4096), sm_count=H200_SMS)
    assert s.grid == (33, 4, 1) and dict(s.let)["S"] == 4, s


def test_split_k_and_x_smem_switched_off_never_split():
    for defines in ("{SPLIT_K:0}", "{X_SMEM:0}"):
        s = launch_shape(decode_point(16, 6144, 4096, defines=defines), sm_count=H200_SMS)
        assert s.grid == (H200_SMS, 1, 1), (defines, s)
    # without the split, 64 tokens of K = 4096 need 512 KB of X: more than an SM has (skipped on the GPU)
    s = launch_shape(decode_point(64, 6144, 4096, defines="{SPLIT_K:0}"), sm_count=H200_SMS)
    assert s.smem_bytes > SMEM_OPTIN


def test_workspace_holds_what_the_kernel_indexes():
    """Counters GX x UMAX (to 256 bytes), then S x GX x UMAX units of 16 MT rows x 8 NTP tokens fp32:
    the kernel's own arithmetic (14_decode_splitk.cu: partials after ((GX*umax + 63)/64)*64 ints)."""
    for m, n, k in ((64, 6144, 4096), (16, 28672, 4096), (1, 256, 7168), (64, 7168, 18432)):
        p = decode_point(m, n, k)
        s = launch_shape(p, sm_count=H200_SMS)
        gx, split = s.grid[0], s.grid[1]
        umax = -(-(-(-n // gx)) // 32)  # units of 32 rows (MT 2) in the largest row range
        ntp = 1 if m <= 8 else 2 if m <= 16 else 4 if m <= 32 else 8
        units_bytes = split * gx * umax * (32 * 8 * ntp * 4)  # fp32, 32 rows x 8 ntp tokens each
        need = ((gx * umax + 63) // 64) * 64 * 4 + (units_bytes if split > 1 else 0)
        assert s.workspace_bytes == need, (m, n, k, s)


# ---- the launcher's let and workspace rules -------------------------------------------------------
def test_let_names_are_evaluated_in_order_and_recorded():
    p = decode_point(16, 6144, 4096)
    s = launch_shape(p, sm_count=H200_SMS)
    names = [name for name, _ in s.let]
    assert names == ["NTP", "CKT", "HB", "WD", "WRING", "XBUD", "S", "GX", "UMAX", "XSTRIDE"]
    assert dict(s.let)["GX"] * dict(s.let)["S"] <= H200_SMS
    with pytest.raises(ValueError, match="would hide the name 'MT'"):
        launch_shape(decode_point(16, 64, 64, sizes=["sizes.square=[]", "sizes.shapes=[[16,64,64]]",
                                                      f"+variant.{VARIANT}.cuda.let.MT=1"])[0], sm_count=4)


def test_variants_without_let_or_workspace_keep_their_keys_and_launch():
    """The new fields leave every other cuda variant as it was: no workspace argument, no `let`
    (and, unset, out of the point key: test_workloads pins one such key)."""
    cfg = compose_cfg(["variant=[smem_tiled,wgmma_fp8]", "precision=[fp32,fp8]", "layouts=[nt]",
                       "sizes.square=[256]", "sizes.shapes=[]"])
    for p in expand(cfg):
        if p.skip_reason:
            continue
        s = launch_shape(p, sm_count=H200_SMS)
        assert s.workspace_bytes is None and s.let == ()


# ---- the kernel on the CPU --------------------------------------------------------------------------
def decode_emulator(point, folder: Path, source: Path | None = None) -> Path:
    """The host-emulation build of ``point`` (another ``source``: a mutant), once per configuration."""
    import shutil

    from test_cuda_kernels import emulator

    if shutil.which("g++") is None:
        pytest.skip("g++ not found (host emulation)")
    build = build_for(point)
    if source is not None:
        build = dataclasses.replace(build, source=source)
    # the launcher's order: A, B, C, M, N, K, [tensor maps,] [fp8 scales,] workspace
    from test_hopper_emulation import emu_maps_args

    maps = emu_maps_args(point, build) + ", " if point.variant_cfg.cuda.get("tensor_maps") else ""
    scales = "gemm_host::emu_scale(0), gemm_host::emu_scale(1), " if point.precision == "fp8" else ""
    return emulator(build, str(folder), f"a.data(), b.data(), c.data(), M, N, K, {maps}{scales}gemm_host::emu_workspace()")


def decode_operands(point, rng):
    """Random decode operands for ``point``: (A and B as the FP64 check reads them, A's bytes and the weights'
    bytes stored (out, in) as the stage reads them (layout nt), the emulation's environment for the scales).
    fp8: e4m3 with per-tensor scales, checked against the product of the dequantized inputs."""
    import ml_dtypes

    from gemmlab import fp8

    m, n, k = point.m, point.n, point.k
    if point.precision == "fp8":
        a32 = rng.standard_normal((m, k), dtype=np.float32) * 3
        b32 = rng.standard_normal((k, n), dtype=np.float32) / 5
        sc = fp8.scales_for(np, "tensor", a32, b32)
        qa, qb = fp8.quantize_host(a32, sc.a), fp8.quantize_host(b32, sc.b)
        return (fp8.dequantize(np, qa, sc.a), fp8.dequantize(np, qb, sc.b), qa.view(np.uint8),
                np.ascontiguousarray(qb.T).view(np.uint8), {"GEMMLAB_EMU_SCALES": "%.9g,%.9g" % (sc.a, sc.b)})
    a_ref = rng.standard_normal((m, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b_ref = rng.standard_normal((k, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    return a_ref, b_ref, a_ref, np.ascontiguousarray(b_ref.T), {}  # weights stored (out, in): layout nt


def emulate_decode(point, exe: Path, folder: Path, rng, launches: int = 2, sm_count: int = SM_COUNT, env=None):
    """Run the emulated launch ``launches`` times on one workspace (C poisoned before each) on random
    inputs, the grid as the launcher sizes it for ``sm_count`` SMs (``env``: more of the driver's settings);
    returns (C as float64, the check's result against FP64)."""
    import ml_dtypes

    m, n, k = point.m, point.n, point.k
    a_ref, b_ref, a_bytes, w_bytes, scales = decode_operands(point, rng)
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "GEMMLAB_EMU_LAUNCHES": str(launches), **scales, **(env or {})}
    shape = launch_shape(point, sm_count=sm_count)
    env["GEMMLAB_EMU_WORKSPACE_BYTES"] = str(shape.workspace_bytes)
    a_bytes.tofile(folder / "a.bin")
    w_bytes.tofile(folder / "b.bin")
    r = subprocess.run([str(exe), str(m), str(n), str(k), *map(str, shape.grid), *map(str, shape.block),
                        str(shape.smem_bytes), str(folder / "a.bin"), str(folder / "b.bin"), str(folder / "c.bin")],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, f"{point.m}x{point.n}x{point.k} grid {shape.grid}: exit {r.returncode}\n{r.stderr[-4000:]}"
    c = np.fromfile(folder / "c.bin", dtype=ml_dtypes.bfloat16).reshape(m, n).astype(np.float64)
    ref = check.Reference.gemm(np, a_ref, b_ref, check.model_of(point), point.tolerance, point.out_dtype)
    return c, ref.verify(c)


# (m, n, k, split): N = 70, 100, 37 are no multiple of a 32-row unit (nor of SM_COUNT row ranges);
# K = 200 bf16 / 208 fp8 is 6.25 / 3.25 64-byte chunks (a 16-byte piece in the last one), split
# over 3 or 2 (chunks per split unequal); K = 264 bf16 (8.25 chunks) over 4; at M = 16 in fp8, K = 400
# (6.25 chunks) without a split. Each runs twice on one workspace: the counters must come back to zero.
# Longer K (2048 / 1024) gives several blocks per unit, each warp's range beginning at another K
# position, and up to 8 X pieces fetched in the order the warps need them.
SHAPES = {
    "bf16": [(1, 37, 200, 2), (5, 70, 200, None), (16, 100, 264, 4), (64, 70, 200, 3), (16, 70, 2048, None),
             (64, 100, 1024, 2)],
    "fp8": [(1, 37, 208, 3), (5, 70, 208, None), (16, 100, 400, None), (64, 70, 208, 2), (64, 40, 1024, None)],
}


def _assert_right(point, c, res, what=""):
    assert not np.isnan(c).any(), f"{what}{np.isnan(c).sum()} elements of C never written at {point.m}x{point.n}x{point.k}"
    assert res.passed, (f"{what}{point.precision} at {point.m}x{point.n}x{point.k}: {res.failure()} "
                        f"(elem_max {res.elem_max:.3g}, rel_error {res.rel_error:.3g})")


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_decode_computes_x_wt_on_the_cpu(precision, tmp_path_factory):
    folder, rng = tmp_path_factory.mktemp(f"emu-decode-{precision}"), np.random.default_rng(5)
    exe = None
    for m, n, k, split in SHAPES[precision]:
        p = decode_point(m, n, k, precision, split=split)
        exe = exe or decode_emulator(p, folder.parent)
        c, res = emulate_decode(p, exe, folder, rng)
        _assert_right(p, c, res)


# The sweep's entries that change the emulated code (W_HINT only changes the load instruction and
# SPLIT_K only the YAML's S, which the default's shapes cover at S = 1), each on the shapes that
# exercise it (X_BLOCKS 1 with the shallow ring: one build for two pipeline changes); M1_SIMT and
# FP8_F16_MMA in fp8 too (their own conversions).
SWEEP_CASES = [
    ("bf16", "{X_SMEM:0}", [(16, 70, 200, None), (64, 70, 200, None)]),
    ("bf16", "{W_DEPTH:2,W_DEPTH_SMALL:4,X_BLOCKS:1}", [(5, 70, 264, 2), (64, 100, 200, 3)]),
    ("bf16", "{MT:1,W_DEPTH:8}", [(16, 100, 264, 2), (64, 70, 200, 3)]),
    ("bf16", "{M1_SIMT:1}", [(1, 37, 200, 2)]),
    ("fp8", "{M1_SIMT:1}", [(1, 70, 208, 2)]),
    ("fp8", "{FP8_F16_MMA:0,W_DEPTH:3}", [(16, 100, 208, 2), (64, 37, 400, None)]),
    # W_PIPE 1 (the TMA weight ring) at every M: every n8-tile count (M 1, 5, 16, 33, 64), N and K
    # tails, splits, several blocks per unit (K = 2048 / 1024: ring stages reused across units and
    # warps); then the even-chunk stage (rows padded to 64 mod 128), deeper rings and MT 1; X through
    # L1 with the default W_PIPE_MAX_M (M = 64 on the register ring beside the ring's layout); M1_SIMT
    ("bf16", "{W_PIPE:1,W_PIPE_MAX_M:64}", [(1, 37, 200, 2), (5, 70, 200, None), (16, 100, 264, 4), (33, 70, 200, 2),
                            (64, 70, 200, 3), (16, 70, 2048, None)]),
    ("fp8", "{W_PIPE:1,W_PIPE_MAX_M:64}", [(1, 37, 208, 3), (16, 100, 400, None), (33, 70, 208, 2), (64, 40, 1024, None)]),
    ("bf16", "{W_PIPE:1,W_PIPE_MAX_M:64,MT:1,WP_CHUNKS:4,WP_CHUNKS_SMALL:2,WP_STAGES:3,WP_STAGES_SMALL:4}",
     [(5, 70, 264, 2), (64, 70, 200, 3)]),
    ("bf16", "{W_PIPE:1,X_SMEM:0}", [(16, 70, 200, None), (64, 70, 200, None)]),
    ("fp8", "{W_PIPE:1,M1_SIMT:1}", [(1, 70, 208, 2)]),
]


@pytest.mark.slow
@pytest.mark.parametrize("precision,defines,shapes", SWEEP_CASES, ids=[f"{p}-{d}" for p, d, _s in SWEEP_CASES])
def test_decode_sweep_configurations_on_the_cpu(precision, defines, shapes, tmp_path_factory):
    folder, rng = tmp_path_factory.mktemp("emu-decode-sweep"), np.random.default_rng(6)
    exe = None
    for m, n, k, split in shapes:
        p = decode_point(m, n, k, precision, defines, split)
        exe = exe or decode_emulator(p, folder.parent)
        c, res = emulate_decode(p, exe, folder, rng)
        _assert_right(p, c, res, f"{defines}: ")


def mutant(folder: Path, name: str, old: str, new: str, source: Path | None = None) -> Path:
    """The stage's source (stage 14's unless given) with one deliberate bug (the replaced text must
    occur exactly once)."""
    source = source or build_for(decode_point(16, 64, 64)).source
    text = source.read_text()
    assert text.count(old) == 1, f"the mutation {name!r} no longer matches the kernel"
    out = session_folder(folder, "decode-mutants") / f"{source.stem}_{name}.cu"
    out.write_text(text.replace(old, new))
    return out


@pytest.mark.slow
def test_emulation_catches_a_reduction_that_drops_a_split(tmp_path_factory):
    """The check above can fail: the last split sums splits 1..S-1 only (split 0's partial dropped)."""
    folder = tmp_path_factory.mktemp("emu-decode-drop")
    src = mutant(folder.parent, "drop_split", "for (int s = 0; s < p.S; ++s)", "for (int s = 1; s < p.S; ++s)")
    p = decode_point(16, 100, 264, split=3)
    c, res = emulate_decode(p, decode_emulator(p, folder.parent, src), folder, np.random.default_rng(7), launches=1)
    assert not res.passed and res.elem_fail > 0, "a dropped split went unnoticed"


@pytest.mark.slow
def test_emulation_catches_counters_left_dirty_for_the_next_launch(tmp_path_factory):
    """Right once, wrong when launched again: counters not reset make the second launch's reduction
    fire a split early (or never), which the check of the second launch's C catches."""
    folder = tmp_path_factory.mktemp("emu-decode-dirty")
    src = mutant(folder.parent, "dirty_counters", "if (lane == 0) p.counters[unit] = 0;", "")
    p = decode_point(16, 100, 264, split=3)
    exe = decode_emulator(p, folder.parent, src)
    c, res = emulate_decode(p, exe, folder, np.random.default_rng(8), launches=1)
    _assert_right(p, c, res, "the first launch: ")
    c, res = emulate_decode(p, exe, folder, np.random.default_rng(8), launches=2)
    assert np.isnan(c).any() or not res.passed, "counters left dirty went unnoticed"


@pytest.mark.slow
def test_emulation_catches_a_w_ring_without_its_k_tail_zeroed(tmp_path_factory):
    """W_PIPE 1: the ring's bytes past K (never written by the copies) start as the emulated shared
    memory's poison (NaN); a kernel that does not zero them once fails the check."""
    folder = tmp_path_factory.mktemp("emu-decode-wtail")
    src = mutant(folder.parent, "w_tail", "if (tail != 0 && p.ca + p.ck == chunks) {", "if (false) {")
    p = decode_point(16, 100, 264, defines="{W_PIPE:1}", split=4)
    c, res = emulate_decode(p, decode_emulator(p, folder.parent, src), folder, np.random.default_rng(9), launches=1)
    assert not res.passed, "a W ring tail left unzeroed went unnoticed"


def test_header_states_the_defines_the_yaml_sets():
    """Every define of the YAML is one the kernel reads or its launch rules use, and the header names it."""
    p = decode_point(16, 64, 64)
    src = build_for(p).source.read_text()
    header = src.split("#include")[0]
    for name in p.variant_cfg.cuda.defines:
        assert re.search(rf"\b{name}\b", header), f"the header does not mention {name}"


def test_the_sweep_is_the_same_in_the_session_script_and_the_yaml():
    """DECODE_SWEEP, the session's decode_ablation step and the YAML header list one sweep."""
    from conftest import ROOT

    script = (ROOT / ".ci" / "h200-session.sh").read_text()
    session = re.search(r'DECODE_DEFINES="([^"]+)"', script).group(1).split()
    assert session == ["{SPLIT_K:1}", *DECODE_SWEEP], session
    ablation = re.search(r"decode_sweep decode_ablation .*?'(\{[^']+)'", script, re.S).group(1).split(",{")
    assert ["{" + e if i else e for i, e in enumerate(ablation)] == session
    yaml_text = (ROOT / "conf" / "variant" / f"{VARIANT}.yaml").read_text()
    listed = re.search(r"'variant\.decode_splitk\.cuda\.defines=([^']+)'", yaml_text).group(1)
    assert listed == ",".join(DECODE_SWEEP)
