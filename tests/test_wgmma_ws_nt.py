"""Stage 12 (wgmma_ws) at layout nt, and its tile orders and stream-K (issue 32), without a GPU.

- The launcher: ``cuda.point_defines`` (a define computed from the point; stage 12's B_KMAJOR from
  its layout), ``layout`` as a name in YAML expressions; nn and nt run, tn and tt are skipped saying
  why; the Llama-3 70B prefill shapes run at nt; the launch rules at the H200's sizes.
- The tile schedules (kernels/cuda/hopper/tile_schedule.cuh) on the host at the grids the H200 runs
  (common/host_emulation/schedule_check.cpp): every tile once in each order, every k-tile of every
  tile once with stream-K, at most two parts per tile; the check fails a schedule that maps a tile
  twice.
- Builds: every entry of WS_NT_SWEEP (the session's tune_ws_nt list) at nn and nt for sm_90a without
  spills, with the SASS each claims (the transpose bit for nn only, atomics with stream-K only); the
  default nn build is, instruction for instruction, the SASS main built before issue 32 (the kernel
  the H200 measured), which PRODUCER_SCHEDULES 1 is not; STREAM_K without it is skipped saying why.
- The stage's own code on the CPU (host emulation): layout nt at every edge on both scheduling paths
  (each role walks the tiles; PRODUCER_SCHEDULES 1), each tile order, stream-K with cut tiles and its
  workspace reused by a second launch, checked element-wise against FP64; and
  mutants (B read with the transpose bit at nt, a tile order that never visits a column, stream-K
  runs that overlap by a k-tile, counters left dirty) failing the same check.

Builds are what costs time: one host emulator per configuration and session, the shapes are run-time
arguments; the shapes are the smallest that show each property.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, compose_cfg, session_folder

from gemmlab.backends.cuda_kernels import CudaKernels, build_for, launch_shape
from gemmlab.expr import evaluate
from gemmlab.points import expand

VARIANT = "wgmma_ws"
# The session's tune_ws_nt sweep (.ci/h200-session.sh; the YAML's header lists it too): deltas from
# the YAML's defines, the first the default. B_KMAJOR is not in it: it follows the layout.
# PRODUCER_SCHEDULES 1 alone measures what the producer-only schedule costs; stream-K needs it.
WS_NT_SWEEP = ["{RASTER:0,STREAM_K:0,PRODUCER_SCHEDULES:0}", "{PRODUCER_SCHEDULES:1}", "{RASTER:1}", "{RASTER:2}",
               "{GRID_CTAS:0}", "{PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0}",
               "{PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0,RASTER:2}", "{UNIFORM_A:1,DESC_STEP:1}"]
H200_SMS = 132
SMEM_OPTIN = 232448  # sm_90's 227 KB per block
LLAMA_PREFILL = ["sizes=llm", "sizes.model_names=[llama3_70b]", "sizes.tokens=[4096,16384]"]
SQUARES = [4096, 6144, 8192]


def ws_points(layout="nt", defines=None, sizes=None, precision="bf16"):
    over = [f"variant={VARIANT}", f"precision={precision}", f"layouts=[{layout}]"]
    over += sizes or ["sizes.square=[4096]", "sizes.shapes=[]"]
    if defines:
        over.append(f"variant.{VARIANT}.cuda.defines={defines}")
    return expand(compose_cfg(over))


def ws_point(m, n, k, layout="nt", defines=None):
    (p,) = ws_points(layout, defines, ["sizes.square=[]", f"sizes.shapes=[[{m},{n},{k}]]"])
    assert p.skip_reason is None, p.skip_reason
    return p


# ---- the launcher: point_defines and the layout --------------------------------------------------------
def test_b_kmajor_follows_the_layout_into_the_build_and_the_row():
    nn, nt = ws_point(256, 256, 64, "nn"), ws_point(256, 256, 64, "nt")
    assert nn.expr_env()["layout"] == "nn" and nt.expr_env()["layout"] == "nt"
    assert nn.point_defines() == {"B_KMAJOR": 0} and nt.point_defines() == {"B_KMAJOR": 1}
    bn, bt = build_for(nn), build_for(nt)
    assert "-DB_KMAJOR=0" in bn.flags and "-DB_KMAJOR=1" in bt.flags and bn != bt
    assert bt.kernel_name.endswith("B_KMAJOR=1>") and "B_KMAJOR" not in dict(bt.yaml_defines)
    # the rules see it: B's tensor-map box is over the stored operand
    env = nt.expr_env()
    assert [evaluate(b, env) for b in nt.variant_cfg.cuda.tensor_maps[1].box] == [64, 64]


def test_a_point_define_cannot_be_overridden_as_a_define():
    from gemmlab.points import ConfigError

    with pytest.raises(ConfigError, match="would hide the name 'B_KMAJOR'"):
        ws_points("nt", sizes=["sizes.square=[256]", "sizes.shapes=[]", "+variant.wgmma_ws.cuda.defines.B_KMAJOR=0"])


def test_other_variants_have_no_point_defines_and_keep_their_flags():
    (p,) = expand(compose_cfg(["variant=smem_tiled", "precision=fp32", "sizes.square=[256]", "sizes.shapes=[]"]))
    assert p.point_defines() == {} and build_for(p).point_defines == ()
    assert "layout" in p.expr_env()  # every rule may use it


def test_nn_and_nt_run_tn_and_tt_are_skipped_saying_why():
    for layout in ("nn", "nt", "tn", "tt"):
        (p,) = ws_points(layout)
        why = CudaKernels.workload_reason(p)
        if layout in ("nn", "nt"):
            assert p.skip_reason is None and why is None, (layout, p.skip_reason, why)
        else:
            assert "declares layouts nn, nt" in why and f"layout {layout}" in why, why


def test_llama3_70b_prefill_runs_at_layout_nt_on_the_h200():
    pts = ws_points("nt", sizes=LLAMA_PREFILL)
    assert len(pts) == 8 and {p.m for p in pts} == {4096, 16384}
    for defines in (WS_NT_SWEEP[0], WS_NT_SWEEP[-1]):  # 128 CTAs; 132 with stream-K and its workspace
        for p in ws_points("nt", defines, LLAMA_PREFILL):
            assert p.skip_reason is None and CudaKernels.workload_reason(p) is None, (p.shape_name, p.skip_reason)
            s = launch_shape(p, sm_count=H200_SMS)
            assert s.smem_bytes <= SMEM_OPTIN and s.grid[0] % 2 == 0 and s.grid[0] <= H200_SMS


def test_launch_rules_at_the_h200_sizes():
    """128 CTAs by default; stream-K with GRID_CTAS 0 takes all 132 SMs (66 clusters) and a workspace
    of a counter per CTA and consumer and two fp32 partials of a consumer's tile per CTA."""
    for defines in WS_NT_SWEEP:
        pts = ws_points("nt", defines, [f"sizes.square=[{','.join(map(str, SQUARES))}]", "sizes.shapes=[]"])
        assert len(pts) == len(SQUARES)
        for p in pts:
            s = launch_shape(p, sm_count=H200_SMS)
            ctas = 132 if "GRID_CTAS:0" in defines else 128
            assert s.grid == (ctas, 1, 1) and dict(s.let)["CTAS"] == ctas
            counters = 256 * -(-ctas * 2 * 4 // 256)  # an int per CTA and consumer, to 256 bytes
            assert s.workspace_bytes == (counters + ctas * 2 * 128 * 256 * 4 if "STREAM_K:1" in defines else 0)
            assert 48 * 1024 < s.smem_bytes <= SMEM_OPTIN


def test_stream_k_without_the_producer_schedule_is_skipped_saying_why():
    (p,) = ws_points("nt", "{STREAM_K:1,GRID_CTAS:0}")
    assert p.skip_reason and "STREAM_K needs PRODUCER_SCHEDULES 1" in p.skip_reason, p.skip_reason
    (p,) = ws_points("nt", "{STREAM_K:1,GRID_CTAS:0,PRODUCER_SCHEDULES:1}")
    assert p.skip_reason is None, p.skip_reason


def test_tensor_maps_at_nt_are_over_the_stored_n_x_k_b():
    from test_hopper_kernels import _FakeArray

    from gemmlab.gpu import tma

    m, n, k = 1000, 264, 72
    p = ws_point(m, n, k, "nt")
    specs = tma.resolve(p, {"A": _FakeArray(m, k), "B": _FakeArray(n, k), "C": _FakeArray(m, n)},
                        p.variant_cfg.cuda.tensor_maps)
    b = specs[1]
    assert (b.rows, b.cols, b.row_stride_bytes, b.box_rows, b.box_cols) == (n, k, 2 * k, 64, 64)
    for s in specs:
        tma.check(s)
    with pytest.raises(tma.TensorMapError, match="array shape"):  # B as nn stores it is refused at nt
        tma.resolve(p, {"A": _FakeArray(m, k), "B": _FakeArray(k, n), "C": _FakeArray(m, n)},
                    p.variant_cfg.cuda.tensor_maps)


def test_the_sweep_is_the_same_in_the_session_script_and_the_yaml():
    script = (ROOT / ".ci" / "h200-session.sh").read_text()
    yaml = (ROOT / "conf" / "variant" / "wgmma_ws.yaml").read_text()
    listed = "variant.wgmma_ws.cuda.defines=" + ",".join(WS_NT_SWEEP)
    stage = script[script.index("  tune_ws_nt)"):]
    stage = stage[:stage.index(";;")]
    assert stage.count(listed) == 2 and listed in yaml, "tune_ws_nt, the YAML header and WS_NT_SWEEP differ"
    assert "layouts=[nt]" in stage and "llama3_70b" in stage and "4096,16384" in stage


# ---- the tile schedules on the host ---------------------------------------------------------------------
CHECKER = ROOT / "kernels" / "cuda" / "common" / "host_emulation" / "schedule_check.cpp"


def schedule_checker(folder: Path, include: Path = ROOT / "kernels" / "cuda") -> Path:
    """schedule_check.cpp built with g++ against the tile_schedule.cuh under ``include`` (once per
    session and header)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not found")
    exe = session_folder(folder, "schedule-check") / f"check-{hashlib.sha1(str(include).encode()).hexdigest()[:12]}"
    if not exe.exists():
        tmp = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")
        subprocess.run(["g++", "-std=c++20", "-O1", f"-I{include}", str(CHECKER), "-o", str(tmp)], check=True)
        os.replace(tmp, exe)
    return exe


def run_checker(exe: Path, cases):
    text = "".join(" ".join(map(str, c)) + "\n" for c in cases)
    out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == len(cases)
    return out


def h200_cases():
    """(raster, group_m, cluster rows, tile columns, k-tiles, clusters, stream_k) at every size the
    session runs: 64 clusters (128 CTAs) and 66 (all 132 SMs)."""
    shapes = [(n, n, n) for n in SQUARES] + [(p.m, p.n, p.k) for p in ws_points("nt", sizes=LLAMA_PREFILL)]
    return [(raster, 8, -(-m // 256), -(-n // 256), -(-k // 64), units, sk)
            for m, n, k in shapes for raster in (0, 1, 2) for units in (64, 66) for sk in (0, 1)]


def test_every_order_and_split_covers_each_tile_and_k_tile_once(tmp_path_factory):
    exe = schedule_checker(tmp_path_factory.getbasetemp())
    rng = np.random.default_rng(3)
    small = [(r, int(rng.choice([1, 2, 8])), m, n, int(rng.integers(1, 9)), int(rng.integers(1, 70)), int(rng.integers(0, 2)))
             for r in (0, 1, 2) for m in range(1, 30) for n in range(1, 30)]
    cases = h200_cases() + small
    out = run_checker(exe, cases)
    bad = [(c, o) for c, o in zip(cases, out) if not o.startswith("ok")]
    assert not bad, bad[:5]
    # the Hilbert order moves to a neighbouring tile at every step, but for one diagonal step where
    # the longer side is odd and the shorter even (no path can avoid it there)
    for (r, _g, m, n, *_), o in zip(cases, out):
        if r == 2:
            steps, adjacent = map(int, o.split()[1:])
            long_, short = max(m, n), min(m, n)
            assert steps - adjacent <= (1 if long_ % 2 and not short % 2 else 0), (m, n, o)


def test_stream_k_cuts_only_where_the_last_wave_leaves_clusters_idle():
    """At 66 clusters every size of the session leaves the last wave partly idle (so stream-K cuts
    tiles); at 64 none does (every one is a whole number of waves: stream-K changes nothing)."""
    for raster, g, m, n, k, units, sk in h200_cases():
        if sk and raster == 0:
            assert ((m * n) % units != 0) == (units == 66), (m, n, units)


def test_the_schedule_check_fails_an_order_that_maps_a_tile_twice(tmp_path_factory):
    folder = session_folder(tmp_path_factory.getbasetemp(), "schedule-mutant") / "hopper"
    folder.mkdir(parents=True, exist_ok=True)
    header = (ROOT / "kernels" / "cuda" / "hopper" / "tile_schedule.cuh").read_text()
    old = "return {first_m + local % rows,"
    assert header.count(old) == 1, "the mutation no longer matches the header"
    (folder / "tile_schedule.cuh").write_text(header.replace(old, "return {first_m + local % rows / 2 * 2,"))
    exe = schedule_checker(tmp_path_factory.getbasetemp(), folder.parent)
    (out,) = run_checker(exe, [(0, 8, 32, 32, 128, 64, 0)])
    assert out.startswith("error") and "has indices" in out, out


# ---- builds ------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("layout", ["nn", "nt"])
@pytest.mark.parametrize("defines", WS_NT_SWEEP)
def test_sweep_builds_without_spills_and_keeps_its_path(defines, layout, tmp_path_factory):
    from test_hopper_kernels import build, opcodes, ptxas_numbers, sass

    over = [f"layouts=[{layout}]", f"variant.{VARIANT}.cuda.defines={defines}"]
    cubin, report = build(VARIANT, "bf16", session_folder(tmp_path_factory.getbasetemp(), "cuda-cache"), over)
    nums = ptxas_numbers(report)
    assert nums["spill"] == 0 and nums["stack"] == 0 and nums["registers"] <= 255, (defines, layout, nums)
    assert "warning" not in report.lower(), report
    text = sass(cubin)
    ops = opcodes(text)
    hgmma = [x for x in ops if x.startswith("HGMMA")]
    assert hgmma and all(x.startswith("HGMMA.64x256x16.F32.BF16") for x in hgmma), set(hgmma)
    assert ("tnspB" in text) == (layout == "nn"), f"{layout}: the B transpose bit must be set for nn only"
    assert any(x.startswith("UTMALDG.2D.MULTICAST") for x in ops) and any(x.startswith("UTMASTG.2D") for x in ops)
    assert any(x.startswith("ATOMG") for x in ops) == ("STREAM_K:1" in defines), defines
    assert not [x for x in ops if x.startswith(("LDL", "STL"))]


# The default kernel (nn, every define of issue 32 at 0) as main built it before issue 32 (0afafc5),
# the same bf16 SASS as at the commits of the H200 rows that measured it (session5c ba0c639, the
# header's table; session5e 4bc4942; session6b 741893b): sha256 of its SASS instructions (the text
# after each address, branch targets included) from nvcc 13.0.88, read by cuobjdump 13.5.
MEASURED_NVCC = "13.0.88"
MEASURED_DEFAULT_SASS = {
    "bf16": "56fa74d757f73f130d3dfb1fe3caadba42d6ae5bf1a1ba0603ca99d32d71d638",
    "fp16": "1555cf70dde9bd1184656f47e5a4819d8889068261429c7e6a89decb36efbb4e",
}


def sass_digest(text: str) -> str:
    lines = re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", text)
    assert lines, "no instructions in the SASS"
    return hashlib.sha256("\n".join(" ".join(x.split()) for x in lines).encode()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_the_default_kernel_is_the_measured_code(precision, tmp_path_factory):
    """The new scheduling path is behind PRODUCER_SCHEDULES (0): the default nn kernel must stay the
    SASS the H200 measured. A change to it is measured (tune_ws) before it becomes the default; then
    this digest is updated with the rows that measured it."""
    from test_hopper_kernels import build, sass

    from gemmlab.backends import nvcc

    found = nvcc.find_nvcc()
    if found is None or nvcc.nvcc_version(found) != MEASURED_NVCC:
        pytest.skip(f"the recorded SASS is nvcc {MEASURED_NVCC}'s (here: {found and nvcc.nvcc_version(found)})")
    cache = session_folder(tmp_path_factory.getbasetemp(), "cuda-cache")
    # with the tensor maps in the device buffer, as they were passed then (MAP_PARAMS 0; by value, the default since
    # h200-2026-12-05/session34c, which measured it at layout nt)
    cubin, _ = build(VARIANT, precision, cache, ["layouts=[nn]", f"variant.{VARIANT}.cuda.defines.MAP_PARAMS=0"])
    assert sass_digest(sass(cubin)) == MEASURED_DEFAULT_SASS[precision], (
        f"stage 12's default {precision} kernel is no longer the measured code (or cuobjdump prints it otherwise)")
    if precision == "bf16":  # the check can fail: the producer-only schedule is other code
        other, _ = build(VARIANT, precision, cache, ["layouts=[nn]", f"variant.{VARIANT}.cuda.defines.MAP_PARAMS=0",
                                                     f"variant.{VARIANT}.cuda.defines.PRODUCER_SCHEDULES=1"])
        assert sass_digest(sass(other)) != MEASURED_DEFAULT_SASS[precision]


# ---- the stage on the CPU ----------------------------------------------------------------------------
# Most entries run without clusters (CLUSTER_M 1) on one CTA per emulated SM (GRID_CTAS 0); the driver runs 2-CTA
# clusters too (a cluster's blocks together: B's multicast halves, the slot releases to both CTAs), the YAML's defaults.
EMU = "CLUSTER_M:1,GRID_CTAS:0"
EMU_ARGS = "a.data(), b.data(), c.data(), M, N, K, {maps}, gemm_host::emu_workspace()"
UNIT_ROUNDOFF = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


def emulate(point, folder: Path, rng, sm_count, launches=1, source: Path | None = None, reverse=False):
    """Stage 12 at ``point`` through the host emulation (``source``: a mutant), launched ``launches``
    times on one workspace (C poisoned before each; ``reverse``: the blocks last to first); returns
    (C as float64, the check's result)."""
    import ml_dtypes
    from test_cuda_kernels import emulator
    from test_hopper_emulation import emu_maps_args, run_hopper_emulation

    from gemmlab.measure import check

    if shutil.which("g++") is None:
        pytest.skip("g++ not found (host emulation)")
    build = build_for(point)
    if source is not None:
        build = dataclasses.replace(build, source=source)
    exe = emulator(build, str(folder.parent), EMU_ARGS.format(maps=emu_maps_args(point, build)))
    m, n, k = point.m, point.n, point.k
    a = rng.standard_normal((m, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    stored_b = np.ascontiguousarray(b.T) if point.layout == "nt" else b
    env = {"GEMMLAB_EMU_WORKSPACE_BYTES": str(launch_shape(point, sm_count=sm_count).workspace_bytes),
           "GEMMLAB_EMU_LAUNCHES": str(launches), **({"GEMMLAB_EMU_REVERSE_BLOCKS": "1"} if reverse else {})}
    c = run_hopper_emulation(point, exe, folder, a, stored_b, sm_count, env)
    ref = check.Reference.gemm(np, a, b, check.model_of(point), point.tolerance, point.out_dtype)
    return c, ref.verify(c)


def assert_right(point, c, res, what):
    assert not np.isnan(c).any(), f"{what}: {np.isnan(c).sum()} elements of C never written"
    assert res.passed, f"{what} at {point.m}x{point.n}x{point.k}: {res.failure()}"


# (layout, defines, shapes, emulated SMs, launches). Partial tiles in M, N and K everywhere.
# - nt at stage 12's edge shapes (test_hopper_emulation.WS_EMULATED_SHAPES): 2 x 3 tiles each CTA
#   walking 3 with the ring wrapping, fewer k-tiles than stages, one row of C; each role walking the
#   tiles (the default) and the producer handing them out (PRODUCER_SCHEDULES 1, its end slot too).
# - the orders on 3 x 5 tiles (300 x 1032, one k-tile) over 4 CTAs: with GROUP_M 2 the second group
#   walks its columns backwards (RASTER 1); the Hilbert curve's turns (RASTER 2, on both paths).
# - stream-K on 2 x 4 tiles (200 x 1000) of 5 k-tiles (K = 264) over 3 CTAs: one data-parallel tile
#   each, then 5 tiles cut into 3 runs of 8, 8 and 9 k-tiles: two tiles cut (at k-tile 3 and 1), three
#   whole; launched twice on one workspace, and once with the blocks in reverse order (the other
#   part of each cut tile arrives second): C must be the same bits. nt with the Hilbert order and the
#   TMA store, nn with the direct stores after the fixup (stream-K needs PRODUCER_SCHEDULES 1).
SK_SHAPE = (200, 1000, 264)
EDGES = [(200, 520, 200), (129, 264, 72), (1, 8, 64)]
PS = ",PRODUCER_SCHEDULES:1"
SK = PS + ",STREAM_K:1"
EMULATED = [
    ("nt", EMU, EDGES, 2, 1),
    ("nt", EMU + PS, EDGES, 2, 1),
    ("nt", EMU + ",RASTER:1,GROUP_M:2", [(300, 1032, 64)], 4, 1),
    ("nt", EMU + ",RASTER:2", [(300, 1032, 64)], 4, 1),
    ("nt", EMU + PS + ",RASTER:2", [(300, 1032, 64)], 4, 1),
    ("nt", EMU + SK + ",RASTER:2", [SK_SHAPE], 3, 2),
    ("nn", EMU + SK + ",EPI_TMA:0", [SK_SHAPE], 3, 2),
    # the issue path's defines (A's descriptors uniform, each k16 step's the first's + a constant: 32 bytes for A
    # and K-major B, 2 KB for N-major B) at both layouts
    ("nt", EMU + ",UNIFORM_A:1,DESC_STEP:1", EDGES, 2, 1),
    ("nn", EMU + ",UNIFORM_A:1,DESC_STEP:1", EDGES, 2, 1),
    # the YAML's defaults: 2-CTA clusters with B multicast on the grid its rule gives (2 and 4 emulated SMs: one and two
    # clusters; at 129 x 264 and 1 x 8 the cluster's second CTA lies wholly past M), both layouts; stream-K in clusters
    ("nt", "", EDGES, 2, 1),
    ("nn", "", EDGES, 4, 1),
    ("nt", "GRID_CTAS:0" + SK, [SK_SHAPE], 4, 2),
]


@pytest.mark.slow
@pytest.mark.parametrize("layout,defines,shapes,sms,launches", EMULATED, ids=[f"{e[0]}-{e[1]}" for e in EMULATED])
def test_stage_computes_a_b_on_the_cpu(layout, defines, shapes, sms, launches, tmp_path_factory):
    folder = tmp_path_factory.mktemp("emu-ws-nt")
    for m, n, k in shapes:
        p = ws_point(m, n, k, layout, "{" + defines + "}")
        c, res = emulate(p, folder, np.random.default_rng(12), sms, launches)
        assert_right(p, c, res, f"{layout} {defines}")
        # fp32 accumulation, one rounding to bf16: well inside the output's unit roundoff
        assert res.rel_error < UNIT_ROUNDOFF[p.out_dtype], (defines, m, n, k, res.rel_error)
        if "STREAM_K:1" in defines:  # the same inputs, the other arrival order: the same bits
            c2, res2 = emulate(p, folder, np.random.default_rng(12), sms, reverse=True)
            assert_right(p, c2, res2, f"{layout} {defines}, blocks reversed")
            assert np.array_equal(c, c2), "stream-K's result depends on which part of a tile arrives second"


def mutant(folder: Path, name: str, old: str, new: str, header: bool = False) -> Path:
    """Stage 12 with one deliberate bug, in the .cu or (header) in hopper/tile_schedule.cuh, in a folder
    of its own beside copies of the hopper headers (the replaced text must occur exactly once)."""
    out = session_folder(folder, f"ws-mutant-{name}")
    shutil.copytree(ROOT / "kernels" / "cuda" / "hopper", out / "hopper", dirs_exist_ok=True)
    target = (out / "hopper" / "tile_schedule.cuh") if header else (out / "12_wgmma_ws.cu")
    text = (ROOT / "kernels" / "cuda" / ("hopper/tile_schedule.cuh" if header else "12_wgmma_ws.cu")).read_text()
    assert text.count(old) == 1, f"the mutation {name!r} no longer matches"
    target.write_text(text.replace(old, new))
    if header:
        shutil.copy(ROOT / "kernels" / "cuda" / "12_wgmma_ws.cu", out / "12_wgmma_ws.cu")
    return out / "12_wgmma_ws.cu"


@pytest.mark.slow
def test_emulation_catches_b_read_with_the_transpose_bit_at_nt(tmp_path_factory):
    folder = tmp_path_factory.mktemp("emu-ws-tnsp")
    src = mutant(folder.parent, "tnsp", "wgmma_m64k16<BN, B_KMAJOR ? 0 : 1, TIN>", "wgmma_m64k16<BN, 1, TIN>")
    p = ws_point(*EMULATED[0][2][0], "nt", "{" + EMU + "}")
    c, res = emulate(p, folder, np.random.default_rng(1), 2, source=src)
    assert not res.passed and res.elem_fail > 0, "B read N-major at layout nt went unnoticed"


@pytest.mark.slow
def test_emulation_catches_an_order_that_never_visits_a_column(tmp_path_factory):
    """The serpentine order off by one: the second group's first column is never computed (its C stays
    NaN) and a column past N is computed instead (TMA clips it)."""
    folder = tmp_path_factory.mktemp("emu-ws-order")
    src = mutant(folder.parent, "order", "n_tiles - 1 - c.n", "n_tiles - c.n", header=True)
    p = ws_point(300, 1032, 64, "nt", "{" + EMU + ",RASTER:1,GROUP_M:2}")
    c, res = emulate(p, folder, np.random.default_rng(2), 4, source=src)
    assert np.isnan(c[256:300, 0:256]).all() and not res.passed, "a tile never computed went unnoticed"


@pytest.mark.slow
def test_emulation_catches_stream_k_runs_that_overlap(tmp_path_factory):
    """Each run begins one k-tile early: the k-tile at a cut is summed twice."""
    folder = tmp_path_factory.mktemp("emu-ws-overlap")
    src = mutant(folder.parent, "overlap", "sk_begin = static_cast<int>(iters * unit / units);",
                 "sk_begin = static_cast<int>(iters * unit / units) - (unit > 0);", header=True)
    p = ws_point(*SK_SHAPE, "nt", "{" + EMU + SK + "}")
    c, res = emulate(p, folder, np.random.default_rng(3), 3, source=src)
    assert not res.passed and res.elem_fail > 0, "a k-tile computed twice went unnoticed"


@pytest.mark.slow
def test_emulation_catches_counters_left_dirty_for_the_next_launch(tmp_path_factory):
    """Right once, wrong when launched again: in the second launch neither part of a cut tile finds
    the count it expects (0 or 1), so the tile is never finished."""
    folder = tmp_path_factory.mktemp("emu-ws-dirty")
    src = mutant(folder.parent, "dirty", "if (local_tid == 0) workspace[who] = 0;", "")
    p = ws_point(*SK_SHAPE, "nt", "{" + EMU + SK + "}")
    c, res = emulate(p, folder, np.random.default_rng(4), 3, launches=1, source=src)
    assert_right(p, c, res, "the first launch")
    c, res = emulate(p, folder, np.random.default_rng(4), 3, launches=2, source=src)
    assert np.isnan(c).any() or not res.passed, "counters left dirty went unnoticed"


def test_header_names_every_define_the_yaml_sets():
    p = ws_point(256, 256, 64)
    header = (ROOT / "kernels" / "cuda" / "12_wgmma_ws.cu").read_text().split("#include")[0]
    for name in [*p.variant_cfg.cuda.defines, *p.point_defines()]:
        if name not in ("BM", "BN", "BK", "PRODUCER_REGS", "CONSUMER_REGS"):
            assert re.search(rf"\b{name}\b", header), f"the header does not mention {name}"
